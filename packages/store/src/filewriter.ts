import { ThreadHost, workerEntry } from "./threadhost.js";

/**
 * Creates new jobs' directories and files on a worker thread, one message per batch. Through the
 * libuv pool every file costs three hand-offs (open, write, close), each a futex round trip and a
 * callback on the event loop: measured on a bulk submission of 500 jobs (2 dirs + 4-5 files each),
 * ~0.45 ms of pool-thread CPU per job plus the main thread's share. Plain synchronous calls on a
 * thread of our own do the same work for ~0.1 ms, and the event loop only posts the batch. Several
 * workers keep a slow shared file system from serializing all submissions behind one.
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

/** One writer thread (filewriter-worker.ts). */
const writer = () => new ThreadHost<FileBatchJob[], FileBatchResult[]>("ce-jobfiles", () => workerEntry("filewriter-worker", import.meta.url));

const POOL_SIZE = 2;
const pool = Array.from({ length: POOL_SIZE }, writer);
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
    Array.from({ length: parts }, (_, i) => pool[next++ % POOL_SIZE]!.request(jobs.slice(i * size, (i + 1) * size))),
  );
  return shares.flat();
}
