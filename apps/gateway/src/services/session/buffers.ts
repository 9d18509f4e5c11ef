/**
 * The buffers of session transfers: 1 MiB slabs, the unit of both the upload writer and the
 * download sender, from one pool. Reused rather than allocated per chunk: fresh external memory
 * per chunk is answered by V8 with full garbage collections every ~64 MB, which cost more than
 * the copies. Aligned slabs (for O_DIRECT, direct.ts) come from a separate arena.
 */

/** O_DIRECT alignment of buffer address, length and file offset (covers every block device). */
export const ALIGN = 4096;
/** Slab size: aligned, and the unit of the upload and download buffers. */
export const SLAB = 1024 * 1024;

/** Free ordinary slabs kept between transfers (12 MiB). */
const POOL_MAX = 12;
const pool: Buffer[] = [];

/**
 * Aligned slabs: Node has no aligned allocation; a WebAssembly.Memory's backing store is
 * page-aligned (runtime-internals.ts, "aligned-memory"), so aligned slabs are carved from one such
 * arena. 64 MiB of them (~10 large transfers at once; beyond, ordinary I/O), one arena: each
 * WebAssembly.Memory reserves ~10 GiB of address space (guard regions; resident only as touched).
 */
const ARENA_SLABS = 64;
const MAX_ARENAS = 1;
let arenas = 0;
let arenaAllowed = true;
const free: Buffer[] = [];
const aligned = new WeakSet<Buffer>();
/** A Node global the workspace's type libraries (no DOM) do not declare. */
const { Memory } = (
  globalThis as unknown as { WebAssembly: { Memory: new (d: { initial: number; maximum: number }) => { buffer: ArrayBuffer } } }
).WebAssembly;

/** Turns the aligned arena on or off (`gateway.internals.alignedMemory`); off, no slab is aligned. */
export function useAlignedMemory(on: boolean): void {
  arenaAllowed = on;
}

export function alignedMemoryEnabled(): boolean {
  return arenaAllowed;
}

/** An ordinary slab. */
export function takeSlab(): Buffer {
  return pool.pop() ?? Buffer.allocUnsafeSlow(SLAB);
}

/** An aligned slab, or undefined when none is left or the arena is off (the caller uses ordinary I/O). */
export function takeAlignedSlab(): Buffer | undefined {
  if (!arenaAllowed) return undefined;
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

/** Returns a slab of either kind to its pool. Never while I/O on it is in flight. */
export function giveSlab(b: Buffer): void {
  if (aligned.has(b)) free.push(b);
  else if (b.length === SLAB && pool.length < POOL_MAX) pool.push(b);
}

export function isAligned(b: Buffer): boolean {
  return aligned.has(b);
}
