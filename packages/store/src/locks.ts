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
 * Redis leases (SET NX PX + token-checked release/extend, lua/lock-*.lua). A crashed holder's lease
 * simply expires, so `kill -9` never leaves a job or the poller locked for longer than one lease.
 */
export class Locks {
  private readonly owner = randomBytes(6).toString("hex");
  private readonly keys: Keys;

  constructor(private readonly redis: Redis, prefix: string) {
    this.keys = new Keys(prefix);
  }

  key(name: string): string {
    return this.keys.lock(name);
  }

  async tryAcquire(name: string, ttlMs: number): Promise<Lease | undefined> {
    const key = this.key(name);
    const token = `${this.owner}:${randomBytes(6).toString("hex")}`;
    const ok = await this.redis.set(key, token, "PX", ttlMs, "NX");
    if (ok !== "OK") return undefined;
    let held = true;
    const timer = setInterval(() => {
      runScript(this.redis, "ceLockExtend", [key], [token, ttlMs])
        .then((r) => {
          if (Number(r) !== 1) held = false;
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
        held = false;
        await runScript(this.redis, "ceLockRelease", [key], [token]).catch(() => undefined);
      },
    };
  }
}
