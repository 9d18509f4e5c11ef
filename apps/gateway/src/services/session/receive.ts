import { writev } from "node:fs";
import type { FileHandle } from "node:fs/promises";
import type { Readable } from "node:stream";
import { numOf, type OwnedFd } from "@ce/sessionfs";
import { PayloadTooLarge } from "../../errors.js";
import { ALIGN, giveAligned, isAligned, takeAligned } from "./direct.js";
import { takeBody, type Intake } from "./intake.js";

/**
 * Request bodies of session PUTs and PROPFINDs, consumed chunk by chunk (never buffered whole):
 * the limit is enforced on the bytes actually received, not on a declared Content-Length alone
 * (chunked uploads have none; GHSA-92vj-g62v-jqhh is about trusting the header).
 */

/** Declared Content-Length over `limit` → 413 before reading anything. */
export function checkDeclaredLength(header: string | undefined, limit: number, what: string): void {
  if (header === undefined) return;
  const n = Number(header);
  if (Number.isSafeInteger(n) && n > limit) throw new PayloadTooLarge(what, limit);
}

/**
 * Writes the body to `handle` at `offset`; returns the number of bytes written. Each write is
 * awaited before the next read, so a slow disk slows the client down (TCP backpressure).
 */
export async function writeBody(
  body: ReadableStream<Uint8Array> | null,
  handle: FileHandle,
  offset: number,
  limit: number,
  what: string,
  /** Called with the byte count about to be reached before each write (quota reservation); throws to refuse. */
  grow?: (received: number) => Promise<void>,
): Promise<number> {
  if (!body) return 0;
  const reader = body.getReader();
  let received = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      if (!value || value.byteLength === 0) continue;
      received += value.byteLength;
      if (received > limit) throw new PayloadTooLarge(what, limit);
      if (grow) await grow(received);
      let written = 0;
      while (written < value.byteLength) {
        const { bytesWritten } = await handle.write(value, written, value.byteLength - written, offset + received - value.byteLength + written);
        written += bytesWritten;
      }
    }
  } catch (e) {
    await reader.cancel().catch(() => undefined);
    throw e;
  } finally {
    reader.releaseLock();
  }
  return received;
}

/** Bytes received but not yet written at which the request is paused (per upload). */
const HIGH_WATER = 4 * 1024 * 1024;

/**
 * Received bytes are copied into 1 MiB slabs at once and the 16 KiB TLS-record buffer is let go:
 * held until their write completed, the records outlived two scavenges, were promoted, and only
 * full mark-compacts freed them (~27 per GiB with four parallel uploads). The copy costs less.
 */
const SLAB = 1024 * 1024;
/** Free slabs kept between uploads (8 MiB). */
const SLAB_POOL_MAX = 8;
const slabPool: Buffer[] = [];
const takeSlab = (): Buffer => slabPool.pop() ?? Buffer.allocUnsafeSlow(SLAB);
const giveSlab = (b: Buffer): void => {
  if (isAligned(b)) giveAligned(b);
  else if (slabPool.length < SLAB_POOL_MAX) slabPool.push(b);
};

/** Aborted request bodies reject with this (the route answers 400 UPLOAD_ABORTED). */
export class BodyAborted extends Error {
  constructor() {
    super("request body aborted");
    this.name = "BodyAborted";
  }
}

/**
 * As `writeBody`, straight from the Node request (no web stream: each web-stream chunk costs
 * several promises, ~5 CPU s per GiB); a Node request's chunks are taken from its HTTP parser
 * (session-intake.ts), other streams' from their events. Chunks are copied into slabs; what arrived while a write
 * was in flight is written with one `writev` at its position (a slab's unwritten tail may be
 * filled while its head is being written: disjoint bytes). The request is paused while HIGH_WATER
 * bytes wait (TCP backpressure on a slow disk). Bytes are written only once `grow` has reserved
 * them; `grow` returns undefined when nothing needs waiting. Settles only when no write is in
 * flight, so the caller may truncate or close the handle then.
 *
 * `directFd` (the same file opened with O_DIRECT, session-direct.ts): whole 4 KiB blocks from
 * aligned slabs are written through it, the last partial block through `handle`. Without an aligned
 * slab, an unaligned offset, or on EINVAL (the file system refuses), the rest goes through `handle`.
 */
