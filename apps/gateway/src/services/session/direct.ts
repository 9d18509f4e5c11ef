import { constants } from "node:fs";
import type { FileHandle } from "node:fs/promises";
import { numOf, OwnedFd } from "@ce/sessionfs";

/**
 * Direct I/O (O_DIRECT) for large session transfers: the bytes go between our buffers and the disk
 * without passing through the page cache. Writing a GiB into the page cache is a copy into a GiB
 * of pages the kernel must find first; on a VM whose free memory is handed back to the host (free
 * page reporting, as on the bench machine) every such page is faulted in again by the host on first
 * touch: ~3 CPU s of system time per GiB for the writer (`dd` to a new file: 3.2 s; O_DIRECT: 0.05 s),
 * and the same again for a reader of a file that is not cached. Large uploads are written once and
 * read once (by the job, often on another node): caching them mostly evicts what is worth caching.
 *
 * O_DIRECT wants the buffer address, length and file offset aligned (4096 covers every block
 * device). Node has no aligned allocation; a WebAssembly.Memory's backing store is page-aligned,
 * so aligned slabs are carved from one such arena. Every direct path falls back to ordinary I/O:
 * no arena (address space limits), a file system refusing O_DIRECT (EINVAL), no /proc.
 */

export const ALIGN = 4096;
/** Slab size: aligned, and the unit of the upload and download buffers. */
export const SLAB = 1024 * 1024;
/** Transfers smaller than this use the page cache (small files are often read back soon). */
export const DIRECT_MIN = 8 * 1024 * 1024;

/**
 * 64 MiB of aligned slabs (~10 large transfers at once; beyond, ordinary I/O), one arena: each
 * WebAssembly.Memory reserves ~10 GiB of address space (guard regions; resident only as touched).
 */
const ARENA_SLABS = 64;
const MAX_ARENAS = 1;
let arenas = 0;
const free: Buffer[] = [];
const aligned = new WeakSet<Buffer>();
/** A Node global the workspace's type libraries (no DOM) do not declare. */
const { Memory } = (globalThis as unknown as { WebAssembly: { Memory: new (d: { initial: number; maximum: number }) => { buffer: ArrayBuffer } } }).WebAssembly;

/** An aligned slab, or undefined when none is left (the caller then uses ordinary I/O). */
export function takeAligned(): Buffer | undefined {
  if (free.length === 0 && arenas < MAX_ARENAS) {
    try {
      const mem = new Memory({ initial: (ARENA_SLABS * SLAB) / 65536, maximum: (ARENA_SLABS * SLAB) / 65536 });
      arenas++;
      for (let i = ARENA_SLABS - 1; i >= 0; i--) {
        const b = Buffer.from(mem.buffer, i * SLAB, SLAB);
        aligned.add(b);
        free.push(b);
      }
    } catch {
      arenas = MAX_ARENAS; // no address space for it: don't try again
    }
  }
  return free.pop();
}

/** Returns a slab from takeAligned (other buffers are ignored). Never while I/O on it is in flight. */
export function giveAligned(b: Buffer): void {
  if (aligned.has(b)) free.push(b);
}

export function isAligned(b: Buffer): boolean {
  return aligned.has(b);
}

/**
 * A second descriptor of the open file `handle` with O_DIRECT (through /proc/self/fd: the same
 * inode, no path looked up again), or undefined when it cannot be had. The caller owns it and
 * closes it once no I/O on it is in flight.
 */
export function reopenDirect(handle: FileHandle, mode: "r" | "w"): Promise<OwnedFd | undefined> {
  const flags = (mode === "r" ? constants.O_RDONLY : constants.O_WRONLY) | constants.O_DIRECT;
  if (!constants.O_DIRECT) return Promise.resolve(undefined);
  return OwnedFd.open(`/proc/self/fd/${numOf(handle, "session file")}`, flags, undefined, "session file (O_DIRECT)").catch(() => undefined);
}
