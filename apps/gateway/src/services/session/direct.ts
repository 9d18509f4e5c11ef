import { constants } from "node:fs";
import type { FileHandle } from "node:fs/promises";
import { numOf, OwnedFd } from "@ce/sessionfs";
import { alignedMemoryEnabled } from "./buffers.js";

/**
 * Direct I/O (O_DIRECT) for large session transfers: the bytes go between our buffers and the disk
 * without passing through the page cache. Writing a GiB into the page cache is a copy into a GiB
 * of pages the kernel must find first; on a VM whose free memory is handed back to the host (free
 * page reporting) every such page is faulted in again by the host on first touch, which costs the
 * writer several times the CPU of the direct write, and the same again for a reader of a file that
 * is not cached. Large uploads are written once and read once (by the job, often on another node):
 * caching them mostly evicts what is worth caching.
 *
 * O_DIRECT wants the buffer address, length and file offset aligned: aligned slabs come from
 * buffers.ts. Every direct path falls back to ordinary I/O: no aligned memory (address space
 * limits, or `gateway.internals.alignedMemory` off), a file system refusing O_DIRECT (EINVAL), no /proc.
 */

/** Transfers smaller than this use the page cache (small files are often read back soon). */
export const DIRECT_MIN = 8 * 1024 * 1024;

/**
 * A second descriptor of the open file `handle` with O_DIRECT (through /proc/self/fd: the same
 * inode, no path looked up again), or undefined when it cannot be had or would have no aligned
 * buffers. The caller owns it and closes it once no I/O on it is in flight.
 */
export function reopenDirect(handle: FileHandle, mode: "r" | "w"): Promise<OwnedFd | undefined> {
  const flags = (mode === "r" ? constants.O_RDONLY : constants.O_WRONLY) | constants.O_DIRECT;
  if (!constants.O_DIRECT || !alignedMemoryEnabled()) return Promise.resolve(undefined);
  return OwnedFd.open(`/proc/self/fd/${numOf(handle, "session file")}`, flags, undefined, "session file (O_DIRECT)").catch(() => undefined);
}