export function receiveBody(
  src: Readable,
  handle: FileHandle,
  offset: number,
  limit: number,
  what: string,
  grow?: (received: number) => Promise<void> | undefined,
  directFd?: OwnedFd,
): Promise<number> {
  return new Promise<number>((resolve, reject) => {
    // Descriptor numbers are read at each write (never kept across callbacks): a handle closed
    // by mistake fails the upload instead of writing into whatever file holds the number now.
    const fileFd = () => numOf(handle, "session file");
    const directNum = () => directFd!.num;
    let direct = directFd !== undefined && offset % ALIGN === 0;
    let received = 0;
    let position = offset;
    // Unwritten bytes: slabs[0] from `head`, the last slab up to `fill` (the next copy goes there).
    const slabs: Buffer[] = [];
    let head = 0;
    let fill = 0;
    let pendingBytes = 0; // copied, not yet handed to a write
    let writing = false;
    let reserving = false;
    let ended = false;
    let failure: unknown;
    let done = false;
    let intake: Intake | undefined = undefined; // set once attached; callbacks may run before
    // Chunks offered while a reservation is pending, in order (the direct intake delivers what the
    // parser already decrypted even after a pause).
    const held: Buffer[] = [];

    const finish = () => {
      if (done || writing || reserving) return;
      if (failure !== undefined) {
        done = true;
        detach();
        for (const b of slabs.splice(0)) giveSlab(b);
        reject(failure);
      } else if (ended && pendingBytes === 0 && held.length === 0) {
        done = true;
        detach();
        for (const b of slabs.splice(0)) giveSlab(b);
        resolve(received);
      }
    };
    const fail = (e: unknown) => {
      if (failure === undefined) failure = e;
      // Slabs go back to the pool in finish, once no write is in flight.
      pendingBytes = 0;
      held.length = 0;
      intake?.pause();
      finish();
    };
    const flowControl = () => {
      if (failure !== undefined || ended) return;
      if (!wanted()) intake?.pause();
      else intake?.resume();
    };
    const copyIn = (chunk: Buffer) => {
      for (let at = 0; at < chunk.length; ) {
        if (slabs.length === 0 || fill === SLAB) {
          const a = direct ? takeAligned() : undefined;
          if (!a) direct = false;
          slabs.push(a ?? takeSlab());
          fill = 0;
        }
        const n = chunk.copy(slabs[slabs.length - 1]!, fill, at);
        fill += n;
        at += n;
      }
      pendingBytes += chunk.length;
    };
    /** The first `bytes` unwritten bytes as slab views (no write in flight). */
    const views = (bytes: number): Buffer[] => {
      const out: Buffer[] = [];
      for (let i = 0; i < slabs.length && bytes > 0; i++) {
        const from = i === 0 ? head : 0;
        const to = Math.min(i === slabs.length - 1 ? fill : SLAB, from + bytes);
        if (to > from) out.push(slabs[i]!.subarray(from, to));
        bytes -= to - from;
      }
      return out;
    };
    /** `bytes` from the front are on disk: slabs wholly written go back to the pool. */
    const consumed = (bytes: number) => {
      head += bytes;
      while (slabs.length > 0 && (slabs.length > 1 ? head >= SLAB : head >= fill && fill === SLAB)) {
        giveSlab(slabs.shift()!);
        head -= SLAB;
      }
    };
    const pump = () => {
      if (writing || pendingBytes === 0 || failure !== undefined) return finish();
      // Direct: whole blocks only, at least a slab's worth until the end (a direct write is a disk
      // round trip, not a copy: one per 16 KiB record would be thousands per GiB); the partial
      // last block goes through `handle` at the end.
      const blocks = direct ? pendingBytes - (pendingBytes % ALIGN) : 0;
      if (direct && !ended && blocks < SLAB) return;
      const viaDirect = blocks > 0;
      const bytes = viaDirect ? blocks : pendingBytes;
      pendingBytes -= bytes;
      writing = true;
      writeAll(viaDirect ? directNum : fileFd, views(bytes), bytes, position, (err) => {
        writing = false;
        if (err && viaDirect && (err as NodeJS.ErrnoException).code === "EINVAL") {
          // O_DIRECT refused after all: these bytes (again, whole) and the rest through `handle`.
          direct = false;
          pendingBytes += bytes;
          return pump();
        }
        if (err) return fail(err);
        if (failure !== undefined) return finish();
        position += bytes;
        consumed(bytes);
        flowControl();
        pump();
      });
    };
    const wanted = () => failure === undefined && !reserving && pendingBytes < HIGH_WATER;
    const onData = (chunk: Buffer) => {
      if (failure !== undefined || chunk.length === 0) return;
      if (reserving) held.push(chunk);
      else accept(chunk);
    };
    const accept = (chunk: Buffer) => {
      received += chunk.length;
      if (received > limit) return fail(new PayloadTooLarge(what, limit));
      const wait = grow?.(received);
      if (wait) {
        // Nothing past the reserved bytes is written: hold this chunk until the quota says yes.
        reserving = true;
        intake?.pause();
        wait.then(
          () => {
            reserving = false;
            if (failure !== undefined) return finish();
            copyIn(chunk);
            pump();
            // What came meanwhile, in order; one of them may wait for the quota again.
            while (!reserving && held.length > 0 && failure === undefined) accept(held.shift()!);
            flowControl();
            if (!reserving) pump();
          },
          (e: unknown) => {
            reserving = false;
            fail(e);
          },
        );
        return;
      }
      copyIn(chunk);
      pump();
      if (pendingBytes >= HIGH_WATER) intake?.pause();
    };
    const onEnd = () => {
      ended = true;
      pump();
    };
    const onError = () => fail(new BodyAborted());
    const onClose = () => {
      if (!ended) fail(new BodyAborted());
    };
    const detach = () => {
      intake?.detach();
      src.off("error", onError);
      src.off("close", onClose);
    };
    if (src.readableEnded) {
      ended = true;
      return finish();
    }
    // Already aborted (the client went away before the handler got here): no event will come.
    if (src.destroyed) return fail(new BodyAborted());
    src.on("error", onError);
    src.on("close", onClose);
    intake = takeBody(src, onData, onEnd, wanted);
    // Callbacks during takeBody (a body already buffered whole) could not reach it yet.
    if (done) intake.detach();
    else flowControl();
  });
}

