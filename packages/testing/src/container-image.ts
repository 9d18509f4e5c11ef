import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);

/**
 * A minimal container image for the ENV/CONTAINER tests: Debian's static busybox and base-files
 * (for /etc/os-release), unpacked by mmdebstrap, plus a marker file no host has. Built once per
 * machine into a cache keyed by everything that makes it (suite, packages, the steps after
 * unpacking), so CI pays the download once; a changed recipe is a new key, never a stale image.
 */

export const HAS_CONTAINER_TOOLS = process.getuid?.() === 0 && existsSync("/usr/bin/bwrap") && existsSync("/usr/bin/mmdebstrap");

const SUITE = "bookworm";
const MIRROR = process.env.CE_TEST_DEBIAN_MIRROR ?? "http://deb.debian.org/debian";
const PACKAGES = ["busybox-static", "base-files"];
const MARKER = "etc/ce-test-image";
// After unpacking (no chroot, so it needs no root of the image's own): busybox's applets as
// relative links, and the marker holding the key.
const HOOK =
  'for a in $("$1"/bin/busybox --list); do [ -e "$1/bin/$a" ] || ln -s busybox "$1/bin/$a"; done; printf "%s\\n" "$CE_IMAGE_KEY" > "$1/' +
  MARKER +
  '"';

export interface TestImage {
  /** The images directory (CONTAINER_IMAGES) and the image's name in it. */
  images: string;
  name: string;
  dir: string;
  /** The marker file's text inside the image (/etc/ce-test-image). */
  marker: string;
  /** Milliseconds the build took; 0 when the cached image was used. */
  buildMs: number;
}

/**
 * The cached image, built when missing. The cache must be readable by the mapped test accounts
 * (default /var/cache/ce-test-images, 0755; CE_TEST_IMAGE_CACHE overrides it). Two suites
 * building at once each build into a private directory; the first rename wins.
 */
export async function testImage(): Promise<TestImage> {
  const images = process.env.CE_TEST_IMAGE_CACHE ?? "/var/cache/ce-test-images";
  const key = createHash("sha256")
    .update(JSON.stringify({ SUITE, PACKAGES, HOOK, variant: "extract" }))
    .digest("hex")
    .slice(0, 16);
  const name = `busybox-${SUITE}-${key}`;
  const dir = join(images, name);
  const marker = `${key}\n`;
  const cached = (): boolean => {
    try {
      return readFileSync(join(dir, MARKER), "utf8") === marker;
    } catch {
      return false;
    }
  };
  if (cached()) return { images, name, dir, marker, buildMs: 0 };
  mkdirSync(images, { recursive: true, mode: 0o755 });
  const tmp = join(images, `.${name}.tmp-${process.pid}`);
  rmSync(tmp, { recursive: true, force: true });
  const t0 = Date.now();
  try {
    await run(
      "mmdebstrap",
      ["--quiet", "--variant=extract", `--include=${PACKAGES.join(",")}`, `--extract-hook=${HOOK}`, SUITE, tmp, MIRROR],
      {
        env: { ...process.env, CE_IMAGE_KEY: key },
        timeout: 300_000,
      },
    );
    try {
      renameSync(tmp, dir);
    } catch (e) {
      if (!cached()) throw e; // another suite's build got there first: use it
    }
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
  if (!cached()) throw new Error(`container test image ${dir}: no marker after the build`);
  return { images, name, dir, marker, buildMs: Date.now() - t0 };
}
