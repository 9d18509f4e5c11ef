import type { FsOp, FsResult, GroupOut } from "./ops.js";
import { ThreadHost, workerEntry } from "./threadhost.js";

export type { FsOp, FsResult } from "./ops.js";

/**
 * The one way this CE writes its control directory: file operations (ops.ts) run as plain
 * synchronous calls on worker threads of our own (file-worker.ts), never through the libuv pool.
 * Through the pool each open, write, rename... costs the event loop a hand-off and a callback;
 * a job's life is dozens of them, and a bulk submission creates thousands of files at once. Here
 * the operations asked for in one turn of the event loop go to a thread in one message.
 *
 * Order: the operations of one `run` call run in order, stopping at the first failure, and a
 * caller's next call starts after the previous one answered. Calls made without waiting for each
 * other have no order between them (a large turn is split over the threads).
 */

/** What an operation answers: the text (or null when missing) for reads, true/false otherwise. */
export type ResultOf<O extends FsOp> = O[0] extends "read" | "readSmall" ? string | null : boolean;
export type ResultsOf<O extends readonly FsOp[]> = { -readonly [K in keyof O]: ResultOf<O[K]> };

interface Group {
  ops: readonly FsOp[];
  resolve: (r: FsResult[]) => void;
  reject: (e: Error) => void;
}

/** Below this many calls in one turn, one thread serves the turn; from it on, the turn is split over every thread. */
const SPLIT_MIN = 64;

export class FileQueue {
  private readonly hosts: Array<ThreadHost<Array<readonly FsOp[]>, GroupOut[]>>;
  private queued: Group[] = [];

  /** `threads`: the most threads a large turn is spread over (a slow shared file system then does not serialize every caller behind one). */
  constructor(label = "ce-files", threads = 2) {
    this.hosts = Array.from(
      { length: Math.max(1, threads) },
      (_, i) => new ThreadHost(`${label}-${i}`, () => workerEntry("file-worker", import.meta.url)),
    );
  }

  /** Runs `ops` in order (one round trip); rejects with the first failure's error (its `code` kept). */
  run<const O extends readonly FsOp[]>(ops: O): Promise<ResultsOf<O>> {
    return new Promise<FsResult[]>((resolve, reject) => {
      if (this.queued.length === 0) setImmediate(() => this.flush());
      this.queued.push({ ops, resolve, reject });
    }) as Promise<ResultsOf<O>>;
  }

  async one<const O extends FsOp>(op: O): Promise<ResultOf<O>> {
    return (await this.run([op] as const))[0] as ResultOf<O>;
  }

  private flush(): void {
    const groups = this.queued;
    this.queued = [];
    if (groups.length === 0) return;
    const parts = groups.length >= SPLIT_MIN ? this.hosts.length : 1;
    const size = Math.ceil(groups.length / parts);
    for (let p = 0; p < parts; p++) this.send(this.hosts[p]!, groups.slice(p * size, (p + 1) * size));
  }

  private send(host: ThreadHost<Array<readonly FsOp[]>, GroupOut[]>, groups: Group[]): void {
    if (groups.length === 0) return;
    host.request(groups.map((g) => g.ops)).then(
      (out) =>
        groups.forEach((g, i) => {
          const o = out[i];
          if (!o) g.reject(new Error("file thread gave no answer"));
          else if (o.error) g.reject(Object.assign(new Error(o.error.message), o.error.code ? { code: o.error.code } : {}));
          else g.resolve(o.res);
        }),
      (e: Error) => {
        for (const g of groups) g.reject(e);
      },
    );
  }

  /** Ends the threads (after the operations in flight); the next operation starts new ones. */
  async close(): Promise<void> {
    await Promise.all(this.hosts.map((h) => h.close()));
  }
}

/** One queue per process: every caller of a process (ControlDir, createJobs, the JEM) shares its threads. */
export const fileq = new FileQueue();
