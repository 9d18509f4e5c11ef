import { mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createFiles, type FileBatchJob } from "./filewriter.js";

let root: string;
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), "filewriter-"));
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

const job = (name: string): FileBatchJob => ({
  dirs: [join(root, name, "a/b"), join(root, name, "s")],
  base: join(root, name, "a/b"),
  files: ["one", `1 ${name}`, "status", "ACCEPTED\n"],
});

describe("createFiles (worker thread)", () => {
  it("creates every job's dirs and files with their modes, results in job order over the workers", async () => {
    const jobs = Array.from({ length: 7 }, (_, i) => job(`j${i}`));
    expect(await createFiles(jobs)).toEqual(jobs.map(() => undefined));
    for (let i = 0; i < 7; i++) {
      expect(await readFile(join(root, `j${i}`, "a/b/one"), "utf8")).toBe(`1 j${i}`);
      expect((await stat(join(root, `j${i}`, "a/b/status"))).mode & 0o777).toBe(0o600);
      expect((await stat(join(root, `j${i}`, "s"))).mode & 0o777).toBe(0o700);
    }
  });

  it("never overwrites a file (wx): that job fails with EEXIST before its later files, the others are created", async () => {
    const [a, b, c] = [job("x1"), job("x2"), job("x3")];
    await createFiles([{ dirs: b.dirs, base: b.base, files: [] }]);
    await writeFile(join(root, "x2/a/b/one"), "planted");
    const r = await createFiles([a, b, c]);
    expect(r[0]).toBeUndefined();
    expect(r[1]).toMatchObject({ code: "EEXIST" });
    expect(r[2]).toBeUndefined();
    expect(await readFile(join(root, "x2/a/b/one"), "utf8")).toBe("planted");
    await expect(stat(join(root, "x2/a/b/status"))).rejects.toMatchObject({ code: "ENOENT" }); // status stays last
  });

  it("an empty batch needs no worker", async () => {
    expect(await createFiles([])).toEqual([]);
  });
});
