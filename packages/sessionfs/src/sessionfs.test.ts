import { closeSync, constants, existsSync, mkdirSync, openSync, symlinkSync } from "node:fs";
import { link, mkdir, mkdtemp, readFile, rename, rm, stat, symlink, unlink, writeFile } from "node:fs/promises";
import { execFileSync, spawnSync } from "node:child_process";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { Dir, openForWrite, openRegular, openTarget, readSmallFile, removePath, SessionFsError, walkFiles } from "./index.js";

let base: string;
let session: string;
let secret: string;

beforeEach(async () => {
  base = await mkdtemp(join(tmpdir(), "sessionfs-"));
  session = join(base, "session");
  secret = join(base, "secret.key");
  await mkdir(session);
  await writeFile(secret, "HOST PRIVATE KEY");
});
afterEach(async () => {
  await rm(base, { recursive: true, force: true });
});

async function refusal(p: Promise<unknown>): Promise<SessionFsError> {
  const e = await p.then(
    () => undefined,
    (err: unknown) => err,
  );
  expect(e).toBeInstanceOf(SessionFsError);
  return e as SessionFsError;
}

describe("opening names in a session directory", () => {
  it("opens a regular file and streams from the descriptor", async () => {
    await mkdir(join(session, "a"));
    await writeFile(join(session, "a/f"), "data");
    const { handle, stat: st } = await openRegular(session, ["a", "f"], { refuseHardLinks: true });
    expect(st.size).toBe(4);
    expect((await handle.readFile()).toString()).toBe("data");
    await handle.close();
  });

  it("refuses a symlink in the middle of the path", async () => {
    await mkdir(join(base, "elsewhere"));
    await writeFile(join(base, "elsewhere/f"), "outside");
    await symlink(join(base, "elsewhere"), join(session, "dir"));
    const e = await refusal(openRegular(session, ["dir", "f"]));
    expect(e.kind).toBe("symlink");
    expect(e.reason).toContain("/dir: it is or passes through a symbolic link");
  });

  it("refuses a symlink leaf, even to a readable file", async () => {
    await symlink(secret, join(session, "out"));
    expect((await refusal(openRegular(session, ["out"]))).kind).toBe("symlink");
    expect((await refusal(readSmallFile(session, ["out"], 1024))).kind).toBe("symlink");
  });

  it("refuses a hard link to a file outside the session, but only when asked to", async () => {
    await link(secret, join(session, "out"));
    const e = await refusal(openRegular(session, ["out"], { refuseHardLinks: true }));
    expect(e.kind).toBe("hard-link");
    expect(e.reason).toMatch(/^\/out: it is a hard link/);
    const t = await openTarget(session, ["out"]);
    if (t.kind === "file") await t.handle.close();
    expect(t.kind).toBe("file");
  });

  it("never writes into a hard link (it would change the file outside the session)", async () => {
    await link(secret, join(session, "up"));
    expect((await refusal(openForWrite(session, ["up"]))).kind).toBe("hard-link");
    expect(await readFile(secret, "utf8")).toBe("HOST PRIVATE KEY");
    const h = await openForWrite(session, ["new", "file"]);
    await h.write("x");
    await h.close();
    expect(await readFile(join(session, "new/file"), "utf8")).toBe("x");
  });

  it("creates missing parents but never the session root itself (it would not be the account's)", async () => {
    await rm(session, { recursive: true });
    const e = await refusal(openForWrite(session, ["d", "f"]));
    expect([e.kind, e.at]).toEqual(["missing", "/"]);
    expect(existsSync(session)).toBe(false);
  });

  it("refuses a FIFO without blocking", async () => {
    execFileSync("mkfifo", [join(session, "pipe")]);
    const t0 = Date.now();
    expect((await refusal(openRegular(session, ["pipe"]))).kind).toBe("special");
    expect(Date.now() - t0).toBeLessThan(2_000);
  });

  it("refuses a list file larger than the cap", async () => {
    await writeFile(join(session, "list"), "x".repeat(2048));
    expect((await refusal(readSmallFile(session, ["list"], 1024))).kind).toBe("too-large");
    expect((await readSmallFile(session, ["list"], 4096)).length).toBe(2048);
  });

  it("a directory swapped for a link after its parent was opened is not followed", async () => {
    await mkdir(join(session, "d"));
    await writeFile(join(session, "d/f"), "inside");
    const dir = await Dir.open(session);
    try {
      // The job swaps `d` for a link to a directory holding a file of the same name.
      await mkdir(join(base, "evil"));
      await writeFile(join(base, "evil/f"), "outside");
      await rm(join(session, "d"), { recursive: true });
      await symlink(join(base, "evil"), join(session, "d"));
      await expect(dir.child("d")).rejects.toMatchObject({ code: expect.stringMatching(/ELOOP|ENOTDIR/) });
    } finally {
      await dir.close();
    }
  });
});

