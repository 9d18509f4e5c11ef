import { existsSync } from "node:fs";
import { parentPort, Worker } from "node:worker_threads";

/**
 * One host for the worker threads that do file work off the event loop (the gateway's job-file
 * writer, the JEM's file thread). A request is one message; the answers come back by sequence
 * number; a thread that dies fails only the requests it held, and the next request starts a new
 * thread. The thread is referenced only while a request is out, so an idle host never keeps a
 * process alive.
 *
 * The worker is a real module. A built app (scripts/build-app.ts) bundles it as `<name>.js` beside
 * `main.js`; from the sources it is `<name>.ts` next to its caller, loaded through tsx by
 * `thread-boot.mjs` (a worker thread does not inherit the parent's `--import tsx` hooks in Node 20).
 */

export interface WorkerEntry {
  /** The module the thread starts with. */
  url: URL;
  /** Data for the boot module (which TypeScript module to load). */
  workerData?: { entry: string };
}

/** The worker `name` as its caller (`callerUrl`: its `import.meta.url`) finds it, built or from source. */
export function workerEntry(name: string, callerUrl: string): WorkerEntry {
  const built = new URL(`./${name}.js`, callerUrl);
  if (existsSync(built)) return { url: built };
  const source = new URL(`./${name}.ts`, callerUrl);
  if (!existsSync(source)) throw new Error(`worker module ${name} not found beside ${callerUrl} (.js built or .ts source)`);
  return { url: new URL("./thread-boot.mjs", import.meta.url), workerData: { entry: source.href } };
}

interface Pending<Res> {
  resolve: (r: Res) => void;
  reject: (e: Error) => void;
}

interface Thread<Res> {
  w: Worker;
  pending: Map<number, Pending<Res>>;
}

interface Envelope<T> {
  seq: number;
  body: T;
}

export class ThreadHost<Req, Res> {
  private thread: Thread<Res> | undefined;
  private seq = 0;

  /** `label` names the thread in errors and in the inspector; `entry` is asked once per thread start. */
  constructor(
    private readonly label: string,
    private readonly entry: () => WorkerEntry,
  ) {}

  /** Sends one request; rejects when the thread fails before it answers (then nothing is known of it). */
  request(body: Req): Promise<Res> {
    let t: Thread<Res>;
    try {
      t = this.start();
    } catch (e) {
      return Promise.reject(e as Error);
    }
    const seq = ++this.seq;
    return new Promise<Res>((resolve, reject) => {
      t.pending.set(seq, { resolve, reject });
      if (t.pending.size === 1) t.w.ref();
      t.w.postMessage({ seq, body } satisfies Envelope<Req>);
    });
  }

  private start(): Thread<Res> {
    if (this.thread) return this.thread;
    const e = this.entry();
    const w = new Worker(e.url, { name: this.label, ...(e.workerData ? { workerData: e.workerData } : {}) });
    const t: Thread<Res> = { w, pending: new Map() };
    w.unref();
    w.on("message", ({ seq, body }: Envelope<Res>) => {
      const p = t.pending.get(seq);
      t.pending.delete(seq);
      if (t.pending.size === 0) w.unref();
      p?.resolve(body);
    });
    const fail = (err: Error) => {
      if (this.thread === t) this.thread = undefined;
      for (const p of t.pending.values()) p.reject(err);
      t.pending.clear();
    };
    w.on("error", fail);
    w.on("exit", (code) => fail(new Error(`${this.label} thread exited (code ${code})`)));
    this.thread = t;
    return t;
  }

  /** Ends the thread (requests in flight fail); the next request starts a new one. */
  async close(): Promise<void> {
    const t = this.thread;
    this.thread = undefined;
    if (t) await t.w.terminate();
  }
}

/** The worker side: answers each request with `handle` (synchronous: one request at a time, in order). */
export function serveThread<Req, Res>(handle: (req: Req) => Res): void {
  const port = parentPort;
  if (!port) throw new Error("serveThread runs in a worker thread only");
  port.on("message", ({ seq, body }: Envelope<Req>) => {
    port.postMessage({ seq, body: handle(body) } satisfies Envelope<Res>);
  });
}