/** writev of all `bufs` at `position`, continuing after a short write; `fd` is asked at each call. */
function writeAll(fd: () => number, bufs: Buffer[], bytes: number, position: number, cb: (err: Error | null) => void): void {
  let num: number;
  try {
    num = fd();
  } catch (e) {
    return cb(e as Error);
  }
  writev(num, bufs, position, (err, n) => {
    if (err) return cb(err);
    if (n === bytes) return cb(null);
    if (n === 0) return cb(Object.assign(new Error("short write to the session file"), { code: "EIO" }));
    // Short write (e.g. the file system filling up): drop what was written and go on.
    let skip = n;
    const rest: Buffer[] = [];
    for (const b of bufs) {
      if (skip >= b.length) skip -= b.length;
      else {
        rest.push(skip > 0 ? b.subarray(skip) : b);
        skip = 0;
      }
    }
    writeAll(fd, rest, bytes - n, position + n, cb);
  });
}

/** Reads and discards a body, refusing more than `limit` bytes (PROPFIND request bodies). */
export async function drainBody(body: ReadableStream<Uint8Array> | null, limit: number, what: string): Promise<void> {
  if (!body) return;
  const reader = body.getReader();
  let received = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      received += value?.byteLength ?? 0;
      if (received > limit) throw new PayloadTooLarge(what, limit);
    }
  } catch (e) {
    await reader.cancel().catch(() => undefined);
    throw e;
  } finally {
    reader.releaseLock();
  }
}