describe("walking and deleting", () => {
  it("lists regular files and reports links, FIFOs and hard links as refused", async () => {
    await mkdir(join(session, "out/sub"), { recursive: true });
    await writeFile(join(session, "out/a"), "a");
    await writeFile(join(session, "out/sub/b"), "b");
    await symlink(secret, join(session, "out/leak"));
    await symlink(base, join(session, "out/sub/up"));
    await link(secret, join(session, "out/sub/hard"));
    execFileSync("mkfifo", [join(session, "out/fifo")]);
    const r = await walkFiles(session, ["out"]);
    expect(r.files).toEqual(["out/a", "out/sub/b"]);
    expect(r.refused.map((e) => `${e.kind} ${e.at}`).sort()).toEqual([
      "hard-link /out/sub/hard",
      "special /out/fifo",
      "symlink /out/leak",
      "symlink /out/sub/up",
    ]);
  });

  it("caps the number of entries walked", async () => {
    await mkdir(join(session, "many"));
    for (let i = 0; i < 30; i++) await writeFile(join(session, `many/${i}`), "");
    expect((await refusal(walkFiles(session, ["many"], 10))).kind).toBe("too-large");
  });

  it("deletes a tree with links inside, never their targets", async () => {
    await mkdir(join(base, "target"));
    await writeFile(join(base, "target/keep"), "keep");
    await mkdir(join(session, "d/e"), { recursive: true });
    await symlink(join(base, "target"), join(session, "d/e/link"));
    await symlink(secret, join(session, "d/file-link"));
    await link(secret, join(session, "d/hard"));
    await removePath(session, []);
    await expect(stat(session)).rejects.toMatchObject({ code: "ENOENT" });
    expect(await readFile(join(base, "target/keep"), "utf8")).toBe("keep");
    expect(await readFile(secret, "utf8")).toBe("HOST PRIVATE KEY");
  });

  it("deletes a symlinked session entry itself, not what it points to", async () => {
    await symlink(join(base), join(session, "up"));
    await removePath(session, ["up"]);
    expect(await readFile(secret, "utf8")).toBe("HOST PRIVATE KEY");
  });

  it("stops with a race error when a directory moves out from under the walk", async () => {
    // `..` of the held directory must be the parent recorded on the way down.
    await mkdir(join(session, "a/b"), { recursive: true });
    await mkdir(join(base, "away"));
    const dir = await Dir.open(join(session, "a/b"));
    await rename(join(session, "a/b"), join(base, "away/b"));
    const up = await dir.child("..");
    const [upIno, aIno] = [(await up.stat()).ino, (await stat(join(session, "a"))).ino];
    expect(upIno).not.toBe(aIno); // what removeTree/walkFiles compare, and refuse on
    await up.close();
    await dir.close();
  });

  it("a directory swapped for a link mid-walk never yields outside files, and deletion spares them", { timeout: 60_000 }, async () => {
    await mkdir(join(base, "evil"));
    for (let i = 0; i < 20; i++) await writeFile(join(base, "evil", `SECRET${i}`), "outside");
    const build = async () => {
      for (let i = 0; i < 20; i++) {
        // The racer may hold sub7 as a link right now: the test's own writes must not go through it.
        if (i === 7 && !(await stat(join(session, "out")).catch(() => undefined))) continue;
        await mkdir(join(session, `out/sub${i}`), { recursive: true }).catch(() => undefined);
        if (i !== 7) await writeFile(join(session, `out/sub${i}/f`), "in");
      }
    };
    await build();
    let stop = false;
    // The job: swaps out/sub7 for a link to ../evil and back, as fast as it can.
    const racer = (async () => {
      while (!stop) {
        await rename(join(session, "out/sub7"), join(base, "parked")).catch(() => undefined);
        await symlink(join(base, "evil"), join(session, "out/sub7")).catch(() => undefined);
        await new Promise((r) => setImmediate(r));
        await unlink(join(session, "out/sub7")).catch(() => undefined);
        await rename(join(base, "parked"), join(session, "out/sub7")).catch(() => undefined);
      }
    })();
    let walks = 0;
    for (let i = 0; i < 200; i++) {
      const r = await walkFiles(session, ["out"]).catch((e: unknown) => {
        expect(e).toBeInstanceOf(SessionFsError);
        return undefined;
      });
      if (r) walks++;
      expect(r?.files.some((f) => f.includes("SECRET")) ?? false).toBe(false);
    }
    for (let i = 0; i < 20; i++) {
      await removePath(session, ["out"]).catch((e: unknown) => expect(e).toBeInstanceOf(SessionFsError));
      await build();
    }
    stop = true;
    await racer;
    expect(walks).toBeGreaterThan(0);
    for (let i = 0; i < 20; i++) expect(await readFile(join(base, "evil", `SECRET${i}`), "utf8")).toBe("outside");
  });

  it("walks and deletes a 25,000-deep tree iteratively: one descriptor at a time, bounded memory", { timeout: 120_000 }, async () => {
    // Deeper than a usual descriptor limit (`ulimit -n`): a walk holding one per level would fail.
    const DEPTH = 25_000;
    // tmpfs when there is one: ext4 journals each rmdir (~1 ms) and the test would take a minute.
    const deepBase = existsSync("/dev/shm") ? await mkdtemp("/dev/shm/sessionfs-") : base;
    const deep = join(deepBase, "session");
    await mkdir(deep, { recursive: true });
    try {
      // Built relative to a held descriptor: the absolute path would exceed PATH_MAX.
      let fd = openSync(deep, constants.O_RDONLY | constants.O_DIRECTORY);
      for (let i = 0; i < DEPTH; i++) {
        mkdirSync(`/proc/self/fd/${fd}/d`);
        const next = openSync(`/proc/self/fd/${fd}/d`, constants.O_RDONLY | constants.O_DIRECTORY);
        closeSync(fd);
        fd = next;
      }
      closeSync(openSync(`/proc/self/fd/${fd}/leaf`, "w"));
      symlinkSync(secret, `/proc/self/fd/${fd}/leak`);
      closeSync(fd);
      const walked = await walkFiles(deep, ["d"]);
      expect(walked.files).toHaveLength(1);
      expect(walked.files[0]).toMatch(/\/leaf$/);
      expect(walked.refused.map((e) => e.kind)).toEqual(["symlink"]);
      const before = process.memoryUsage().heapUsed;
      let peak = before;
      const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().heapUsed)), 5);
      await removePath(deep, ["d"]);
      clearInterval(sampler);
      await expect(stat(join(deep, "d"))).rejects.toMatchObject({ code: "ENOENT" });
      expect(await readFile(secret, "utf8")).toBe("HOST PRIVATE KEY");
      // Per level only a short name and an id are kept: a few MB for 25,000 levels.
      expect(peak - before).toBeLessThan(32 * 1024 * 1024);
    } finally {
      // fs.rm cannot: the absolute paths are longer than PATH_MAX.
      if (deepBase !== base) await removePath(deepBase, []);
    }
  });
});

