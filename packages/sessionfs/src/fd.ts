import { Failure } from "@ce/model";
import { close, closeSync, open, openSync, type PathLike } from "node:fs";

/**
 * One owner per descriptor. The threads of a process share one descriptor table and the kernel
 * hands out the lowest free number, so a number closed twice is a number closed under whoever
 * opened it in between (another thread's file, a job's output): a write lands in the wrong file
 * or a read aborts the process. A raw number cannot say whether it is still ours; an `OwnedFd`
 * can:
 *
 * - it is closed at most once (the closed flag is set before the close system call, so a second
 *   `close()` never reaches the kernel and `finally { fd.close() }` after an earlier close is safe);
 * - `fd.num` after close throws `FdClosedError` instead of naming whatever holds the number now;
 * - `EBADF` from the close itself means someone else closed our number: that is a bug elsewhere,
 *   and it is thrown as `FdStolenError`, never swallowed.
 *
 * Pass the handle, never `num`, between functions, callbacks and threads (a worker thread opens
 * its own descriptors; none crosses a `postMessage`). Read `num` only at the system call.
 */

/** Base of the descriptor errors; `code` is stable for logs and tests. */
export class FdError extends Failure<"FD_CLOSED" | "FD_STOLEN"> {
  constructor(code: "FD_CLOSED" | "FD_STOLEN", message: string) {
    super(code, message);
  }
}

/** The handle was used after it was closed (a bug in the owner). */
export class FdClosedError extends FdError {
  constructor(readonly what: string) {
    super("FD_CLOSED", `descriptor of ${what} used after it was closed`);
  }
}

/** Closing our descriptor said EBADF: another piece of code closed our number (a bug there). */
export class FdStolenError extends FdError {
  constructor(
    readonly what: string,
    readonly num: number,
  ) {
    super("FD_STOLEN", `descriptor ${num} of ${what} was closed by someone else (EBADF on close)`);
  }
}

const isEbadf = (e: unknown) => (e as NodeJS.ErrnoException | null)?.code === "EBADF";

let stolenHook: ((e: FdStolenError) => void) | undefined;
/**
 * Called with every `FdStolenError` before it is thrown (a process logs it: a caller's `catch`
 * may drop the error, the log line must not be lost). One hook per thread.
 */
export function onFdStolen(hook: ((e: FdStolenError) => void) | undefined): void {
  stolenHook = hook;
}

export class OwnedFd {
  #num: number;
  #closed = false;

  private constructor(
    num: number,
    /** What the descriptor is, for errors (a path or a short name; never used to open). */
    readonly what: string,
  ) {
    this.#num = num;
  }

  static openSync(path: PathLike, flags: number, mode?: number, what = String(path)): OwnedFd {
    return new OwnedFd(openSync(path, flags, mode), what);
  }

  static open(path: PathLike, flags: number, mode?: number, what = String(path)): Promise<OwnedFd> {
    return new Promise((resolve, reject) => open(path, flags, mode, (err, num) => (err ? reject(err) : resolve(new OwnedFd(num, what)))));
  }

  /** The number, for the system call at hand only; throws once closed. */
  get num(): number {
    if (this.#closed) throw new FdClosedError(this.what);
    return this.#num;
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** `/proc/self/fd/<n>`: a path that names what this descriptor holds (throws once closed). */
  get proc(): string {
    return `/proc/self/fd/${this.num}`;
  }

  /** Closes the descriptor; a second call does nothing. EBADF throws `FdStolenError`. */
  closeSync(): void {
    if (this.#closed) return;
    this.#closed = true; // first: on Linux the number is released even when close reports an error
    try {
      closeSync(this.#num);
    } catch (e) {
      throw this.#fail(e);
    }
  }

  /** As `closeSync`, through the thread pool. */
  close(): Promise<void> {
    if (this.#closed) return Promise.resolve();
    this.#closed = true;
    return new Promise((resolve, reject) => close(this.#num, (err) => (err ? reject(this.#fail(err)) : resolve())));
  }

  #fail(e: unknown): unknown {
    if (!isEbadf(e)) return e;
    const stolen = new FdStolenError(this.what, this.#num);
    stolenHook?.(stolen);
    return stolen;
  }
}

/** What a `FileHandle` offers that `closeHandle` needs (no import of the promises API here). */
interface Closable {
  readonly fd: number;
  close(): Promise<void>;
}

/**
 * Closes a `FileHandle` (which, like `OwnedFd`, closes its number at most once). EBADF is
 * reported and thrown as `FdStolenError`; any other close error is thrown as is.
 */
export async function closeHandle(h: Closable, what: string): Promise<void> {
  const num = h.fd;
  try {
    await h.close();
  } catch (e) {
    if (!isEbadf(e)) throw e;
    const stolen = new FdStolenError(what, num);
    stolenHook?.(stolen);
    throw stolen;
  }
}

/** The number of an open `FileHandle` for the system call at hand; throws once it is closed. */
export function numOf(h: Closable, what: string): number {
  const n = h.fd;
  if (n < 0) throw new FdClosedError(what);
  return n;
}
