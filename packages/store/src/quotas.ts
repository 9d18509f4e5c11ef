import type { Redis } from "ioredis";
import { Keys, ownerKey } from "./keys.js";
import { runScript } from "./scripts.js";

/**
 * Per-file upload bookkeeping and per-owner quotas. Every check-and-count is one Lua script, so
 * all gateways share the same numbers and two concurrent requests cannot both take the last unit.
 * Each script does bounded work (no loop over anything a client can grow without limit).
 */

export type RangeResult = "complete" | "recorded" | "too-many-ranges" | "too-many-files";

export interface RangeLimits {
  /** Disjoint ranges kept per file. */
  maxRanges: number;
  /** Files of one job with partial-upload bookkeeping. */
  maxFiles: number;
  /** How long bookkeeping survives without activity. */
  ttlMs: number;
}

/** Received byte ranges of partially uploaded session files, one hash per job. */
export class UploadRanges {
  readonly keys: Keys;

  constructor(
    private readonly redis: Redis,
    prefix: string,
    private readonly limits: RangeLimits,
  ) {
    this.keys = new Keys(prefix);
  }

  /** Merges [start, end) of `path` (file length `total`); "complete" when [0,total) is covered. */
  async add(jobId: string, path: string, start: number, end: number, total: number): Promise<RangeResult> {
    const { maxRanges, maxFiles, ttlMs } = this.limits;
    const r = Number(
      await runScript(this.redis, "ceUploadRange", [this.keys.uploads(jobId)], [path, start, end, total, ttlMs, maxRanges, maxFiles]),
    );
    return r === 1 ? "complete" : r === 0 ? "recorded" : r === -1 ? "too-many-ranges" : "too-many-files";
  }

  /** The stored ranges of `path` as [start, end) pairs (tests, diagnostics). */
  async ranges(jobId: string, path: string): Promise<{ total: number; ranges: [number, number][] } | undefined> {
    const raw = await this.redis.hget(this.keys.uploads(jobId), path);
    const m = raw ? /^(\d+)\|([\d,]*)$/.exec(raw) : null;
    if (!m) return undefined;
    const nums = m[2] ? m[2].split(",").map(Number) : [];
    const ranges: [number, number][] = [];
    for (let i = 0; i + 1 < nums.length; i += 2) ranges.push([nums[i]!, nums[i + 1]!]);
    return { total: Number(m[1]), ranges };
  }

  async clear(jobId: string, path: string): Promise<void> {
    await this.redis.hdel(this.keys.uploads(jobId), path);
  }

  /** Forgets bookkeeping below a deleted path (the whole job for "/"); bounded by `maxFiles`. */
  async forget(jobId: string, path: string): Promise<void> {
    const key = this.keys.uploads(jobId);
    if (path === "/") {
      await this.redis.del(key);
      return;
    }
    const gone = (await this.redis.hkeys(key)).filter((f) => f === path || f.startsWith(`${path}/`));
    if (gone.length) await this.redis.hdel(key, ...gone);
  }
}

/** Which quota refused, and its limit and current use. */
export interface QuotaRefusal {
  quota: "sessionBytesPerJob" | "sessionBytesPerOwner";
  limit: number;
  used: number;
}

/** Uploaded session bytes per job and per owner. */
export class SessionBytes {
  readonly keys: Keys;

  constructor(
    private readonly redis: Redis,
    prefix: string,
    private readonly limits: { perJob: number; perOwner: number },
  ) {
    this.keys = new Keys(prefix);
  }

  /** Reserves `bytes` more for the job, or says which quota refuses them (nothing counted then). */
  async reserve(owner: string, jobId: string, bytes: number): Promise<QuotaRefusal | undefined> {
    if (bytes <= 0) return undefined;
    const [ok, job, total] = await this.apply(owner, jobId, bytes);
    if (ok === -1) return { quota: "sessionBytesPerJob", limit: this.limits.perJob, used: job };
    if (ok === -2) return { quota: "sessionBytesPerOwner", limit: this.limits.perOwner, used: total };
    return undefined;
  }

  /** Gives back bytes (a file shrank, was deleted, or a reservation was not used). */
  async release(owner: string, jobId: string, bytes: number): Promise<void> {
    if (bytes > 0) await this.apply(owner, jobId, -bytes);
  }

  async usage(owner: string, jobId: string): Promise<{ job: number; owner: number }> {
    const [job, total] = await this.redis.hmget(this.keys.ownerSessionBytes(ownerKey(owner)), jobId, "*");
    return { job: Number(job ?? 0), owner: Number(total ?? 0) };
  }

  private async apply(owner: string, jobId: string, delta: number): Promise<[number, number, number]> {
    const res = (await runScript(
      this.redis,
      "ceSessionBytes",
      [this.keys.ownerSessionBytes(ownerKey(owner))],
      [jobId, delta, this.limits.perJob, this.limits.perOwner],
    )) as number[];
    return [Number(res[0]), Number(res[1]), Number(res[2])];
  }
}

/**
 * A per-owner count of events in the current minute (fixed window). Returns the seconds until the
 * window ends when the limit is already reached, else undefined (and the event is counted).
 */
export async function takeFromMinuteWindow(
  redis: Redis,
  prefix: string,
  owner: string,
  limit: number,
  now = Date.now(),
): Promise<number | undefined> {
  const minute = Math.floor(now / 60_000);
  const key = new Keys(prefix).ownerRenewals(ownerKey(owner), minute);
  const n = Number(await runScript(redis, "ceWindow", [key], [limit, 120_000]));
  return n < 0 ? Math.max(1, Math.ceil(((minute + 1) * 60_000 - now) / 1000)) : undefined;
}
