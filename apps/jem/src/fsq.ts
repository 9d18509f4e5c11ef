import { Worker } from "node:worker_threads";

/**
 * The JEM's small-file operations (control files, batch files, markers) on a thread of their own.
 * Through the libuv pool each of them costs the event loop a hand-off and a callback (a job's
 * life is some eighty opens, writes and renames), and the JEM's main thread is what a burst of
 * jobs waits for. Here the operations asked for in one turn of the event loop go to the thread in
 * one message and run as plain synchronous calls, for a fraction of the main thread's CPU. Same system calls, same atomicity (write to a temporary name, rename),
 * same order for one caller: a caller's next operation starts after the previous one answered,
 * and the operations of one `run` call run in order, stopping at the first failure.
 */
export type FsOp =
  /** Whole file as UTF-8; null when missing (ENOENT). */
  | readonly ["read", string]
  /**
   * Regular file only, never through a link (O_NOFOLLOW): its first `max` bytes (or last, `tail`);
   * null when missing, a link, or not a regular file.
   */
  | readonly ["readSmall", string, number, boolean]
  /** Whole-file replace: temporary name, then rename (readers never see half a file). */
  | readonly ["write", string, string, number]
  /** Appends (O_APPEND: concurrent small appends do not interleave). */
  | readonly ["append", string, string, number]
  /** Removes a file; a missing one is fine. */
  | readonly ["unlink", string]
  /** true when the path exists (F_OK). */
  | readonly ["exists", string]
  /** true when there is an entry by that name (lstat: a dangling link counts). */
  | readonly ["lexists", string]
  /**
   * A file owned by uid:gid with `mode`, written under a fresh temporary name (O_EXCL|O_NOFOLLOW:
   * never through a planted link), then renamed over the path.
   */
  | readonly ["writeOwned", string, string, number, number, number]
  | readonly ["chmod", string, number]
  /** A new directory (EEXIST when there is one) owned by uid:gid with `mode` (setgid bits too). */
  | readonly ["mkdirOwned", string, number, number, number]
  /**
   * An empty directory owned by one of `uids` with no group/other bits, opened without following a
   * link, handed to uid:gid with `mode`: true; anything else is left alone: false.
   */
  | readonly ["ownEmptyDir", string, readonly number[], number, number, number]
  /** true when the path is a directory (not a link) with no entries. */
  | readonly ["isEmptyDir", string];

export type FsResult = string | boolean | null;

// Plain CommonJS run with `eval`, as the gateway's file writer (packages/store filewriter.ts).
// `encoding: "utf8"` takes writeFileSync's C++ fast path.
const SOURCE = `
const { parentPort } = require("node:worker_threads");
const fs = require("node:fs");
const C = fs.constants;
const tmpName = (p) => p + ".tmp-" + process.pid + "-" + Math.random().toString(36).slice(2);
function readSmall(path, max, tail) {
  let fd;
  try { fd = fs.openSync(path, C.O_RDONLY | C.O_NOFOLLOW | C.O_NONBLOCK); } catch { return null; }
  try {
    const st = fs.fstatSync(fd);
    if (!st.isFile()) return null;
    const len = Math.min(st.size, max);
    const buf = Buffer.alloc(len);
    const n = len === 0 ? 0 : fs.readSync(fd, buf, 0, len, tail ? Math.max(0, st.size - len) : 0);
    return buf.toString("utf8", 0, n);
  } finally { fs.closeSync(fd); }
}
function one(o) {
  switch (o[0]) {
    case "read":
      try { return fs.readFileSync(o[1], "utf8"); } catch (e) { if (e.code === "ENOENT") return null; throw e; }
    case "readSmall": return readSmall(o[1], o[2], o[3]);
    case "write": {
      const tmp = tmpName(o[1]);
      fs.writeFileSync(tmp, o[2], { encoding: "utf8", mode: o[3] });
      fs.renameSync(tmp, o[1]);
      return true;
    }
    case "append": fs.appendFileSync(o[1], o[2], { encoding: "utf8", mode: o[3] }); return true;
    case "unlink":
      try { fs.unlinkSync(o[1]); } catch (e) { if (e.code !== "ENOENT") throw e; }
      return true;
    case "exists":
      try { fs.accessSync(o[1], C.F_OK); return true; } catch { return false; }
    case "lexists":
      try { fs.lstatSync(o[1]); return true; } catch { return false; }
    case "writeOwned": {
      const tmp = tmpName(o[1]);
      const fd = fs.openSync(tmp, C.O_WRONLY | C.O_CREAT | C.O_EXCL | C.O_NOFOLLOW, 0o600);
      try {
        fs.writeFileSync(fd, o[2], "utf8");
        fs.fchownSync(fd, o[3], o[4]);
        fs.fchmodSync(fd, o[5]);
      } finally { fs.closeSync(fd); }
      fs.renameSync(tmp, o[1]);
      return true;
    }
    case "chmod": fs.chmodSync(o[1], o[2]); return true;
    case "mkdirOwned":
      fs.mkdirSync(o[1], { mode: 0o700 });
      fs.chownSync(o[1], o[2], o[3]);
      fs.chmodSync(o[1], o[4]);
      return true;
    case "ownEmptyDir": {
      let fd;
      try { fd = fs.openSync(o[1], C.O_RDONLY | C.O_DIRECTORY | C.O_NOFOLLOW); } catch { return false; }
      try {
        const st = fs.fstatSync(fd);
        if (!st.isDirectory() || !o[2].includes(st.uid) || (st.mode & 0o077) !== 0) return false;
        if (fs.readdirSync("/proc/self/fd/" + fd).length !== 0) return false;
        fs.fchownSync(fd, o[3], o[4]);
        fs.fchmodSync(fd, o[5]);
        return true;
      } finally { fs.closeSync(fd); }
    }
    case "isEmptyDir": {
      let fd;
      try { fd = fs.openSync(o[1], C.O_RDONLY | C.O_DIRECTORY | C.O_NOFOLLOW); } catch { return false; }
      try { return fs.readdirSync("/proc/self/fd/" + fd).length === 0; } finally { fs.closeSync(fd); }
    }
    default: throw new Error("unknown file operation " + o[0]);
  }
}
parentPort.on("message", ({ seq, groups }) => {
  const out = groups.map((ops) => {
    const res = [];
    for (const o of ops) {
      try { res.push(one(o)); } catch (e) { return { error: { message: String(e && e.message), code: e && e.code }, res }; }
    }
    return { res };
  });
  parentPort.postMessage({ seq, out });
});
`;

