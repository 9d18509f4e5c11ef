/**
 * Token bucket for calls into the batch system (anchors §3.9: sites throttle their batch
 * controllers; Snakemake/ARC users lower status checks "to avoid stressing Slurm").
 * `rate` tokens per second, burst = max(1, rate). Waiters are served first-come first-served.
 */
export class TokenBucket {
  private tokens: number;
  private last: number;
  private readonly capacity: number;
  private readonly queue: Array<() => void> = [];
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly rate: number,
    private readonly now: () => number = () => performance.now(),
  ) {
    if (!(rate > 0)) throw new Error(`rate must be positive, got ${rate}`);
    this.capacity = Math.max(1, rate);
    this.tokens = this.capacity;
    this.last = this.now();
  }

  private refill(): void {
    const t = this.now();
    this.tokens = Math.min(this.capacity, this.tokens + ((t - this.last) / 1000) * this.rate);
    this.last = t;
  }

  /** Resolves when a token was taken. */
  take(): Promise<void> {
    return new Promise((resolve) => {
      this.queue.push(resolve);
      this.drain();
    });
  }

  /** Number of callers waiting for a token. */
  get waiting(): number {
    return this.queue.length;
  }

  private drain(): void {
    this.refill();
    while (this.queue.length > 0 && this.tokens >= 1) {
      this.tokens -= 1;
      this.queue.shift()!();
    }
    if (this.queue.length > 0 && this.timer === undefined) {
      const waitMs = Math.max(1, Math.ceil(((1 - this.tokens) / this.rate) * 1000));
      this.timer = setTimeout(() => {
        this.timer = undefined;
        this.drain();
      }, waitMs);
    }
  }
}
