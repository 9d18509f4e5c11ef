import { spawnSync } from "node:child_process";
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

// The shipped ENV/CONTAINER script by itself (no bwrap, no job): the image name comes from the
// job's RTE option and becomes a path under the site's image directory; the binds are the site's
// words. apps/jem/test/container-rte.test.ts runs real containers.

const SCRIPT = fileURLToPath(new URL("../rte/ENV/CONTAINER", import.meta.url));
let dir: string;
let images: string;
let fakeRt: string;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "ce-ctr-rte-"));
  images = join(dir, "images");
  mkdirSync(join(images, "ok", "usr"), { recursive: true });
  mkdirSync(join(images, "vendor", "el9", "usr"), { recursive: true });
  mkdirSync(join(dir, "site-bind"));
  mkdirSync(join(dir, "session"));
  // A runtime that records the arguments it was given, one per line, instead of making a container.
  fakeRt = join(dir, "rt");
  writeFileSync(fakeRt, `#!/bin/bash\nprintf '%s\\n' "$@" > "${join(dir, "rt.args")}"\n`);
  chmodSync(fakeRt, 0o755);
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Stage 1 of the RTE (the node's check) for an image name: exit status and stderr. */
function stage1(name: string) {
  const r = spawnSync("/bin/bash", [SCRIPT, "1", name], {
    cwd: dir,
    env: { PATH: "/usr/bin:/bin", CONTAINER_IMAGES: images, CONTAINER_RUNTIME: fakeRt },
    encoding: "utf8",
  });
  return { status: r.status, stderr: r.stderr };
}

describe("ENV/CONTAINER image names from the job", () => {
  it.each(["ok", "vendor/el9"])("%j names an image under the site's directory", (name) => {
    expect(stage1(name)).toEqual({ status: 0, stderr: "" });
  });

  it.each([
    "..",
    "../images/ok",
    "ok/..",
    "vendor/../ok",
    "/etc",
    "ok\n",
    "ok\nvendor/el9",
    "o*",
    "o?",
    "[o]k",
    "ok ok",
    "vendor//el9",
    "vendor/",
    ".hidden",
    "$(touch pwned)",
    "o".repeat(201),
  ])("%j is refused as not valid, before any path is made of it", (name) => {
    const r = stage1(name);
    expect(r.status).not.toBe(0);
    expect(r.stderr).toMatch(/^ENV\/CONTAINER: image name ".*" is not valid/s);
    expect(r.stderr.length).toBeLessThan(300); // a long name is cut in the reason
  });
});

describe("ENV/CONTAINER site binds", () => {
  it("binds only existing absolute paths, read-only, word by word and never globbed", () => {
    const binds = `${join(dir, "site-bind")} ${join(dir, "site-*")} relative/dir /no/such/dir ${join(dir, "sess?on")}`;
    const session = join(dir, "session");
    const r = spawnSync(
      "/bin/bash",
      [SCRIPT, "container-exec", fakeRt, join(images, "ok"), "no", session, binds, "--", "/bin/true", "arg"],
      { cwd: session, env: { PATH: "/usr/bin:/bin" }, encoding: "utf8" },
    );
    expect(r.status).toBe(0);
    const args = readFileSync(join(dir, "rt.args"), "utf8").trimEnd().split("\n");
    const pairs = (flag: string) => args.flatMap((a, i) => (a === flag ? [args[i + 1]] : []));
    expect(pairs("--ro-bind").filter((p) => p !== "/sys" && !p?.startsWith(images))).toEqual([join(dir, "site-bind")]);
    expect(pairs("--bind")).toEqual([session]);
    expect(args.slice(-3)).toEqual(["--", "/bin/true", "arg"]);
  });
});
