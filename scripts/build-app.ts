// `pnpm build`: bundles an app into apps/<app>/dist/main.js — one ESM file with the workspace
// packages and npm dependencies inlined (no TypeScript loader at run time: ~15 MB less RSS and a
// faster start), plus the store's Lua scripts next to it (loaded relative to the module) and each
// worker-thread module the app starts, bundled as `<name>.js` beside main.js (where threadhost.ts
// `workerEntry` looks first).
// Usage: node --import tsx scripts/build-app.ts gateway
import { cpSync, mkdirSync, readdirSync } from "node:fs";
import { join, resolve } from "node:path";
import { build } from "tsup";

/** Worker-thread modules by the name their host asks for (`workerEntry(name, import.meta.url)`). */
const WORKERS: Record<string, string> = {
  "file-worker": "packages/controldir/src/file-worker.ts",
};
/** The workers each app starts (an app bundles only its own). */
const APP_WORKERS: Record<string, string[]> = { gateway: ["file-worker"], jem: ["file-worker"] };

export async function buildApp(app: string, outDir = join(ROOT, "apps", app, "dist")): Promise<string> {
  const workers = Object.fromEntries((APP_WORKERS[app] ?? []).map((w) => [w, join(ROOT, WORKERS[w]!)]));
  await build({
    entry: { main: join(ROOT, "apps", app, "src/main.ts"), ...workers },
    format: ["esm"],
    platform: "node",
    target: "node20",
    outDir,
    clean: true,
    silent: true,
    splitting: false,
    sourcemap: true,
    noExternal: [/.*/],
    // Bundled CommonJS dependencies (ioredis, pino, ...) still call require().
    banner: { js: "import { createRequire as __cr } from 'node:module'; const require = __cr(import.meta.url);" },
  });
  mkdirSync(join(outDir, "lua"), { recursive: true });
  // Every package that reads `./lua/<name>.lua` next to itself: in the bundle that is dist/lua.
  // Script names are unique across packages (a collision would overwrite; checked here).
  const seen = new Set<string>();
  for (const pkg of ["store"]) {
    const dir = join(ROOT, `packages/${pkg}/src/lua`);
    for (const f of readdirSync(dir)) {
      if (seen.has(f)) throw new Error(`Lua script name ${f} exists in two packages`);
      seen.add(f);
    }
    cpSync(dir, join(outDir, "lua"), { recursive: true });
  }
  return join(outDir, "main.js");
}

const ROOT = resolve(import.meta.dirname, "..");

if (import.meta.url === `file://${process.argv[1]}`) {
  for (const app of process.argv.slice(2)) console.log(`built ${await buildApp(app)}`);
}
