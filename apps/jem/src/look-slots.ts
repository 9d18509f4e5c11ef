/**
 * The advance loop's slots: at most `capacity` looks hold one at a time. A look that waits on the
 * batch system gives its slot up (`AdvanceLoop.outsideSlot`) and takes one again when it comes
 * back; coming back, it goes ahead of new claims, so a bulk submit of 100 jobs is not cut in two
 * by new looks taking the slots its first half freed. The loop reserves slots before a claim (a
 * look coming back meanwhile must not find them free) and gives back the ones the claim did not use.
 */
export class LookSlots {
  private active = 0;
  private readonly returning: Array<() => void> = [];

  constructor(
    readonly capacity: number,
    /** Called when a slot goes back to the pool (the loop may claim again). */
    private readonly onFree: () => void,
  ) {}

  /** Slots a claim may use now: none while looks are waiting to come back. */
  get free(): number {
    return this.capacity - this.active - this.returning.length;
  }

  /** Slots held, by looks and by a claim in progress. */
  get held(): number {
    return this.active;
  }

  /** Reserves `n` slots for a claim (the loop checked `free` first). */
  reserve(n: number): void {
    this.active += n;
  }

  /**
   * Gives one slot back: to the look waiting longest to come back, else to the pool. `quiet`:
   * the loop itself gives back unused reservations and needs no wake-up.
   */
  give(quiet = false): void {
    const next = this.returning.shift();
    if (next) next();
    else {
      this.active--;
      if (!quiet) this.onFree();
    }
  }

  /** A slot for a look coming back from outside one: at once if one is free and nobody waits. */
  take(): Promise<void> {
    if (this.active < this.capacity && this.returning.length === 0) {
      this.active++;
      return Promise.resolve();
    }
    return new Promise<void>((r) => this.returning.push(r));
  }
}
