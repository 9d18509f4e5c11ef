import type { Redis } from "ioredis";
import { Keys, ownerKey } from "./keys.js";
import { runScript } from "./scripts.js";

/** Outcome of a release attempt. */
export type ReleaseResult = { released: number } | { kept: "jobs" | "grace" };

/**
 * Pool leases in Redis: one account per grid identity, never held by two identities at once
 * (across every pool), the same account back while the identity holds it. Released when the
 * identity has no job left but WIPED ones and its lease was not used within the grace time.
 */
export class PoolLeases {
  readonly keys: Keys;

  constructor(readonly redis: Redis, prefix: string) {
    this.keys = new Keys(prefix);
  }

  /** The identity's account in `pool`, or undefined when every account is held by others. */
  async lease(identity: string, pool: string, accounts: readonly string[], now = Date.now()): Promise<string | undefined> {
    const k = this.keys;
    const call = async (list: readonly string[]) =>
      ((await runScript(this.redis, "cePoolLease", [k.mapLeases(), k.mapHeld(identity), k.mapTouched()], [identity, pool, now, ...list])) as string | null);
    // Most submissions come from identities that hold their account already: renew without
    // sending the whole pool (up to 10,000 names); the full call only for a new or moved lease.
    const held = await call([]);
    if (held && accounts.includes(held)) return held;
    if (accounts.length === 0) return undefined;
    return (await call(accounts)) ?? undefined;
  }

  async release(identity: string, graceMs: number, now = Date.now()): Promise<ReleaseResult> {
    const k = this.keys;
    const ok = ownerKey(identity);
    const n = Number(
      await runScript(this.redis, "cePoolRelease", [k.mapLeases(), k.mapHeld(identity), k.mapTouched(), k.owner(ok), k.ownerRest(ok, "WIPED")], [identity, now, graceMs]),
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
  async sweep(graceMs: number, now = Date.now(), max = 10_000): Promise<number> {
    const PAGE = 500;
    let released = 0;
    for (let offset = 0; offset < max; ) {
      const due = await this.redis.zrangebyscore(this.keys.mapTouched(), 0, now - graceMs, "LIMIT", offset, PAGE);
      for (const identity of due) {
        const r = await this.release(identity, graceMs, now);
        if ("released" in r) released += r.released;
        else offset++; // still listed
      }
      if (due.length < PAGE) break;
    }
    return released;
  }
}
