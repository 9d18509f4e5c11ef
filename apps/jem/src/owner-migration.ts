import { migrateTokenOwners, redisTrouble, type SecretBox } from "@ce/store";
import type { JemContext } from "./context.js";

/**
 * Token owners written before their `sub` was escaped (@ce/model tokenOwner) are moved to the new
 * form once per JEM start (@ce/store migrate-owners.ts). Gateways of the old version that still
 * run meanwhile keep writing the old form for users whose `sub` has a `/`; the pass of a JEM
 * started after the last of them stopped moves those (docs/operations.md, "Upgrades"). In the
 * background: a CE with many jobs must not wait for it, and nothing depends on it but those users'
 * view of their own records.
 */
export async function migrateOwnersOnce(ctx: JemContext, box: SecretBox): Promise<void> {
  const issuers = ctx.config.auth.tokens.issuers.map((i) => i.issuer);
  try {
    const r = await migrateTokenOwners(ctx.redis, ctx.config.redis.prefix, box, issuers);
    for (const m of r.moved) ctx.log.info(m, "token owner moved to its escaped form");
    for (const a of r.ambiguous)
      ctx.log.warn(a, "token owner fits several configured issuers: its records stay as they are (the identity it reads as now sees them)");
    for (const f of r.failed) ctx.log.warn(f, "token owner could not be moved to its escaped form; the next JEM start tries again");
  } catch (e) {
    ctx.log.warn({ err: e, outage: redisTrouble(e) }, "token owner migration did not run to the end; the next JEM start runs it again");
  }
}
