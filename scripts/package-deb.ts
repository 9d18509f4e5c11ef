// `pnpm package`: the Debian package dist/ce-rest_<version>_<arch>.deb (docs/operations.md
// "Install on a head node"). The gateway, the JEM and ceadm as the bundles of `pnpm build`
// (scripts/build-app.ts: one file each, no node_modules tree, no TypeScript loader), each with
// better-sqlite3's native module compiled for the Node.js that builds the package (`pnpm install`
// runs node-gyp): the package therefore depends on that Node.js major version. Units, the
// conffiles and maintainer scripts are packaging/deb/.
// Usage: node --import tsx scripts/package-deb.ts [--out DIR]   (CE_DEB_VERSION sets the version)
import { execFileSync } from "node:child_process";
import { chmodSync, cpSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { buildApp } from "./build-app.js";

const ROOT = resolve(import.meta.dirname, "..");
const SRC = join(ROOT, "packaging/deb");
export const PACKAGE = "ce-rest";

const git = (...args: string[]) => execFileSync("git", args, { cwd: ROOT, encoding: "utf8" }).trim();

/** `0.1.0+<commits>.g<sha>`: grows with every commit on a branch, so a rebuilt package upgrades. */
export function defaultVersion(): string {
  try {
    return `0.1.0+${git("rev-list", "--count", "HEAD")}.g${git("rev-parse", "--short=8", "HEAD")}`;
  } catch {
    return "0.1.0";
  }
}

function control(version: string, arch: string, installedKb: number): string {
  const major = Number(process.versions.node.split(".")[0]);
  return `${[
    `Package: ${PACKAGE}`,
    `Version: ${version}`,
    `Architecture: ${arch}`,
    "Maintainer: CE REST developers <ce-rest@localhost>",
    `Installed-Size: ${installedKb}`,
    // The native module's ABI is the building Node's major version.
    `Depends: nodejs (>= ${major}), nodejs (<< ${major + 1}), redis-server (>= 5:7.0), passwd, util-linux`,
    "Recommends: slurm-client, munge, ca-certificates",
    "Suggests: gridengine-client, bubblewrap, xrootd-client, fetch-crl, nordugrid-arc-client",
    "Section: net",
    "Priority: optional",
    "Homepage: https://github.com/ce-rest/ce-rest",
    "Description: computing element with the CE REST interface (gateway, JEM, ceadm)",
    " The front end of a cluster: grid users submit batch jobs over HTTPS with the NorduGrid",
    " ARC clients or pyarcrest; the CE stages their data and runs them on the local batch",
    " system (fork, Slurm, Grid Engine) as the local account each user is mapped to.",
    " .",
    " Units: ce-gateway.service, ce-jem.service and the CE's Redis, redis-server@ce.service.",
  ].join("\n")}\n`;
}

function installedSize(dir: string): number {
  let bytes = 0;
  const walk = (d: string) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      if (e.isDirectory()) walk(p);
      else bytes += statSync(p).size;
    }
  };
  walk(dir);
  return Math.ceil(bytes / 1024);
}

/** Builds the package into `outDir`; returns its path. */
export async function buildDeb(opts: { outDir?: string; version?: string } = {}): Promise<string> {
  const version = opts.version ?? process.env.CE_DEB_VERSION ?? defaultVersion();
  if (!/^[0-9][A-Za-z0-9.+~-]*$/.test(version)) throw new Error(`not a Debian version: ${version}`);
  const arch = execFileSync("dpkg", ["--print-architecture"], { encoding: "utf8" }).trim();
  const outDir = opts.outDir ?? join(ROOT, "dist");
  const stage = mkdtempSync(join(tmpdir(), "ce-deb-"));
  chmodSync(stage, 0o755); // the package's root directory
  try {
    const lib = join(stage, "usr/lib", PACKAGE);
    for (const app of ["gateway", "jem", "ceadm"]) {
      const dir = join(lib, app);
      await buildApp(app, dir);
      // Source maps double the size and nothing at run time reads them.
      for (const f of readdirSync(dir)) if (f.endsWith(".map")) rmSync(join(dir, f));
    }
    const put = (from: string, to: string, mode: number) => {
      mkdirSync(join(stage, to, ".."), { recursive: true });
      cpSync(join(SRC, from), join(stage, to));
      chmodSync(join(stage, to), mode);
    };
    put("ceadm", "usr/bin/ceadm", 0o755);
    put("systemd/ce-gateway.service", "lib/systemd/system/ce-gateway.service", 0o644);
    put("systemd/ce-jem.service", "lib/systemd/system/ce-jem.service", 0o644);
    put("ce.yaml", "etc/ce/ce.yaml", 0o644);
    put("redis-ce.conf", "etc/redis/redis-ce.conf", 0o644);
    for (const doc of ["README.md", "docs/operations.md", "docs/configuration.md", "docs/security.md"])
      put(join("..", "..", doc), `usr/share/doc/${PACKAGE}/${doc.replace(/^docs\//, "")}`, 0o644);
    const debian = join(stage, "DEBIAN");
    mkdirSync(debian);
    for (const s of ["postinst", "prerm", "postrm"]) put(`maintainer/${s}`, `DEBIAN/${s}`, 0o755);
    writeFileSync(join(debian, "conffiles"), "/etc/ce/ce.yaml\n/etc/redis/redis-ce.conf\n");
    writeFileSync(join(debian, "control"), control(version, arch, installedSize(stage)));
    mkdirSync(outDir, { recursive: true });
    const deb = join(outDir, `${PACKAGE}_${version}_${arch}.deb`);
    // Files owned by root whoever builds; gzip: xz takes minutes on the bundles for little gain.
    execFileSync("dpkg-deb", ["--root-owner-group", "-Zgzip", "--build", stage, deb], { stdio: ["ignore", "ignore", "inherit"] });
    return deb;
  } finally {
    rmSync(stage, { recursive: true, force: true });
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const i = process.argv.indexOf("--out");
  console.log(await buildDeb(i > 0 ? { outDir: resolve(process.argv[i + 1]!) } : {}));
}
