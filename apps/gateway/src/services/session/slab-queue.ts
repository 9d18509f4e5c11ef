import { giveSlab, SLAB } from "./buffers.js";

/**
 * Received bytes not yet written, in slabs (buffers.ts). Each chunk is copied in at once and the
 * 16 KiB TLS-record buffer is let go: held until their write completed, the records outlived two
 * scavenges, were promoted, and only full mark-compacts freed them. The copy costs less. A slab's
 * unwritten tail may be filled while its head is being written: disjoint bytes.
 */
export class SlabQueue {
  /** Unwritten bytes: slabs[0] from `head`, the last slab up to `fill` (the next copy goes there). */
  private readonly slabs: Buffer[] = [];
  private head = 0;
  private fill = 0;
  /** Copied, not yet handed to a write. */
  pending = 0;

  /** Copies `chunk` in; `take` gives a new slab when the last one is full. */
  copyIn(chunk: Buffer, take: () => Buffer): void {
    for (let at = 0; at < chunk.length;) {
      if (this.slabs.length === 0 || this.fill === SLAB) {
        this.slabs.push(take());
        this.fill = 0;
      }
      const n = chunk.copy(this.slabs[this.slabs.length - 1]!, this.fill, at);
      this.fill += n;
      at += n;
    }
    this.pending += chunk.length;
  }

  /** The first `bytes` unwritten bytes as slab views, taken out of `pending` (no write in flight). */
  take(bytes: number): Buffer[] {
    this.pending -= bytes;
    const out: Buffer[] = [];
    for (let i = 0; i < this.slabs.length && bytes > 0; i++) {
      const from = i === 0 ? this.head : 0;
      const to = Math.min(i === this.slabs.length - 1 ? this.fill : SLAB, from + bytes);
      if (to > from) out.push(this.slabs[i]!.subarray(from, to));
      bytes -= to - from;
    }
    return out;
  }

  /** `bytes` taken could not be written and are pending again. */
  untake(bytes: number): void {
    this.pending += bytes;
  }

  /** `bytes` from the front are on disk: slabs wholly written go back to the pool. */
  written(bytes: number): void {
    this.head += bytes;
    while (this.slabs.length > 0 && (this.slabs.length > 1 ? this.head >= SLAB : this.head >= this.fill && this.fill === SLAB)) {
      giveSlab(this.slabs.shift()!);
      this.head -= SLAB;
    }
  }

  /** Nothing more will be written: every slab back to the pool (no write in flight). */
  release(): void {
    this.pending = 0;
    for (const b of this.slabs.splice(0)) giveSlab(b);
  }
}
