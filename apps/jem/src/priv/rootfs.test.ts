import { mkdir, mkdtemp, readdir, rm, stat, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { removeTree } from "./rootfs.js";

let base: string;
beforeAll(async () => {
  base = await mkdtemp(join(tmpdir(), "rootfs-"));
});
afterAll(async () => {
  await rm(base, { recursive: true, force: true });
});

describe("rootfs (trees a job can write)", () => {
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
