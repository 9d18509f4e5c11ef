/**
 * Transfer slots shared by the owners of jobs: at most `total` in use, at most `perOwner` by one
 * owner. A freed slot goes to the owners waiting in turn (round robin: an owner just served goes
 * to the back of the line), so one owner's many slow transfers delay another owner's by at most
 * one turn. State is per owner waiting or holding a slot, never per job or file.
 */
export class FairSlots {
  private used = 0;
  private readonly held = new Map<string, number>();
  /** Owners with waiters, in serving order (a Map keeps insertion order). */
  private readonly lines = new Map<string, Array<() => void>>();

  constructor(
    private readonly total: number,
    private readonly perOwner: number,
  ) {}

  /** Runs `fn` holding one of the owner's slots; an abort while waiting rejects with the signal's reason. */
  async run<T>(owner: string, fn: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    await this.acquire(owner, signal);
    try {
      return await fn();
    } finally {
      this.release(owner);
    }
  }

  /** Slots in use, in all and by owner (metrics, tests). */
  usage(): { used: number; byOwner: Record<string, number> } {
    return { used: this.used, byOwner: Object.fromEntries(this.held) };
  }

  private acquire(owner: string, signal?: AbortSignal): Promise<void> {
    signal?.throwIfAborted();
    if (!this.lines.has(owner) && this.free(owner)) {
      this.take(owner);
      return Promise.resolve();
    }
    return new Promise<void>((resolve, reject) => {
      const line = this.lines.get(owner) ?? [];
      const grant = () => {
        signal?.removeEventListener("abort", onAbort);
        resolve();
      };
      const onAbort = () => {
        const i = line.indexOf(grant);
        if (i >= 0) line.splice(i, 1);
        if (line.length === 0 && this.lines.get(owner) === line) this.lines.delete(owner);
        reject(signal!.reason);
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      line.push(grant);
      this.lines.set(owner, line);
    });
  }

  private free(owner: string): boolean {
    return this.used < this.total && (this.held.get(owner) ?? 0) < this.perOwner;
  }

  private take(owner: string): void {
    this.used++;
    this.held.set(owner, (this.held.get(owner) ?? 0) + 1);
  }

  private release(owner: string): void {
    this.used--;
    const n = (this.held.get(owner) ?? 1) - 1;
    if (n > 0) this.held.set(owner, n);
    else this.held.delete(owner);
    this.grant();
  }

  /** Hands free slots to waiting owners in turn; an owner at its cap is passed over, keeping its place. */
  private grant(): void {
    while (this.used < this.total) {
      let next: string | undefined;
      for (const o of this.lines.keys()) {
        if (this.free(o)) {
          next = o;
          break;
        }
      }
      if (next === undefined) return;
      const line = this.lines.get(next)!;
      const wake = line.shift()!;
      // Served: to the back of the line (or out of it).
      this.lines.delete(next);
      if (line.length > 0) this.lines.set(next, line);
      this.take(next);
      wake();
    }
  }
}
