import type { Redis } from "ioredis";
import { Keys, ownerKey } from "./keys.js";
import { runScript } from "./scripts.js";

/** Outcome of a release attempt. `dirty`: an account is not clean yet (`reason` says why). */
export type ReleaseResult = { released: number } | { kept: "jobs" | "grace" } | { kept: "dirty"; reason: string };

/**
 * Makes a pool account clean for its next holder (no process, no crontab/at entry, no file in the
 * shared temporary directories, no batch job): undefined when it is, else the reason it is not.
 * Provided by the privileged JEM (apps/jem/src/contain/scrub.ts).
 */
export type AccountScrub = (account: string) => Promise<string | undefined>;

/**
 * Pool leases in Redis: one account per grid identity, never held by two identities at once
 * (across every pool), the same account back while the identity holds it. Released when the
 * identity has no job left but WIPED ones and its lease was not used within the grace time.
 */
export class PoolLeases {
  readonly keys: Keys;

  constructor(
    readonly redis: Redis,
    prefix: string,
  ) {
    this.keys = new Keys(prefix);
  }

  /** The identity's account in `pool`, or undefined when every account is held by others. */
  async lease(identity: string, pool: string, accounts: readonly string[], now = Date.now()): Promise<string | undefined> {
    const k = this.keys;
    const call = async (list: readonly string[]) =>
      (await runScript(this.redis, "cePoolLease", [k.mapLeases(), k.mapHeld(identity), k.mapTouched()], [identity, pool, now, ...list])) as
        string | null;
    // Most submissions come from identities that hold their account already: renew without
    // sending the whole pool (up to 10,000 names); the full call only for a new or moved lease.
    const held = await call([]);
    if (held && accounts.includes(held)) return held;
    if (accounts.length === 0) return undefined;
    return (await call(accounts)) ?? undefined;
  }

  /**
   * The account `lease` would give now, without taking or renewing anything (`ceadm explain`):
   * the identity's current account of the pool, else the first free one (or one it already holds
   * through another pool), else undefined. Read-only, so a concurrent lease may answer otherwise.
   */
  async peek(identity: string, pool: string, accounts: readonly string[]): Promise<string | undefined> {
    const k = this.keys;
    const cur = await this.redis.hget(k.mapHeld(identity), pool);
    if (cur && accounts.includes(cur) && (await this.redis.hget(k.mapLeases(), cur)) === identity) return cur;
    if (accounts.length === 0) return undefined;
    const holders = await this.redis.hmget(k.mapLeases(), ...accounts);
    const i = holders.findIndex((h) => h === null || h === identity);
    return i >= 0 ? accounts[i] : undefined;
  }

  /**
   * Releases the identity's leases when it has no job left but WIPED ones and the grace time has
   * passed. With `scrub`, each account it holds is first made clean (only once the release is due,
   * so a running job is never touched); one that cannot be keeps every lease of the identity.
   */
  async release(identity: string, graceMs: number, now = Date.now(), scrub?: AccountScrub): Promise<ReleaseResult> {
    const k = this.keys;
    const ok = ownerKey(identity);
    if (scrub) {
      const [[, jobs], [, wiped], [, touched], [, held]] = (await this.redis
        .multi()
        .zcard(k.owner(ok))
        .scard(k.ownerRest(ok, "WIPED"))
        .zscore(k.mapTouched(), identity)
        .hgetall(k.mapHeld(identity))
        .exec()) as [[unknown, number], [unknown, number], [unknown, string | null], [unknown, Record<string, string>]];
      if (jobs - wiped > 0) return { kept: "jobs" };
      if (touched !== null && now - Number(touched) < graceMs) return { kept: "grace" };
      for (const account of new Set(Object.values(held ?? {}))) {
        if ((await this.redis.hget(k.mapLeases(), account)) !== identity) continue;
        const reason = await scrub(account);
        if (reason) return { kept: "dirty", reason };
      }
    }
    // The script checks jobs and grace again, atomically: a submission since the check keeps the lease.
    const n = Number(
      await runScript(
        this.redis,
        "cePoolRelease",
        [k.mapLeases(), k.mapHeld(identity), k.mapTouched(), k.owner(ok), k.ownerRest(ok, "WIPED")],
        [identity, now, graceMs],
      ),
    );
    if (n === -1) return { kept: "jobs" };
    if (n === -2) return { kept: "grace" };
    return { released: n };
  }

  /** Who holds `account` (diagnostics, tests). */
  async holder(account: string): Promise<string | undefined> {
    return (await this.redis.hget(this.keys.mapLeases(), account)) ?? undefined;
  }

  /**
   * Releases the leases of identities last used before the grace time whose jobs are all gone:
   * the safety net for jobs removed on paths that do not call `release`, and for submissions
   * that leased but never committed. Pages through at most `max` identities per call (those that
   * still have jobs stay listed, so paging keeps them from hiding the rest).
   */
  async sweep(graceMs: number, now = Date.now(), max = 10_000, scrub?: AccountScrub): Promise<number> {
    const PAGE = 500;
    let released = 0;
    for (let offset = 0; offset < max;) {
      const due = await this.redis.zrangebyscore(this.keys.mapTouched(), 0, now - graceMs, "LIMIT", offset, PAGE);
      for (const identity of due) {
        const r = await this.release(identity, graceMs, now, scrub);
        if ("released" in r) released += r.released;
        else offset++; // still listed
      }
      if (due.length < PAGE) break;
    }
    return released;
  }
}
