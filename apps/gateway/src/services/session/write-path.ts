import { writev } from "node:fs";
import type { FileHandle } from "node:fs/promises";
import { numOf, type OwnedFd } from "@ce/sessionfs";
import { ALIGN, SLAB, takeAlignedSlab, takeSlab } from "./buffers.js";

/**
 * The two ways the upload writer (receive.ts) puts bytes into the file, behind one interface:
 *
 * - **direct** (the fast path for large bodies): the same file opened with O_DIRECT (direct.ts),
 *   written in whole 4 KiB blocks from aligned slabs, at least a slab's worth at a time until the
 *   end (a direct write is a disk round trip, not a copy: one per 16 KiB record would be
 *   thousands per GiB);
 * - **buffered** (the portable path): the ordinary descriptor, through the page cache, whatever
 *   is pending.
 *
 * The writer starts on the direct path when it has a direct descriptor and the offset is aligned,
 * and falls back to the buffered one for good when no aligned slab is left or the file system
 * refuses O_DIRECT (EINVAL); the last partial block of a direct upload is always written buffered.
 */
export interface WritePath {
  readonly kind: "direct" | "buffered";
  /** A slab for received bytes; undefined when this path has none left (the writer falls back). */
  slab(): Buffer | undefined;
  /** How many of the `pending` unwritten bytes to write now: 0 = none yet (at the end: the buffered path writes them). */
  portion(pending: number, ended: boolean): number;
  /** writev of `bufs` (`bytes` in all) at `position`, continuing after a short write. */
  write(bufs: Buffer[], bytes: number, position: number, cb: (err: NodeJS.ErrnoException | null) => void): void;
}

/**
 * Descriptor numbers are read at each write (never kept across callbacks): a handle closed by
 * mistake fails the upload instead of writing into whatever file holds the number now.
 */
export function bufferedPath(handle: FileHandle): WritePath {
  const fd = () => numOf(handle, "session file");
  return {
    kind: "buffered",
    slab: takeSlab,
    portion: (pending) => pending,
    write: (bufs, bytes, position, cb) => writeAll(fd, bufs, bytes, position, cb),
  };
}

export function directPath(directFd: OwnedFd): WritePath {
  const fd = () => directFd.num;
  return {
    kind: "direct",
    slab: takeAlignedSlab,
    portion: (pending, ended) => {
      const blocks = pending - (pending % ALIGN);
      return !ended && blocks < SLAB ? 0 : blocks;
    },
    write: (bufs, bytes, position, cb) => writeAll(fd, bufs, bytes, position, cb),
  };
}

/** The path an upload at `offset` starts on, and the buffered one it falls back to. */
export function writePaths(handle: FileHandle, directFd: OwnedFd | undefined, offset: number): { first: WritePath; buffered: WritePath } {
  const buffered = bufferedPath(handle);
  return { first: directFd !== undefined && offset % ALIGN === 0 ? directPath(directFd) : buffered, buffered };
}

function writeAll(
  fd: () => number,
  bufs: Buffer[],
  bytes: number,
  position: number,
  cb: (err: NodeJS.ErrnoException | null) => void,
): void {
  let num: number;
  try {
    num = fd();
  } catch (e) {
    return cb(e as NodeJS.ErrnoException);
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
