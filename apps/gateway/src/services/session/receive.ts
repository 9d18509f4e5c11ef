import { Failure } from "@ce/model";
import type { FileHandle } from "node:fs/promises";
import type { Readable } from "node:stream";
import type { OwnedFd } from "@ce/sessionfs";
import { PayloadTooLarge } from "../../errors.js";
import { takeBody, type Intake } from "./intake.js";
import { SlabQueue } from "./slab-queue.js";
import { writePaths, type WritePath } from "./write-path.js";

/** Bytes received but not yet written at which the request is paused (per upload). */
const HIGH_WATER = 4 * 1024 * 1024;

/** Aborted request bodies reject with this (the route answers 400 UPLOAD_ABORTED). */
export class BodyAborted extends Failure<"BODY_ABORTED"> {
  constructor() {
    super("BODY_ABORTED", "request body aborted");
  }
}

/** Reserves quota for `received` bytes: undefined when nothing needs waiting; rejects to refuse. */
export type Grow = (received: number) => Promise<void> | undefined;

/**
 * The one engine that moves a request body into a session file (the upload writer's receiving
 * state, upload.ts), straight from the Node stream (no web stream: each web-stream chunk costs
 * several promises). Chunks come from the intake (intake.ts: the HTTP parser's, or stream
 * events), are copied into slabs (slab-queue.ts) and written with one `writev` per batch at their
 * position through the current write path (write-path.ts: direct or buffered). The request is
 * paused while HIGH_WATER bytes wait (TCP backpressure on a slow disk). Bytes are written only once
 * `grow` has reserved them. Resolves with the bytes received, or rejects, only when no write is in
 * flight, so the caller may truncate or close the handle then.
 */
export function receiveBody(
  src: Readable,
  handle: FileHandle,
  offset: number,
  limit: number,
  what: string,
  grow?: Grow,
  directFd?: OwnedFd,
): Promise<number> {
  return new Promise<number>((resolve, reject) =>
    new BodyReceiver(src, handle, offset, limit, what, grow, directFd, resolve, reject).start(),
  );
}

class BodyReceiver {
  private received = 0;
  private position: number;
  private readonly queue = new SlabQueue();
  private path: WritePath;
  private readonly buffered: WritePath;
  /** A write is in flight. */
  private writing = false;
  /** A quota reservation is pending: chunks are held, nothing past the reserved bytes is written. */
  private reserving = false;
  /** Chunks offered while `reserving`, in order (the parser delivers what it already decrypted even after a pause). */
  private readonly held: Buffer[] = [];
  /** The body has ended (all of it received). */
  private ended = false;
  private failure: unknown = undefined;
  private settled = false;
  private intake: Intake | undefined = undefined; // set once attached; callbacks may run before

  constructor(
    private readonly src: Readable,
    handle: FileHandle,
    offset: number,
    private readonly limit: number,
    private readonly what: string,
    private readonly grow: Grow | undefined,
    directFd: OwnedFd | undefined,
    private readonly resolve: (n: number) => void,
    private readonly reject: (e: unknown) => void,
  ) {
    this.position = offset;
    const paths = writePaths(handle, directFd, offset);
    this.path = paths.first;
    this.buffered = paths.buffered;
  }

  start(): void {
    const src = this.src;
    if (src.readableEnded) {
      this.ended = true;
      return this.finish();
    }
    // Already aborted (the client went away before the handler got here): no event will come.
    if (src.destroyed) return this.fail(new BodyAborted());
    src.on("error", this.onError);
    src.on("close", this.onClose);
    this.intake = takeBody(src, this.onData, this.onEnd, this.wanted);
    // Callbacks during takeBody (a body already buffered whole) could not reach it yet.
    if (this.settled) this.intake.detach();
    else this.flowControl();
  }

  private readonly onData = (chunk: Buffer): void => {
    if (this.failure !== undefined || chunk.length === 0) return;
    if (this.reserving) this.held.push(chunk);
    else this.accept(chunk);
  };
  private readonly onEnd = (): void => {
    this.ended = true;
    this.pump();
  };
  private readonly onError = (): void => this.fail(new BodyAborted());
  private readonly onClose = (): void => {
    if (!this.ended) this.fail(new BodyAborted());
  };
  private readonly wanted = (): boolean => this.failure === undefined && !this.reserving && this.queue.pending < HIGH_WATER;

  private accept(chunk: Buffer): void {
    this.received += chunk.length;
    if (this.received > this.limit) return this.fail(new PayloadTooLarge(this.what, this.limit));
    const wait = this.grow?.(this.received);
    if (!wait) {
      this.copyIn(chunk);
      this.pump();
      if (this.queue.pending >= HIGH_WATER) this.intake?.pause();
      return;
    }
    // Nothing past the reserved bytes is written: hold this chunk until the quota says yes.
    this.reserving = true;
    this.intake?.pause();
    wait.then(
      () => {
        this.reserving = false;
        if (this.failure !== undefined) return this.finish();
        this.copyIn(chunk);
        this.pump();
        // What came meanwhile, in order; one of them may wait for the quota again.
        while (!this.reserving && this.held.length > 0 && this.failure === undefined) this.accept(this.held.shift()!);
        this.flowControl();
        if (!this.reserving) this.pump();
      },
      (e: unknown) => {
        this.reserving = false;
        this.fail(e);
      },
    );
  }

  private copyIn(chunk: Buffer): void {
    this.queue.copyIn(chunk, this.nextSlab);
  }

  /** A slab from the current path; none left there → the buffered path from now on. */
  private readonly nextSlab = (): Buffer => {
    const s = this.path.slab();
    if (s) return s;
    this.path = this.buffered;
    return this.buffered.slab()!;
  };

  private pump(): void {
    if (this.writing || this.queue.pending === 0 || this.failure !== undefined) return this.finish();
    let path = this.path;
    let bytes = path.portion(this.queue.pending, this.ended);
    if (bytes === 0) {
      if (!this.ended) return;
      // The partial last block of a direct upload.
      path = this.buffered;
      bytes = this.queue.pending;
    }
    this.writing = true;
    path.write(this.queue.take(bytes), bytes, this.position, (err) => {
      this.writing = false;
      if (err && path.kind === "direct" && err.code === "EINVAL") {
        // O_DIRECT refused after all: these bytes (again, whole) and the rest buffered.
        this.path = this.buffered;
        this.queue.untake(bytes);
        return this.pump();
      }
      if (err) return this.fail(err);
      if (this.failure !== undefined) return this.finish();
      this.position += bytes;
      this.queue.written(bytes);
      this.flowControl();
      this.pump();
    });
  }

  private flowControl(): void {
    if (this.failure !== undefined || this.ended) return;
    if (!this.wanted()) this.intake?.pause();
    else this.intake?.resume();
  }

  private fail(e: unknown): void {
    if (this.failure === undefined) this.failure = e;
    // Slabs go back to the pool in finish, once no write is in flight.
    this.queue.pending = 0;
    this.held.length = 0;
    this.intake?.pause();
    this.finish();
  }

  /** Settles once no write or reservation is in flight: failed, or ended with everything written. */
  private finish(): void {
    if (this.settled || this.writing || this.reserving) return;
    const ok = this.failure === undefined;
    if (ok && !(this.ended && this.queue.pending === 0 && this.held.length === 0)) return;
    this.settled = true;
    this.intake?.detach();
    this.src.off("error", this.onError);
    this.src.off("close", this.onClose);
    this.queue.release();
    if (ok) this.resolve(this.received);
    else this.reject(this.failure);
  }
}
