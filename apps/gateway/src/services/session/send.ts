import { read } from "node:fs";
import type { FileHandle } from "node:fs/promises";
import type { ServerResponse } from "node:http";
import { closeHandle, numOf, type OwnedFd } from "@ce/sessionfs";
import { ALIGN, giveSlab, SLAB, takeAlignedSlab, takeSlab } from "./buffers.js";
import { DIRECT_MIN, reopenDirect } from "./direct.js";

/**
 * Session downloads written straight to the Node response (no web stream in between). Reads go
 * into pooled slabs (buffers.ts). A buffer is read into
 * again only after the response has flushed it (its write callback), and at most DEPTH are in
 * flight per download, which is also the backpressure: a slow client stops the reads.
 */

/**
 * 1 MiB reads, two in flight: a quarter of the thread-pool round trips and write callbacks of
 * 256 KiB reads, somewhat less CPU per GiB; 2 MiB per download.
 */
const CHUNK = SLAB;
const DEPTH = 2;
/**
 * Direct reads have no kernel read-ahead: two in flight keep the disk busy while the previous
 * read is sent (a large GET takes clearly less time than one read at a time), four buffers per download.
 */
const DIRECT_READS = 2;
const DIRECT_DEPTH = 4;
const take = takeSlab;
const give = giveSlab;

/**
 * Writes bytes [start, end] (inclusive) of the open file to `out`, whose head is already written,
 * then ends it. Takes ownership of `handle`: closed when the response closes (done or client
 * gone). A read error or a file that shrank meanwhile destroys the response: the client sees a
 * short body rather than a wrong Content-Length on a connection that stays open.
 *
 * A large range is read with O_DIRECT (direct.ts) into aligned slabs, whole aligned blocks
 * from the block holding the first byte wanted, past the page cache; a read without an aligned
 * slab, or refused (EINVAL), goes through `handle` as usual.
 */
export function sendFile(handle: FileHandle, start: number, end: number, out: ServerResponse): void {
  if (end + 1 - start < DIRECT_MIN) return send(handle, undefined, start, end, out);
  void reopenDirect(handle, "r").then((d) => send(handle, d, start, end, out));
}

/** One read: `want` bytes of the file from `at`, landing in `buf` from `skip`. */
interface Slot {
  buf: Buffer;
  at: number;
  skip: number;
  want: number;
  /** Bytes of the wanted range read, once done. */
  got?: number;
  err?: Error;
}

function send(handle: FileHandle, directFd: OwnedFd | undefined, start: number, end: number, out: ServerResponse): void {
  const last = end + 1;
  const depth = directFd === undefined ? DEPTH : DIRECT_DEPTH;
  const maxReads = directFd === undefined ? 1 : DIRECT_READS;
  let direct = directFd !== undefined;
  let pos = start; // first byte not yet asked for
  let held = 0; // buffers being read into or written
  let reads = 0; // reads in flight
  let closed = false;
  const queue: Slot[] = []; // reads in file order, written out in that order once done

  let released = false;
  // Closed only when no read is in flight: the descriptor number must not be reused under one.
  // A failed close is logged by the onFdStolen hook; the response is gone by then.
  const release = () => {
    if (released || reads > 0) return;
    released = true;
    void directFd?.close().catch(() => undefined);
    void closeHandle(handle, "session file").catch(() => undefined);
  };
  const onClose = () => {
    closed = true;
    for (const q of queue.splice(0)) if (q.got !== undefined || q.err) give(q.buf);
    release();
  };
  const fail = (err: Error) => {
    out.destroy(err);
    onClose();
  };
  const issue = (q: Slot, viaDirect: boolean) => {
    // The number is taken at the call: a handle closed by mistake fails the response here, it
    // never reads whatever file holds the number now.
    let num: number;
    try {
      num = viaDirect ? directFd!.num : numOf(handle, "session file");
    } catch (e) {
      give(q.buf);
      return fail(e as Error);
    }
    reads++;
    // Direct: whole aligned blocks (a short read at the end of the file is fine).
    const from = viaDirect ? q.at - q.skip : q.at;
    const len = viaDirect ? CHUNK : q.want;
    read(num, q.buf, viaDirect ? 0 : q.skip, len, from, (err, n) => {
      reads--;
      if (closed) {
        give(q.buf);
        return release();
      }
      if (viaDirect && (err as NodeJS.ErrnoException | null)?.code === "EINVAL") {
        // O_DIRECT refused after all: this read again and the rest through `handle`.
        direct = false;
        return issue(q, false);
      }
      if (err) q.err = err;
      else q.got = Math.min(viaDirect ? n - q.skip : n, q.want);
      flush();
    });
  };
  const next = (): void => {
    while (!closed && pos < last && held < depth && reads < maxReads) {
      held++;
      const aligned = direct ? takeAlignedSlab() : undefined;
      const buf = aligned ?? take();
      const skip = aligned ? pos % ALIGN : 0;
      const want = Math.min(CHUNK - skip, last - pos);
      const q: Slot = { buf, at: pos, skip, want };
      pos += want;
      queue.push(q);
      issue(q, aligned !== undefined);
    }
  };
  const flush = (): void => {
    while (!closed && queue.length > 0 && (queue[0]!.got !== undefined || queue[0]!.err)) {
      const q = queue.shift()!;
      if (q.err || q.got! < q.want) {
        held--;
        give(q.buf);
        return fail(q.err ?? new Error("session file shrank while being sent"));
      }
      out.write(q.skip === 0 && q.want === q.buf.length ? q.buf : q.buf.subarray(q.skip, q.skip + q.want), () => {
        held--;
        give(q.buf);
        next();
      });
      if (q.at + q.want >= last) out.end();
    }
    next();
  };
  // A client already gone never emits "close" again.
  if (out.destroyed || out.closed) return onClose();
  out.once("close", onClose);
  next();
}
