import { migrateTokenOwners, redisTrouble, type SecretBox } from "@ce/store";
import type { JemContext } from "./context.js";

/**
 * Token owners written before their `sub` was escaped (@ce/model tokenOwner) are moved to the new
 * form at JEM start and then every OWNER_PASS_MS (@ce/store migrate-owners.ts). Gateways of the
 * old version that still run meanwhile keep writing the old form for users whose `sub` has a `/`;
 * the first pass after the last of them stopped moves those (docs/operations.md, "Upgrades"). In
 * the background: a CE with many jobs must not wait for it, and nothing depends on it but those
 * users' view of their own records. A pass reads each job's owner in pipelined pages, so once an
 * hour is a small share of a JEM's time even with a million jobs; owners it must leave alone are
 * reported by the first pass only, not every hour.
 */
export const OWNER_PASS_MS = 60 * 60_000;

export async function migrateOwnersOnce(ctx: JemContext, box: SecretBox, first: boolean): Promise<void> {
  const issuers = ctx.config.auth.tokens.issuers.map((i) => i.issuer);
  try {
    const r = await migrateTokenOwners(ctx.redis, ctx.config.redis.prefix, box, issuers);
    for (const m of r.moved) ctx.log.info(m, "token owner moved to its escaped form");
    for (const a of first ? r.ambiguous : [])
      ctx.log.warn(a, "token owner fits several configured issuers: its records stay as they are (the identity it reads as now sees them)");
    for (const f of r.failed) ctx.log.warn(f, "token owner could not be moved to its escaped form; the next pass tries again");
  } catch (e) {
    ctx.log.warn({ err: e, outage: redisTrouble(e) }, "token owner migration did not run to the end; the next pass runs it again");
  }
}
