import { chmod, mkdir, mkdtemp, readdir, rm, stat, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { removeTree, setgidOwnDirs } from "./rootfs.js";

let base: string;
beforeAll(async () => {
  base = await mkdtemp(join(tmpdir(), "rootfs-"));
});
afterAll(async () => {
  await rm(base, { recursive: true, force: true });
});

describe("rootfs (trees a job can write)", () => {
  it("setgid goes to the account's own directories below the session, never through a link", async () => {
    const session = join(base, "session");
    const outside = join(base, "outside");
    await mkdir(join(session, "a/b"), { recursive: true });
    await mkdir(outside);
    await writeFile(join(session, "a/file"), "x");
    await symlink(outside, join(session, "a/link"));
    for (const d of [session, join(session, "a"), join(session, "a/b"), outside]) await chmod(d, 0o770);
    await setgidOwnDirs(session, process.getuid!());
    for (const d of [session, join(session, "a"), join(session, "a/b")]) expect((await stat(d)).mode & 0o2000, d).toBe(0o2000);
    expect((await stat(outside)).mode & 0o7777).toBe(0o770);
    expect((await stat(join(session, "a/file"))).mode & 0o2000).toBe(0);
  });

  it("removeTree unlinks a link inside the tree, never its target; a missing tree is fine", async () => {
    const tree = join(base, "tree");
    const victim = join(base, "victim");
    await mkdir(join(tree, "lrms"), { recursive: true });
    await mkdir(victim);
    await writeFile(join(victim, "precious"), "x");
    await symlink(victim, join(tree, "lrms/d"));
    await removeTree(tree);
    await expect(stat(tree)).rejects.toMatchObject({ code: "ENOENT" });
    expect(await readdir(victim)).toEqual(["precious"]);
    await removeTree(tree);
  });
});
