import { link, mkdir, mkdtemp, readFile, readdir, rm, stat, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FileQueue } from "./files.js";

let dir: string;
const q = new FileQueue("test-files", 1);
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "fsq-"));
});
afterAll(async () => {
  await q.close();
  await rm(dir, { recursive: true, force: true });
});

describe("the file thread (FileQueue)", () => {
  it("reads, replaces, appends and removes as the fs calls do; missing files are null / fine", async () => {
    const f = join(dir, "status");
    expect(await q.one(["read", f])).toBeNull();
    expect(await q.one(["exists", f])).toBe(false);
    await q.one(["write", f, "INLRMS", 0o644]);
    expect(await readFile(f, "utf8")).toBe("INLRMS");
    expect((await stat(f)).mode & 0o777).toBe(0o644);
    await q.one(["append", f, "\nmore", 0o600]);
    expect(await q.one(["read", f])).toBe("INLRMS\nmore");
    expect(await q.one(["exists", f])).toBe(true);
    await q.one(["unlink", f]);
    await q.one(["unlink", f]);
    expect(await q.one(["read", f])).toBeNull();
    // No temporary file is left behind.
    expect(await readdir(dir)).toEqual([]);
  });

  it("runs one call's operations in order and stops at the first failure, with its code", async () => {
    const f = join(dir, "errors");
    const err = await q
      .run([
        ["append", f, "a\n", 0o600],
        ["write", join(dir, "no/such/dir/x"), "x", 0o600],
        ["append", f, "b\n", 0o600],
      ])
      .catch((e: unknown) => e);
    expect((err as NodeJS.ErrnoException).code).toBe("ENOENT");
    expect(await readFile(f, "utf8")).toBe("a\n");
    // Operations of many callers in one turn go in one message; each gets its own answer.
    const many = await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        q.run([
          ["write", join(dir, `m${i}`), String(i), 0o600],
          ["read", join(dir, `m${i}`)],
        ]),
      ),
    );
    expect(many.map((r) => r[1])).toEqual(Array.from({ length: 50 }, (_, i) => String(i)));
  });

  it("readSmall never follows a link, bounds the size, reads the tail; lexists sees a dangling link", async () => {
    const f = join(dir, "diag");
    await writeFile(f, "0123456789");
    expect(await q.one(["readSmall", f, 4, false])).toBe("0123");
    expect(await q.one(["readSmall", f, 4, true])).toBe("6789");
    await symlink(f, join(dir, "link"));
    expect(await q.one(["readSmall", join(dir, "link"), 100, false])).toBeNull();
    await symlink(join(dir, "gone"), join(dir, "dangling"));
    expect(await q.one(["exists", join(dir, "dangling")])).toBe(false);
    expect(await q.one(["lexists", join(dir, "dangling")])).toBe(true);
  });

  it("directories: isEmptyDir, mkdirOwned (EEXIST when there), ownEmptyDir only for an empty private dir of the given owners", async () => {
    const d = join(dir, "sess");
    await mkdir(d, { mode: 0o700 });
    expect(await q.one(["isEmptyDir", d])).toBe(true);
    const uid = process.getuid!();
    const gid = process.getgid!();
    expect(await q.one(["ownEmptyDir", d, [uid + 1], uid, gid, 0o750])).toBe(false);
    expect(await q.one(["ownEmptyDir", d, [uid], uid, gid, 0o750])).toBe(true);
    expect((await stat(d)).mode & 0o7777).toBe(0o750);
    // Not private any more (group bits): left alone.
    expect(await q.one(["ownEmptyDir", d, [uid], uid, gid, 0o700])).toBe(false);
    await writeFile(join(d, "f"), "x");
    expect(await q.one(["isEmptyDir", d])).toBe(false);
    const b = join(dir, "lrms");
    await q.one(["mkdirOwned", b, uid, gid, 0o2770]);
    expect((await stat(b)).mode & 0o7777).toBe(0o2770);
    expect(((await q.one(["mkdirOwned", b, uid, gid, 0o2770]).catch((e: unknown) => e)) as NodeJS.ErrnoException).code).toBe("EEXIST");
    await q.one(["writeOwned", join(b, "job.sh"), "#!/bin/bash\n", uid, gid, 0o700]);
    expect((await stat(join(b, "job.sh"))).mode & 0o777).toBe(0o700);
    expect(await readdir(b)).toEqual(["job.sh"]);
  });

  it("root's rules: the last directory is never a link, the name never followed, a hard link never read", async () => {
    // A batch dir the job swapped for a link to somewhere else: every operation refuses it.
    const elsewhere = join(dir, "elsewhere");
    await mkdir(elsewhere);
    await writeFile(join(elsewhere, "diag"), "not the job's");
    await symlink(elsewhere, join(dir, "lrms-link"));
    for (const op of [
      ["write", join(dir, "lrms-link/job.sh"), "x", 0o600],
      ["append", join(dir, "lrms-link/diag"), "x", 0o600],
      ["unlink", join(dir, "lrms-link/diag")],
      ["create", join(dir, "lrms-link/new"), "x", 0o600],
    ] as const) {
      expect(((await q.one(op).catch((e: unknown) => e)) as NodeJS.ErrnoException).code, op[0]).toBe("ENOTDIR");
    }
    expect(await q.one(["readSmall", join(dir, "lrms-link/diag"), 100, false])).toBeNull();
    expect(await readdir(elsewhere)).toEqual(["diag"]);
    expect(await readFile(join(elsewhere, "diag"), "utf8")).toBe("not the job's");
    // A link as the name: append and read refuse it, unlink removes the link only.
    await symlink(join(elsewhere, "diag"), join(dir, "errors-link"));
    expect(((await q.one(["append", join(dir, "errors-link"), "x", 0o600]).catch((e: unknown) => e)) as NodeJS.ErrnoException).code).toBe(
      "ELOOP",
    );
    expect(((await q.one(["read", join(dir, "errors-link")]).catch((e: unknown) => e)) as NodeJS.ErrnoException).code).toBe("ELOOP");
    await q.one(["unlink", join(dir, "errors-link")]);
    expect(await readFile(join(elsewhere, "diag"), "utf8")).toBe("not the job's");
    // A hard link in the batch dir to a file the job may not read is not copied out.
    await link(join(elsewhere, "diag"), join(dir, "hard-diag"));
    expect(await q.one(["readSmall", join(dir, "hard-diag"), 100, false])).toBeNull();
  });

  it("a thread that failed fails only its own operations, not those of the thread started after it", async () => {
    const own = new FileQueue("test-files", 1);
    const f = join(dir, "after-crash");
    await own.one(["exists", f]);
    const old = (own as unknown as { hosts: Array<{ thread: { w: import("node:worker_threads").Worker } }> }).hosts[0]!.thread.w;
    old.emit("error", new Error("thread crashed")); // the queue drops it; its exit comes later
    const next = own.one(["write", f, "x", 0o600]); // starts a new thread
    await new Promise((r) => setImmediate(r));
    await old.terminate(); // the old thread's exit arrives while the new one's write is out
    await next; // rejected ("worker exited") when every thread's failure failed all batches
    expect(await readFile(f, "utf8")).toBe("x");
    await own.close();
  });
});
