import { shortFqan } from "@ce/mapping";
import type { VomsAttributes } from "@ce/x509";

/**
 * One group vocabulary for both credentials. A VOMS proxy's FQANs and a token's `wlcg.groups`
 * both become:
 *   fqans  FQANs in short form, primary first: `/atlas/Role=production`, `/atlas/lcg1`
 *          (`/Role=NULL` and `/Capability=NULL` dropped, as ARC and VOMS print them);
 *          for tokens, the wlcg.groups entries themselves;
 *   groups the group part of each FQAN (`/atlas`, `/atlas/lcg1`), or the wlcg.groups;
 *   vos    the first component of each group (`atlas`).
 * Rules (`vo:`, `fqan:`, `group:`) in auth.allow/deny, per-queue allow and mapping match on these.
 */
export interface GroupFields {
  fqans: string[];
  groups: string[];
  vos: string[];
}

const groupPart = (fqan: string) => fqan.replace(/\/(Role|Capability)=.*$/i, "") || "/";
const voOf = (group: string) => group.split("/").filter(Boolean)[0];
const uniq = (xs: (string | undefined)[]) => [...new Set(xs.filter((x): x is string => !!x))];

export function vomsGroupFields(acs: readonly VomsAttributes[]): GroupFields {
  const fqans = uniq(acs.flatMap((a) => a.fqans.map(shortFqan)));
  // VOs only from the verified ACs (each FQAN lies within its AC's VO: voms-verify.ts).
  return { fqans, groups: uniq(fqans.map(groupPart)), vos: uniq(acs.map((a) => a.vo)) };
}

export function tokenGroupFields(wlcgGroups: readonly string[]): GroupFields {
  const groups = uniq([...wlcgGroups]);
  return { fqans: groups, groups, vos: uniq(groups.map(voOf)) };
}
