import { randomBytes } from "node:crypto";
import type { Redis } from "ioredis";
import { Keys } from "./keys.js";
import { runScript } from "./scripts.js";

/** A held lease; refreshed in the background until released, so long operations keep it. */
export interface Lease {
  readonly key: string;
  release(): Promise<void>;
  /** False once the lease was lost (expired and taken by someone else). */
  readonly held: boolean;
}

/**
 * Redis leases (token-checked acquire/release/extend, lua/lock-*.lua). A crashed holder's lease
 * simply expires, so `kill -9` never leaves a job or the poller locked for longer than one lease.
 * A release that does not reach Redis (connection dropped mid-failover) or is lost with the old
 * primary leaves the key with a token of this instance that nobody here holds: the next
 * `tryAcquire` of this instance takes it over at once instead of waiting out the ttl (a Sentinel
 * failover held the jobs whose looks it interrupted for the whole 30 s lease, tests/ha/sentinel).
 */
export class Locks {
  private readonly owner = randomBytes(6).toString("hex");
  private readonly keys: Keys;
  /** Key → token of the leases this instance holds (or is taking) right now. */
  private readonly live = new Map<string, string>();

  constructor(private readonly redis: Redis, prefix: string) {
    this.keys = new Keys(prefix);
  }

  key(name: string): string {
    return this.keys.lock(name);
  }

  async tryAcquire(name: string, ttlMs: number): Promise<Lease | undefined> {
    const key = this.key(name);
    // Held here already: no round trip (and the script below must never see a live token as a leftover).
    if (this.live.has(key)) return undefined;
    const token = `${this.owner}:${randomBytes(6).toString("hex")}`;
    this.live.set(key, token);
    let ok: unknown;
    try {
      ok = await runScript(this.redis, "ceLockAcquire", [key], [token, ttlMs, `${this.owner}:`]);
    } finally {
      if (ok !== 1) this.live.delete(key);
    }
    if (ok !== 1) return undefined;
    let held = true;
    const drop = () => {
      held = false;
      if (this.live.get(key) === token) this.live.delete(key);
    };
    const timer = setInterval(() => {
      runScript(this.redis, "ceLockExtend", [key], [token, ttlMs])
        .then((r) => {
          if (Number(r) !== 1) drop();
        })
        .catch(() => undefined);
    }, Math.max(100, Math.floor(ttlMs / 3)));
    timer.unref();
    return {
      key,
      get held() {
        return held;
      },
      release: async () => {
        clearInterval(timer);
        if (!held) return;
        drop();
        // A failed release is taken over by this instance's next tryAcquire of the key (see above).
        await runScript(this.redis, "ceLockRelease", [key], [token]).catch(() => undefined);
      },
    };
  }
}
