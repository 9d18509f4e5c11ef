/**
 * Token bucket for operations on the batch system (sites throttle their batch
 * controllers; Snakemake/ARC users lower status checks "to avoid stressing Slurm"). One token per
 * operation — a job submitted or cancelled, a poll query — whatever the number of script runs.
 * `rate` tokens per second, burst = max(1, burst ?? rate). Waiters are served first-come
 * first-served; a take of more than the burst waits for a full bucket and leaves it in debt, so
 * the long-run rate holds for batches too.
 */
export class TokenBucket {
  private tokens: number;
  private last: number;
  private readonly capacity: number;
  private readonly queue: Array<{ n: number; resolve: () => void }> = [];
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly rate: number,
    private readonly now: () => number = () => performance.now(),
    burst?: number,
  ) {
    if (!(rate > 0)) throw new Error(`rate must be positive, got ${rate}`);
    this.capacity = Math.max(1, burst ?? rate);
    this.tokens = this.capacity;
    this.last = this.now();
  }

  private refill(): void {
    const t = this.now();
    this.tokens = Math.min(this.capacity, this.tokens + ((t - this.last) / 1000) * this.rate);
    this.last = t;
  }

  /** Resolves when `n` tokens (operations) were taken. */
  take(n = 1): Promise<void> {
    return new Promise((resolve) => {
      this.queue.push({ n: Math.max(1, n), resolve });
      this.drain();
    });
  }

  /** Number of callers waiting for tokens. */
  get waiting(): number {
    return this.queue.length;
  }

  private drain(): void {
    this.refill();
    for (let head = this.queue[0]; head && this.tokens >= Math.min(head.n, this.capacity); head = this.queue[0]) {
      this.tokens -= head.n;
      this.queue.shift()!.resolve();
    }
    const head = this.queue[0];
    if (head && this.timer === undefined) {
      const waitMs = Math.max(1, Math.ceil(((Math.min(head.n, this.capacity) - this.tokens) / this.rate) * 1000));
      this.timer = setTimeout(() => {
        this.timer = undefined;
        this.drain();
      }, waitMs);
    }
  }
}

/** No limit (fork: the "batch system" is this host's process table). */
export const UNLIMITED = { take: (_n?: number) => Promise.resolve(), waiting: 0 } as const;