describe("files the job made inaccessible", () => {
  // Root reads everything, so the refusal is shown from an unprivileged process (setpriv).
  // ...and only where that user can read this checkout (not under a private 0700 directory).
  const asNobody = ["--reuid=65534", "--regid=65534", "--clear-groups"];
  const runAsNobody =
    process.getuid?.() === 0 &&
    existsSync("/usr/bin/setpriv") &&
    spawnSync("setpriv", [...asNobody, "test", "-r", join(import.meta.dirname, "index.ts")]).status === 0;
  it.skipIf(!runAsNobody)("EACCES is a named `denied` refusal, not an exception", async () => {
    const d = await mkdtemp(join(tmpdir(), "sfs-denied-"));
    try {
      await mkdir(join(d, "s"), { mode: 0o755 });
      await writeFile(join(d, "s", "secret"), "x", { mode: 0o000 });
      execFileSync("chmod", ["755", d]);
      const probe = join(d, "probe.mts");
      await writeFile(
        probe,
        `import { openRegular, SessionFsError } from ${JSON.stringify(join(import.meta.dirname, "index.ts"))};
try { await openRegular(${JSON.stringify(join(d, "s"))}, ["secret"]); console.log("opened"); }
catch (e) { console.log(e instanceof SessionFsError ? "kind=" + e.kind + " at=" + e.at : "other " + e); }`,
      );
      const out = execFileSync(
        "setpriv",
        ["--reuid=65534", "--regid=65534", "--clear-groups", process.execPath, "--import", "tsx", probe],
        { encoding: "utf8", cwd: join(import.meta.dirname, "..") },
      );
      expect(out.trim()).toBe("kind=denied at=/secret");
    } finally {
      await rm(d, { recursive: true, force: true });
    }
  });
});
