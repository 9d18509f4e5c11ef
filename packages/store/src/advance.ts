import type { Redis } from "ioredis";
import { Keys } from "./keys.js";
import { runScript } from "./scripts.js";

/**
 * The JEM's work list: which jobs need a look, and when. One sorted set member per job (id →
 * due time) instead of one queue message per job per step, so a burst of 100,000 submissions is
 * 200 Redis calls, repeated rings collapse, and a job that only waits (for an upload, a slot, its
 * deadline) costs one member and no work until its event or its time comes.
 *
 * - Producers (gateway: submission, upload, kill/clean/restart; JEM: batch completion, staging done,
 *   timers) call `ring`: due now, or at a time; an earlier due time always wins.
 * - JEMs `claim` due jobs in batches into the in-flight set with a lease, `extend` the leases of
 *   what they still run, and `release` what they finished. A JEM that dies leaves its leases to
 *   expire; the next claim (any JEM) makes those jobs due again. Nothing scans waiting jobs.
 * - The bell (pub/sub) only wakes idle JEMs early; the sets are the truth, so a lost bell costs
 *   at most the idle poll interval.
 */
export class AdvanceSet {
  readonly keys: Keys;

  constructor(
    private readonly redis: Redis,
    prefix: string,
  ) {
    this.keys = new Keys(prefix);
  }

  /** Jobs due at `at` (default now) unless already due earlier. One round trip for any number. */
  async ring(ids: readonly string[], at = Date.now()): Promise<void> {
    if (ids.length === 0) return;
    for (let i = 0; i < ids.length; i += 10_000) {
      const chunk = ids.slice(i, i + 10_000);
      await runScript(
        this.redis,
        "ceAdvanceRing",
        [this.keys.advanceDue(), this.keys.advanceBell()],
        [Math.ceil(at), Date.now(), ...chunk],
      );
    }
  }

  /** Up to `max` due jobs, now leased to the caller until `now + leaseMs`. */
  async claim(max: number, leaseMs: number, now = Date.now()): Promise<string[]> {
    if (max <= 0) return [];
    return (await runScript(
      this.redis,
      "ceAdvanceClaim",
      [this.keys.advanceDue(), this.keys.advanceInflight()],
      [now, now + leaseMs, max],
    )) as string[];
  }

  /**
   * One turn of a JEM's loop in one round trip: releases `done` (looks that ended), claims up to
   * `max` due jobs, and tells when the earliest job is due and the earliest lease ends (ms).
   */
  async turn(
    done: readonly string[],
    max: number,
    leaseMs: number,
    now = Date.now(),
  ): Promise<{ ids: string[]; nextDueAt?: number; nextLeaseEnd?: number }> {
    const [ids, due, held] = (await runScript(
      this.redis,
      "ceAdvanceClaim",
      [this.keys.advanceDue(), this.keys.advanceInflight()],
      [now, now + leaseMs, Math.max(0, max), "turn", ...done],
    )) as [string[], string | null, string | null];
    return { ids, ...(due !== null ? { nextDueAt: Number(due) } : {}), ...(held !== null ? { nextLeaseEnd: Number(held) } : {}) };
  }

  /** Pushes the leases of jobs still being worked on (only those still held: XX). */
  async extend(ids: readonly string[], leaseMs: number): Promise<void> {
    if (ids.length === 0) return;
    const until = Date.now() + leaseMs;
    await this.redis.zadd(this.keys.advanceInflight(), "XX", ...ids.flatMap((id) => [until, id]));
  }

  /** Ends the leases of finished looks (a job rung meanwhile is still due and is claimed again). */
  async release(ids: readonly string[]): Promise<void> {
    if (ids.length === 0) return;
    await this.redis.zrem(this.keys.advanceInflight(), ...ids);
  }

  /** When the earliest job is due (ms), or undefined when nothing is. */
  async nextDueAt(): Promise<number | undefined> {
    const r = await this.redis.zrange(this.keys.advanceDue(), 0, 0, "WITHSCORES");
    return r.length === 2 ? Number(r[1]) : undefined;
  }

  /** Earliest lease end in flight (ms): when lost work could next become due. */
  async nextLeaseEnd(): Promise<number | undefined> {
    const r = await this.redis.zrange(this.keys.advanceInflight(), 0, 0, "WITHSCORES");
    return r.length === 2 ? Number(r[1]) : undefined;
  }

  /** For operators and metrics: due now, waiting on a timer, in flight. */
  async counts(now = Date.now()): Promise<{ due: number; timers: number; inflight: number }> {
    const [due, all, inflight] = await Promise.all([
      this.redis.zcount(this.keys.advanceDue(), "-inf", now),
      this.redis.zcard(this.keys.advanceDue()),
      this.redis.zcard(this.keys.advanceInflight()),
    ]);
    return { due, timers: all - due, inflight };
  }

  /**
   * A page of the work list for operators (the admin page): `due` = due now, soonest first;
   * `timers` = due later, soonest first; `inflight` = leased to a JEM, the lease ending first
   * first. Each with its time (ms): due time, or lease end.
   */
  async page(kind: "due" | "timers" | "inflight", start: number, count: number, now = Date.now()): Promise<{ id: string; at: number }[]> {
    const r =
      kind === "inflight"
        ? await this.redis.zrange(this.keys.advanceInflight(), start, start + count - 1, "WITHSCORES")
        : kind === "due"
          ? await this.redis.zrangebyscore(this.keys.advanceDue(), "-inf", now, "WITHSCORES", "LIMIT", start, count)
          : await this.redis.zrangebyscore(this.keys.advanceDue(), `(${now}`, "+inf", "WITHSCORES", "LIMIT", start, count);
    const out: { id: string; at: number }[] = [];
    for (let i = 0; i + 1 < r.length; i += 2) out.push({ id: r[i]!, at: Number(r[i + 1]) });
    return out;
  }

  /** Whether a job is due or in flight (tests, ceadm). */
  async scoreOf(id: string): Promise<{ due?: number; inflight?: number }> {
    const [d, f] = await Promise.all([this.redis.zscore(this.keys.advanceDue(), id), this.redis.zscore(this.keys.advanceInflight(), id)]);
    return { ...(d !== null ? { due: Number(d) } : {}), ...(f !== null ? { inflight: Number(f) } : {}) };
  }
}
