import { ThreadHost, workerEntry } from "@ce/store";
import type { FsOp, FsResult, GroupOut } from "./priv/rootfs-ops.js";

export type { FsOp, FsResult } from "./priv/rootfs-ops.js";

/**
 * The JEM's small-file operations (control files, batch files, markers) on a thread of their own.
 * Through the libuv pool each of them costs the event loop a hand-off and a callback (~20 µs of
 * main-thread CPU per open, write, rename... measured; a job's life is ~80 of them), and the
 * JEM's main thread is what a burst of jobs waits for. Here the operations asked for in one turn
 * of the event loop go to the thread in one message and run as plain synchronous calls (~2.5 µs of
 * main-thread CPU each). Same order for one caller: a caller's next operation starts after the
 * previous one answered, and the operations of one `run` call run in order, stopping at the first
 * failure. What each operation does, and why it is safe as root, is in priv/rootfs-ops.ts.
 */

interface Group {
  ops: readonly FsOp[];
  resolve: (r: FsResult[]) => void;
  reject: (e: Error) => void;
}

export class FsQueue {
  private readonly host = new ThreadHost<Array<readonly FsOp[]>, GroupOut[]>("jem-files", () => workerEntry("fsq-worker", import.meta.url));
  private queued: Group[] = [];

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
    this.host.request(groups.map((g) => g.ops)).then(
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

  /** Ends the thread (after the operations in flight); the next operation starts a new one. */
  close(): Promise<void> {
    return this.host.close();
  }
}

/** One queue per process: every JEM context of a process shares the thread. */
export const fsq = new FsQueue();
