import type { Redis } from "ioredis";
import { Keys, ownerKey } from "./keys.js";
import { runScript } from "./scripts.js";

/** Who a bucket belongs to: an authenticated identity, else the peer address. */
export type RateClient = { subject: string } | { address: string };

/**
 * Tokens one lease call takes from the shared bucket: 50 ms of refill (100 at 2,000/s), never more
 * than the burst, at least 1 (slow limits stay exact). It is also the slack: tokens leased by a
 * gateway but not yet spent are already gone from the bucket, so an identity can get at most
 * `leaseSize × gateways` requests beyond the bucket's own bound in any interval.
 */
export function leaseSize(rate: number, burst: number): number {
  return Math.max(1, Math.min(Math.floor(burst), Math.ceil(rate / 20)));
}

interface Lease {
  /** Leased tokens not yet spent. */
  tokens: number;
  /** The bucket was empty: refuse locally until then (ms), without asking Redis again. */
  deniedUntil: number;
  /** The lease call in flight: concurrent requests of one client wait for the same call. */
  pending?: Promise<void> | undefined;
  lastUsed: number;
}

/** Clients remembered per gateway; past this, idle ones are forgotten (their leftovers are lost). */
const MAX_CLIENTS = 10_000;
const IDLE_MS = 60_000;
/** Shortest local refusal (ms): the lease period of leaseSize(). */
const REFUSAL_MS = 50;

/**
 * Request token buckets shared by every gateway (lua/token-bucket.lua): refill at `rate`
 * tokens/s up to `burst`, Redis TIME as the clock. The limiter leases tokens in blocks of
 * `leaseSize()` and spends them locally, and remembers a refusal until a token is due again: one
 * Redis call per block of requests (and none while a client is being refused), not one per request.
 */
export class RateLimiter {
  private readonly keys: Keys;
  private readonly leases = new Map<string, Lease>();

  constructor(
    private readonly redis: Redis,
    prefix: string,
  ) {
    this.keys = new Keys(prefix);
  }

  /** Takes one token; returns undefined when allowed, else the milliseconds until one is available. */
  async take(client: RateClient, rate: number, burst: number): Promise<number | undefined> {
    const who = "subject" in client ? `i:${ownerKey(client.subject)}` : `a:${client.address}`;
    let l = this.leases.get(who);
    if (!l) {
      if (this.leases.size >= MAX_CLIENTS) this.forgetIdle();
      this.leases.set(who, (l = { tokens: 0, deniedUntil: 0, lastUsed: 0 }));
    }
    for (;;) {
      const now = Date.now();
      l.lastUsed = now;
      if (l.tokens >= 1) {
        l.tokens--;
        return undefined;
      }
      if (l.deniedUntil > now) return l.deniedUntil - now;
      const lease = l;
      // Another request's lease may be spent by others before this one runs again: loop.
      lease.pending ??= this.lease(who, lease, rate, burst).finally(() => (lease.pending = undefined));
      await lease.pending;
    }
  }

  /** Takes up to leaseSize() tokens from the shared bucket into the local lease. */
  private async lease(who: string, l: Lease, rate: number, burst: number): Promise<void> {
    const res = (await runScript(this.redis, "ceTokenBucket", [this.keys.rateLimit(who)], [rate, burst, leaseSize(rate, burst)])) as [
      number,
      number,
    ];
    const granted = Number(res[0]);
    if (granted >= 1) l.tokens += granted;
    // Refused locally for at least one lease period: a client hammering past its limit costs
    // at most 20 Redis calls a second per gateway, whatever its request rate.
    else l.deniedUntil = Date.now() + Math.max(REFUSAL_MS, Number(res[1]));
  }

  private forgetIdle(): void {
    const cutoff = Date.now() - IDLE_MS;
    for (const [k, l] of this.leases) if (l.lastUsed < cutoff && !l.pending) this.leases.delete(k);
    // Still full (a flood of distinct clients): drop the oldest entries without a call in flight.
    for (const [k, l] of this.leases) {
      if (this.leases.size < MAX_CLIENTS) break;
      if (!l.pending) this.leases.delete(k);
    }
  }
}
