import type { Redis } from "ioredis";
import { Keys } from "./keys.js";

/** Field of the flags hash the gateway checks before accepting new jobs ("1" = draining). */
export const DRAIN_FLAG = "drain";
/** When drain was switched on (ms); kept when it is switched on twice. */
export const DRAIN_SINCE = "drainSince";

export interface DrainStatus {
  draining: boolean;
  since?: number | undefined;
}

/** CE-wide flags (Keys.flags): set by operators (`ceadm`, admin API), read by every gateway. */
export class CeFlags {
  readonly keys: Keys;

  constructor(
    private readonly redis: Redis,
    prefix: string,
  ) {
    this.keys = new Keys(prefix);
  }

  async draining(): Promise<boolean> {
    return (await this.redis.hget(this.keys.flags(), DRAIN_FLAG)) === "1";
  }

  async drainStatus(): Promise<DrainStatus> {
    const [flag, since] = await this.redis.hmget(this.keys.flags(), DRAIN_FLAG, DRAIN_SINCE);
    return { draining: flag === "1", since: since ? Number(since) : undefined };
  }

  async setDrain(on: boolean, now = Date.now()): Promise<DrainStatus> {
    const key = this.keys.flags();
    // HSETNX keeps the original start time when drain is switched on twice.
    if (on) await this.redis.multi().hset(key, DRAIN_FLAG, "1").hsetnx(key, DRAIN_SINCE, String(now)).exec();
    else await this.redis.hdel(key, DRAIN_FLAG, DRAIN_SINCE);
    return this.drainStatus();
  }
}
