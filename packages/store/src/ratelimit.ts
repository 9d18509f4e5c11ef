import type { Redis } from "ioredis";
import { Keys, ownerKey } from "./keys.js";
import { runScript } from "./scripts.js";

/** Who a bucket belongs to: an authenticated identity, else the peer address. */
export type RateClient = { subject: string } | { address: string };

/**
 * Request token buckets shared by every gateway (lua/token-bucket.lua): refill at `rate`
 * tokens/s up to `burst`, Redis TIME as the clock.
 */
export class RateLimiter {
  private readonly keys: Keys;

  constructor(private readonly redis: Redis, prefix: string) {
    this.keys = new Keys(prefix);
  }

  /** Takes one token; returns undefined when allowed, else the milliseconds until one is available. */
  async take(client: RateClient, rate: number, burst: number): Promise<number | undefined> {
    const who = "subject" in client ? `i:${ownerKey(client.subject)}` : `a:${client.address}`;
    const res = (await runScript(this.redis, "ceTokenBucket", [this.keys.rateLimit(who)], [rate, burst])) as [number, number];
    return Number(res[0]) === 1 ? undefined : Number(res[1]);
  }
}
