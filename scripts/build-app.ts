// `pnpm build`: bundles an app into apps/<app>/dist/main.js — one ESM file with the workspace
// packages and npm dependencies inlined (no TypeScript loader at run time: ~15 MB less RSS and a
// faster start), plus the store's Lua scripts next to it (loaded relative to the module) and each
// worker-thread module the app starts, bundled as `<name>.js` beside main.js (where threadhost.ts
// `workerEntry` looks first).
// Files the sources find relative to themselves are copied beside the bundle, where each of them
// looks first: the JEM's back-end scripts (`backends/`), the shipped runtime environments (`rte/`)
// and better-sqlite3's native module (`better_sqlite3.node`, loaded through the shim below).
// Usage: node --import tsx scripts/build-app.ts gateway
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";
import { build, type Options } from "tsup";

type Plugin = NonNullable<Options["esbuildPlugins"]>[number];

/** Worker-thread modules by the name their host asks for (`workerEntry(name, import.meta.url)`). */
const WORKERS: Record<string, string> = {
  "file-worker": "packages/controldir/src/file-worker.ts",
};
/** The workers each app starts (an app bundles only its own). */
const APP_WORKERS: Record<string, string[]> = { gateway: ["file-worker"], jem: ["file-worker"] };

/** Entry modules of what is not an app of its own: `ceadm` is @ce/ops' command line. */
const ENTRIES: Record<string, string> = { ceadm: "packages/ops/src/cli.ts" };

/**
 * better-sqlite3 finds its native module through `bindings`, which searches node_modules trees; in
 * a bundle there is none. This stand-in loads `better_sqlite3.node` from beside the bundle instead
 * (the bundle's `require` is created for the bundle's own URL: see the banner).
 */
const nativeBesideBundle: Plugin = {
  name: "native-beside-bundle",
  setup(b) {
    b.onResolve({ filter: /^bindings$/ }, () => ({ path: "bindings", namespace: "native-beside-bundle" }));
    b.onLoad({ filter: /.*/, namespace: "native-beside-bundle" }, () => ({
      // Through an alias: esbuild leaves it alone (a literal `require('./' + name)` would make it
      // bundle every file under the working directory), and at run time it is the bundle's own
      // `require` (the banner's), so './' is the bundle's directory.
      contents: "const load = require; module.exports = (name) => load('./' + name);",
      loader: "js",
    }));
  },
};

export async function buildApp(app: string, outDir = join(ROOT, "apps", app, "dist")): Promise<string> {
  const workers = Object.fromEntries((APP_WORKERS[app] ?? []).map((w) => [w, join(ROOT, WORKERS[w]!)]));
  await build({
    entry: { main: join(ROOT, ENTRIES[app] ?? join("apps", app, "src/main.ts")), ...workers },
    esbuildPlugins: [nativeBesideBundle],
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
  // The gateway's image is built from its own sources only (deploy/gateway.Dockerfile): no JEM
  // back ends there, and the gateway never runs them.
  if (existsSync(join(ROOT, "apps/jem/backends"))) cpSync(join(ROOT, "apps/jem/backends"), join(outDir, "backends"), { recursive: true });
  cpSync(join(ROOT, "packages/store/rte"), join(outDir, "rte"), { recursive: true });
  // The JEM's /queues page: bull-board's static UI files (admin-app.ts looks for them here).
  if (app === "jem") {
    const from = createRequire(join(ROOT, "packages/ops/package.json"));
    const ui = dirname(createRequire(from.resolve("@bull-board/api")).resolve("@bull-board/ui/package.json"));
    cpSync(join(ui, "dist"), join(outDir, "bull-board-ui/dist"), { recursive: true });
  }
  // The native module as compiled for this Node.js (node-gyp at `pnpm install`): its ABI is the
  // running Node's, which is why the Debian package depends on this Node major version.
  if (readFileSync(join(outDir, "main.js"), "utf8").includes("better_sqlite3.node")) {
    const pkg = dirname(createRequire(join(ROOT, "packages/accounting/package.json")).resolve("better-sqlite3/package.json"));
    const native = join(pkg, "build/Release/better_sqlite3.node");
    if (!existsSync(native)) throw new Error(`${native} is missing: run pnpm install (better-sqlite3 builds it)`);
    cpSync(native, join(outDir, "better_sqlite3.node"));
  }
  return join(outDir, "main.js");
}

const ROOT = resolve(import.meta.dirname, "..");

if (import.meta.url === `file://${process.argv[1]}`) {
  for (const app of process.argv.slice(2)) console.log(`built ${await buildApp(app)}`);
}
