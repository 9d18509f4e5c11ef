import { mkdtemp, readFile, rm, stat, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FileQueue } from "./files.js";
import type { CreateJobOp } from "./jobfiles.js";

let root: string;
const q = new FileQueue("test-createjob", 2);
/** Like createJobs: every job's operation issued in one turn; per job, undefined or its error. */
const createFiles = async (jobs: readonly CreateJobOp[]) =>
  (await Promise.allSettled(jobs.map((j) => q.one(j)))).map((r) =>
    r.status === "fulfilled" ? undefined : (r.reason as NodeJS.ErrnoException),
  );
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), "createjob-"));
});
afterAll(async () => {
  await q.close();
  await rm(root, { recursive: true, force: true });
});

const job = (name: string, files = ["one", `1 ${name}`, "status", "ACCEPTED\n"]): CreateJobOp => [
  "createJob",
  [join(root, name, "a/b"), join(root, name, "s")],
  join(root, name, "a/b"),
  files,
];

describe("createJob on the file threads", () => {
  it("creates every job's dirs and files with their modes, results in job order over the workers", async () => {
    // More than one thread's share: a turn this large is split over both threads.
    const jobs = Array.from({ length: 70 }, (_, i) => job(`j${i}`));
    expect(await createFiles(jobs)).toEqual(jobs.map(() => undefined));
    for (let i = 0; i < 70; i++) {
      expect(await readFile(join(root, `j${i}`, "a/b/one"), "utf8")).toBe(`1 j${i}`);
      expect((await stat(join(root, `j${i}`, "a/b/status"))).mode & 0o777).toBe(0o600);
      expect((await stat(join(root, `j${i}`, "s"))).mode & 0o777).toBe(0o700);
    }
  });

  it("never overwrites a file (wx): that job fails with EEXIST before its later files, the others are created", async () => {
    const [a, b, c] = [job("x1"), job("x2"), job("x3")];
    await createFiles([job("x2", [])]);
    await writeFile(join(root, "x2/a/b/one"), "planted");
    const r = await createFiles([a, b, c]);
    expect(r[0]).toBeUndefined();
    expect(r[1]).toMatchObject({ code: "EEXIST" });
    expect(r[2]).toBeUndefined();
    expect(await readFile(join(root, "x2/a/b/one"), "utf8")).toBe("planted");
    await expect(stat(join(root, "x2/a/b/status"))).rejects.toMatchObject({ code: "ENOENT" }); // status stays last
  });

  it("never writes through a link planted at a file's name", async () => {
    await createFiles([job("l1", [])]);
    await symlink(join(root, "target"), join(root, "l1/a/b/one"));
    expect((await createFiles([job("l1")]))[0]).toMatchObject({ code: "EEXIST" });
    await expect(stat(join(root, "target"))).rejects.toMatchObject({ code: "ENOENT" });
  });
});
