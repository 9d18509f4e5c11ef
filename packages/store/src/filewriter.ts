import { Worker } from "node:worker_threads";

/**
 * Creates new jobs' directories and files on a worker thread, one message per batch. Through the
 * libuv pool every file costs three hand-offs (open, write, close), each a futex round trip and a
 * callback on the event loop, for every job of a bulk submission (2 dirs + 4-5 files each). Plain
 * synchronous calls on a thread of our own do the same work for a fraction of the CPU, and the
 * event loop only posts the batch. Several workers keep a slow shared file system from
 * serializing all submissions behind one.
 */

/**
 * One job's creation: `dirs` first (recursive, mode 0700), then the files under `base` in order,
 * `files` alternating name and content, each mode 0600 and `wx` (never overwritten). Flat arrays of
 * strings: the batch is copied to the worker, and fewer objects copy faster.
 */
export interface FileBatchJob {
  dirs: string[];
  base: string;
  files: string[];
}

/** Per job: undefined = every directory and file created; else why not (the files written so far stay, the caller removes them). */
export type FileBatchResult = { message: string; code?: string | undefined } | undefined;

// Plain CommonJS, run with `eval`: the same from the sources (tsx) and from the gateway's bundle.
// `encoding: "utf8"` selects writeFileSync's C++ fast path (open, write, close in one call);
// without it Node goes through Buffer.from + openSync/writeSync/closeSync, several times the
// user CPU for many small files.
const SOURCE = `
const { parentPort } = require("node:worker_threads");
const fs = require("node:fs");
parentPort.on("message", ({ seq, jobs }) => {
  const out = jobs.map((j) => {
    try {
      for (const dir of j.dirs) fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
      for (let i = 0; i + 1 < j.files.length; i += 2) fs.writeFileSync(j.base + "/" + j.files[i], j.files[i + 1], { encoding: "utf8", mode: 0o600, flag: "wx" });
      return undefined;
    } catch (e) {
      return { message: String(e && e.message), code: e && e.code };
    }
  });
  parentPort.postMessage({ seq, out });
});
`;

interface Pending {
  resolve: (r: FileBatchResult[]) => void;
  reject: (e: Error) => void;
}

class FileWorker {
  /** The thread and its unanswered batches: a thread that dies fails only its own. */
  private thread: { w: Worker; pending: Map<number, Pending> } | undefined;
  private seq = 0;

  run(jobs: FileBatchJob[]): Promise<FileBatchResult[]> {
    const t = this.start();
    const seq = ++this.seq;
    return new Promise<FileBatchResult[]>((resolve, reject) => {
      t.pending.set(seq, { resolve, reject });
      // Held only while a batch is out: an idle writer never keeps a process alive.
      if (t.pending.size === 1) t.w.ref();
      t.w.postMessage({ seq, jobs });
    });
  }

  private start(): { w: Worker; pending: Map<number, Pending> } {
    if (this.thread) return this.thread;
    const w = new Worker(SOURCE, { eval: true, name: "ce-jobfiles" });
    const t = { w, pending: new Map<number, Pending>() };
    w.unref();
    w.on("message", ({ seq, out }: { seq: number; out: FileBatchResult[] }) => {
      const p = t.pending.get(seq);
      t.pending.delete(seq);
      if (t.pending.size === 0) w.unref();
      p?.resolve(out);
    });
    const fail = (e: Error) => {
      if (this.thread === t) this.thread = undefined;
      for (const p of t.pending.values()) p.reject(e);
      t.pending.clear();
    };
    w.on("error", fail);
    w.on("exit", (code) => fail(new Error(`job file writer exited (code ${code})`)));
    this.thread = t;
    return t;
  }
}

const POOL_SIZE = 2;
const pool = Array.from({ length: POOL_SIZE }, () => new FileWorker());
let next = 0;

/**
 * Creates the batch's directories and files; results in job order. A batch is split over the
 * workers. Rejects only when a worker itself failed (then no result of its share is known).
 */
export async function createFiles(jobs: readonly FileBatchJob[]): Promise<FileBatchResult[]> {
  if (jobs.length === 0) return [];
  const parts = Math.min(POOL_SIZE, jobs.length);
  const size = Math.ceil(jobs.length / parts);
  const shares = await Promise.all(
    Array.from({ length: parts }, (_, i) => pool[next++ % POOL_SIZE]!.run(jobs.slice(i * size, (i + 1) * size))),
  );
  return shares.flat();
}
