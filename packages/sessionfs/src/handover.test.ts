import { execFileSync } from "node:child_process";
import { chmodSync, chownSync, linkSync, lstatSync, mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { handOverTree, SessionFsError } from "./index.js";

// chown needs root; the JEM runs the hand-over as root.
const ROOT = process.geteuid?.() === 0;
const ACCOUNT = 54_321;
const CE_GID = 54_322;
const OTHER = 54_323;

let base: string;
let session: string;
let outside: string;

const owner = (p: string) => {
  const st = lstatSync(p);
  return [st.uid, st.gid, st.mode & 0o7777];
};
const opts = { uid: ACCOUNT, gid: CE_GID, from: [0], maxEntries: 1_000 };

beforeEach(async () => {
  base = await mkdtemp(join(tmpdir(), "sessionfs-handover-"));
  session = join(base, "session");
  outside = join(base, "outside");
  mkdirSync(session, { mode: 0o700 });
  mkdirSync(outside);
  writeFileSync(join(outside, "secret"), "root's\n", { mode: 0o600 });
  writeFileSync(join(outside, "cached"), "genuine\n", { mode: 0o644 });
});
afterEach(async () => {
  await rm(base, { recursive: true, force: true });
});

describe.skipIf(!ROOT)("handOverTree", () => {
  it("gives the CE's entries to the account with the modes chmod -R u+rwX,g+rwX,o-rwx and setgid give", async () => {
    mkdirSync(join(session, "sub/deep"), { recursive: true, mode: 0o755 });
    writeFileSync(join(session, "sub/deep/in.txt"), "input\n", { mode: 0o644 });
    writeFileSync(join(session, "run.sh"), "#!/bin/sh\n", { mode: 0o4755 });
    writeFileSync(join(session, "private"), "x", { mode: 0o600 });
    const r = await handOverTree(session, opts);
    expect(owner(session)).toEqual([ACCOUNT, CE_GID, 0o2770]);
    expect(owner(join(session, "sub"))).toEqual([ACCOUNT, CE_GID, 0o2770]);
    expect(owner(join(session, "sub/deep"))).toEqual([ACCOUNT, CE_GID, 0o2770]);
    expect(owner(join(session, "sub/deep/in.txt"))).toEqual([ACCOUNT, CE_GID, 0o660]);
    expect(owner(join(session, "run.sh"))).toEqual([ACCOUNT, CE_GID, 0o770]); // no setuid
    expect(owner(join(session, "private"))).toEqual([ACCOUNT, CE_GID, 0o660]);
    expect(r).toMatchObject({ walked: 5, changed: 6, skipped: 0 });
  });

  it("never changes what a link names, a hard link of another's file, or an entry of another owner", async () => {
    // What a job can leave in its session for a rerun: links out, a hard link of a root-owned
    // (cached) file, a file and a directory of another account, a FIFO.
    chownSync(session, ACCOUNT, ACCOUNT);
    mkdirSync(join(session, "a"));
    chownSync(join(session, "a"), ACCOUNT, ACCOUNT);
    symlinkSync(join(outside, "secret"), join(session, "a/link"));
    symlinkSync(outside, join(session, "dirlink"));
    linkSync(join(outside, "cached"), join(session, "a/stolen"));
    writeFileSync(join(session, "others"), "x", { mode: 0o644 });
    chownSync(join(session, "others"), OTHER, OTHER);
    mkdirSync(join(session, "othersdir"));
    writeFileSync(join(session, "othersdir/f"), "x");
    chownSync(join(session, "othersdir"), OTHER, OTHER);
    execFileSync("mkfifo", [join(session, "fifo")]);
    writeFileSync(join(session, "mine"), "x", { mode: 0o600 });
    chownSync(join(session, "mine"), ACCOUNT, ACCOUNT);
    linkSync(join(session, "mine"), join(session, "a/mine2")); // the account's own hard link: its own file

    const r = await handOverTree(session, opts);
    expect(owner(join(outside, "cached"))).toEqual([0, 0, 0o644]);
    expect(owner(join(outside, "secret"))).toEqual([0, 0, 0o600]);
    expect(owner(outside)[0]).toBe(0);
    expect(owner(join(session, "others"))).toEqual([OTHER, OTHER, 0o644]);
    expect(owner(join(session, "othersdir"))[0]).toBe(OTHER);
    expect(owner(join(session, "othersdir/f"))[0]).toBe(0); // never entered
    expect(owner(join(session, "a/link"))[0]).toBe(0); // links are left as they are
    expect(owner(join(session, "mine"))).toEqual([ACCOUNT, CE_GID, 0o660]);
    expect(owner(join(session, "a"))).toEqual([ACCOUNT, CE_GID, 0o2770]);
    expect(owner(session)).toEqual([ACCOUNT, CE_GID, 0o2770]);
    expect(r.skipped).toBe(3);
    expect(r.examples).toEqual(
      expect.arrayContaining([
        "/a/stolen: a hard link (2 links) of a file owned by uid 0",
        `/others: owned by uid ${OTHER}`,
        `/othersdir: a directory owned by uid ${OTHER}`,
      ]),
    );
  });

  it("walks a deep tree with one descriptor per step and refuses a tree above the entry bound", async () => {
    let d = session;
    for (let i = 0; i < 300; i++) {
      d = join(d, "d");
      mkdirSync(d);
    }
    writeFileSync(join(d, "f"), "x");
    const r = await handOverTree(session, opts);
    expect(r.walked).toBe(301);
    expect(owner(join(d, "f"))).toEqual([ACCOUNT, CE_GID, 0o660]);
    await expect(handOverTree(session, { ...opts, maxEntries: 100 })).rejects.toSatisfy(
      (e) => e instanceof SessionFsError && e.kind === "too-large",
    );
  });

  it("refuses a session directory that is a link or not the account's or the CE's", async () => {
    symlinkSync(outside, join(base, "swapped"));
    await expect(handOverTree(join(base, "swapped"), opts)).rejects.toBeInstanceOf(SessionFsError);
    chownSync(session, OTHER, OTHER);
    chmodSync(session, 0o700);
    await expect(handOverTree(session, opts)).rejects.toSatisfy((e) => e instanceof SessionFsError && e.kind === "denied");
    expect(owner(session)[0]).toBe(OTHER);
  });

  it("hands over 5,000 files in a fraction of a second, reporting progress", async () => {
    for (let i = 0; i < 5; i++) {
      const sub = join(session, `d${i}`);
      mkdirSync(sub);
      for (let j = 0; j < 1_000; j++) writeFileSync(join(sub, `f${j}`), "");
    }
    const seen: number[] = [];
    const cpu = process.cpuUsage();
    const r = await handOverTree(session, { ...opts, maxEntries: 50_000, progressEvery: 2_000, onProgress: (n) => seen.push(n) });
    const used = process.cpuUsage(cpu);
    expect(r).toMatchObject({ walked: 5_005, changed: 5_006, skipped: 0 });
    expect(seen).toEqual([2_000, 4_000]);
    // ~0.12 s of CPU on a 2-core VM (~24 µs per entry); the bound only catches a walk gone quadratic.
    expect((used.user + used.system) / 1000).toBeLessThan(5_000);
  }, 120_000);
});
