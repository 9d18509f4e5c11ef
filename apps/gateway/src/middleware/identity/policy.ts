import type { CompiledConfig } from "@ce/config";
import { accessDecision, ruleMatches } from "@ce/mapping";
import type { Identity } from "../../context.js";

// The rule matcher lives in @ce/mapping: the access policy and the identity mapping share it.

/**
 * Site access policy (the model is arc.conf `allowaccess`/`denyaccess` over authgroups).
 *
 * Rules, each `kind:pattern`: see @ce/mapping `rules.ts` (dn:, ca:, iss:, sub:, group:, scope:,
 * kind:, vo:, fqan:, `*`).
 *
 * Deny rules win over allow rules; an empty allow list admits every authenticated identity.
 * A rule that does not parse never matches (so a typo cannot open access); `invalidRules` lets the
 * boot code refuse such a configuration.
 */
export function checkAccessPolicy(config: CompiledConfig, id: Identity): string | undefined {
  // The decision is shared with `ceadm explain` (@ce/mapping admission.ts).
  const d = accessDecision(config, id);
  return d.ok ? undefined : d.reason;
}

/** True when some rule admits the identity (per-queue `allow` lists use this; empty = nobody). */
export function matchesAny(rules: readonly string[], id: Identity): boolean {
  return rules.some((r) => ruleMatches(r, id));
}
