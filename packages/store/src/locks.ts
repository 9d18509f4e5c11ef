import { randomBytes } from "node:crypto";
import type { Redis } from "ioredis";
import { decodeRecord, type JobRecord } from "./jobs.js";
import { Keys } from "./keys.js";
import { runScript } from "./scripts.js";

/** A held lease; refreshed in the background until released, so long operations keep it. */
export interface Lease {
  readonly key: string;
  /**
   * Ends the lease. With `ring`, the job is also made due at `ring.at` (an earlier due time wins,
   * as AdvanceSet.ring) in the same script call, even when the lease was lost meanwhile; that call's
   * errors are then thrown (a lost ring could leave the job with nothing due).
   */
  release(ring?: { id: string; at: number }): Promise<void>;
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

  constructor(
    private readonly redis: Redis,
    prefix: string,
  ) {
    this.keys = new Keys(prefix);
  }

  key(name: string): string {
    return this.keys.lock(name);
  }

  async tryAcquire(name: string, ttlMs: number): Promise<Lease | undefined> {
    return (await this.take(this.key(name), ttlMs))?.lease;
  }

  /**
   * The lease `job:<id>` and, when taken, the job's record read under it in the same script call
   * (undefined record: no such job). Undefined when another holder has the lease.
   */
  async tryAcquireJob(jobId: string, ttlMs: number): Promise<{ lease: Lease; record: JobRecord | undefined } | undefined> {
    const r = await this.take(this.key(`job:${jobId}`), ttlMs, this.keys.job(jobId));
    if (!r) return undefined;
    const flat = r.read ?? [];
    const h: Record<string, string> = {};
    for (let i = 0; i + 1 < flat.length; i += 2) h[flat[i]!] = flat[i + 1]!;
    return { lease: r.lease, record: decodeRecord(h) };
  }

  private async take(key: string, ttlMs: number, readKey?: string): Promise<{ lease: Lease; read?: string[] } | undefined> {
    // Held here already: no round trip (and the script below must never see a live token as a leftover).
    if (this.live.has(key)) return undefined;
    const token = `${this.owner}:${randomBytes(6).toString("hex")}`;
    this.live.set(key, token);
    let ok = false;
    let read: string[] | undefined;
    try {
      if (readKey === undefined) ok = (await runScript(this.redis, "ceLockAcquire", [key], [token, ttlMs, `${this.owner}:`])) === 1;
      else {
        const r = await runScript(this.redis, "ceLockAcquireRead", [key, readKey], [token, ttlMs, `${this.owner}:`]);
        if (Array.isArray(r) && r[0] === 1) {
          ok = true;
          read = r[1] as string[];
        }
      }
    } finally {
      if (!ok) this.live.delete(key);
    }
    if (!ok) return undefined;
    let held = true;
    const drop = () => {
      held = false;
      if (this.live.get(key) === token) this.live.delete(key);
    };
    const timer = setInterval(
      () => {
        runScript(this.redis, "ceLockExtend", [key], [token, ttlMs])
          .then((r) => {
            if (Number(r) !== 1) drop();
          })
          .catch(() => undefined);
      },
      Math.max(100, Math.floor(ttlMs / 3)),
    );
    timer.unref();
    const lease: Lease = {
      key,
      get held() {
        return held;
      },
      release: async (ring?: { id: string; at: number }) => {
        clearInterval(timer);
        const wasHeld = held;
        if (held) drop();
        if (ring) {
          // A failed call is redone by the caller; its release part is taken over as below.
          await runScript(
            this.redis,
            "ceLockReleaseRing",
            [key, this.keys.advanceDue(), this.keys.advanceBell()],
            [token, Math.ceil(ring.at), Date.now(), ring.id],
          );
          return;
        }
        if (!wasHeld) return;
        // A failed release is taken over by this instance's next tryAcquire of the key (see above).
        await runScript(this.redis, "ceLockRelease", [key], [token]).catch(() => undefined);
      },
    };
    return { lease, ...(read !== undefined ? { read } : {}) };
  }
}
