// A fresh Debian 12 root for the site test of the Debian package (scripts/package-deb.site.test.ts):
// mmdebstrap's `apt` variant plus what the package depends on and Node's own dependencies, made
// once per machine into a directory under a cache keyed by everything that makes it (suite,
// variant, packages, mirror), so a run pays the download once and a changed recipe is a new key.
// Every test run copies a new root from it (freshRoot). Node.js itself is not in it: the test installs it
// the way the README tells a site (NodeSource's nodejs package).
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, renameSync, rmSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);

const SUITE = "bookworm";
const VARIANT = "apt";
const MIRROR = process.env.CE_TEST_DEBIAN_MIRROR ?? "http://deb.debian.org/debian";
/** The package's Depends (redis-server; passwd and util-linux are essential) and nodejs' (python3, ca-certificates). */
const PACKAGES = ["redis-server", "python3", "ca-certificates", "procps"];

export const HAS_SITE_TOOLS = process.getuid?.() === 0 && existsSync("/usr/bin/mmdebstrap");

/** The cached root (complete: a build is renamed into place only when mmdebstrap succeeded). */
export async function cachedSiteRoot(): Promise<{ dir: string; buildMs: number }> {
  const cache = process.env.CE_TEST_IMAGE_CACHE ?? "/var/cache/ce-test-images";
  const key = createHash("sha256").update(JSON.stringify({ SUITE, VARIANT, PACKAGES, MIRROR })).digest("hex").slice(0, 16);
  const dir = join(cache, `site-${SUITE}-${key}`);
  if (existsSync(join(dir, "etc/debian_version"))) return { dir, buildMs: 0 };
  mkdirSync(cache, { recursive: true, mode: 0o755 });
  const tmp = join(cache, `.site-${SUITE}-${key}.tmp-${process.pid}`);
  rmSync(tmp, { recursive: true, force: true });
  const t0 = Date.now();
  try {
    await run("mmdebstrap", ["--quiet", `--variant=${VARIANT}`, `--include=${PACKAGES.join(",")}`, SUITE, tmp, MIRROR], {
      timeout: 900_000,
    });
    try {
      renameSync(tmp, dir);
    } catch (e) {
      if (!existsSync(join(dir, "etc/debian_version"))) throw e; // another build got there first: use it
    }
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
  return { dir, buildMs: Date.now() - t0 };
}

/** A new root for one run: a copy of the cached one (hard links would share the packages' files). */
export async function freshRoot(into: string): Promise<{ root: string; buildMs: number }> {
  const { dir, buildMs } = await cachedSiteRoot();
  await run("cp", ["-a", dir, into], { timeout: 600_000 });
  return { root: into, buildMs };
}