type GroupOut = { res: FsResult[]; error?: { message: string; code?: string } };
interface Group {
  ops: readonly FsOp[];
  resolve: (r: FsResult[]) => void;
  reject: (e: Error) => void;
}

/** The thread and the batches it has not answered yet: a worker that dies fails only its own. */
interface Thread {
  w: Worker;
  inFlight: Map<number, Group[]>;
}

export class FsQueue {
  private thread: Thread | undefined;
  private queued: Group[] = [];
  private seq = 0;

  /** Runs `ops` in order (one round trip); rejects with the first failure's error (its `code` kept). */
  run(ops: readonly FsOp[]): Promise<FsResult[]> {
    return new Promise<FsResult[]>((resolve, reject) => {
      if (this.queued.length === 0) setImmediate(() => this.flush());
      this.queued.push({ ops, resolve, reject });
    });
  }

  async one(op: FsOp): Promise<FsResult> {
    return (await this.run([op]))[0]!;
  }

  private flush(): void {
    const groups = this.queued;
    this.queued = [];
    if (groups.length === 0) return;
    let t: Thread;
    try {
      t = this.start();
    } catch (e) {
      for (const g of groups) g.reject(e as Error);
      return;
    }
    const seq = ++this.seq;
    t.inFlight.set(seq, groups);
    // Held only while a batch is out: an idle queue never keeps a process alive.
    if (t.inFlight.size === 1) t.w.ref();
    t.w.postMessage({ seq, groups: groups.map((g) => g.ops) });
  }

  private start(): Thread {
    if (this.thread) return this.thread;
    const w = new Worker(SOURCE, { eval: true, name: "jem-files" });
    const t: Thread = { w, inFlight: new Map() };
    w.unref();
    w.on("message", ({ seq, out }: { seq: number; out: GroupOut[] }) => {
      const groups = t.inFlight.get(seq) ?? [];
      t.inFlight.delete(seq);
      if (t.inFlight.size === 0) w.unref();
      groups.forEach((g, i) => {
        const o = out[i];
        if (!o) g.reject(new Error("file worker gave no answer"));
        else if (o.error) g.reject(Object.assign(new Error(o.error.message), o.error.code ? { code: o.error.code } : {}));
        else g.resolve(o.res);
      });
    });
    const fail = (e: Error) => {
      if (this.thread === t) this.thread = undefined;
      for (const gs of t.inFlight.values()) for (const g of gs) g.reject(e);
      t.inFlight.clear();
    };
    w.on("error", fail);
    w.on("exit", (code) => fail(new Error(`JEM file worker exited (code ${code})`)));
    this.thread = t;
    return t;
  }

  /** Ends the thread (after the operations in flight); the next operation starts a new one. */
  async close(): Promise<void> {
    const t = this.thread;
    this.thread = undefined;
    if (t) await t.w.terminate();
  }
}

/** One queue per process: every JEM context of a process shares the thread. */
export const fsq = new FsQueue();
