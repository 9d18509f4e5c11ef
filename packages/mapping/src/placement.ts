import type { CompiledConfig } from "@ce/config";
import { allMatch, type MatchIdentity } from "./rules.js";

/**
 * Placement of a job in Slurm by who submitted it (`lrms.slurm.placement`, docs/placement.md):
 * the VO's account and QOS make the batch system's fair share and limits work per VO, as
 * HTCondor-CE's accounting groups and A-REX's per-VO Slurm options do.
 */

export interface Placement {
  /** Index of the rule in lrms.slurm.placement (for logs and the batch file). */
  rule: number;
  account: string | null;
  qos: string | null;
  partition: string | null;
  directives: string[];
}

const groupPart = (fqan: string) => fqan.replace(/\/(Role|Capability)=.*$/i, "") || "/";

/**
 * What the rules can see of a job's submitter after the fact: its owner (DN, or `<iss>/<sub>` for
 * a token) and the FQANs / token groups recorded at submission, with groups and VOs derived from
 * them as the gateway does (identity/groups.ts). The issuer is not recorded: `ca:`/`iss:` rules are
 * not allowed in placement rules (the schema refuses them).
 */
export function jobIdentity(owner: string, fqans: readonly string[] | undefined): MatchIdentity {
  const f = [...(fqans ?? [])];
  const groups = [...new Set(f.map(groupPart))];
  const vos = [...new Set(groups.map((g) => g.split("/").filter(Boolean)[0]).filter((v): v is string => !!v))];
  return { subject: owner, kind: owner.startsWith("/") ? "x509" : "token", issuer: "", fqans: f, groups, vos };
}

export function placementFor(config: CompiledConfig, owner: string, fqans: readonly string[] | undefined): Placement | undefined {
  const rules = config.lrms.slurm.placement;
  if (rules.length === 0) return undefined;
  const id = jobIdentity(owner, fqans);
  const i = rules.findIndex((r) => allMatch(r.match, id));
  if (i < 0) return undefined;
  const r = rules[i]!;
  return { rule: i, account: r.account ?? null, qos: r.qos ?? null, partition: r.partition ?? null, directives: [...r.directives] };
}
