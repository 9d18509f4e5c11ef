import type { CompiledConfig } from "@ce/config";
import type { Identity } from "../../context.js";

/**
 * Site access policy: `auth.deny` then `auth.allow` rules (`dn:<glob>`, `ca:<glob>`, `iss:<url>`,
 * `group:<wlcg group>`, `*`). Returns the reason for a refusal, or undefined when allowed.
 */
export function checkAccessPolicy(config: CompiledConfig, id: Identity): string | undefined {
  const { allow, deny } = config.auth;
  const hit = deny.find((r) => ruleMatches(r, id));
  if (hit) return `identity matches deny rule ${hit}`;
  if (allow.length === 0) return undefined;
  return allow.some((r) => ruleMatches(r, id)) ? undefined : `identity ${id.subject} matches no allow rule`;
}

export function ruleMatches(rule: string, id: Identity): boolean {
  if (rule === "*") return true;
  const i = rule.indexOf(":");
  const kind = rule.slice(0, i);
  const pattern = rule.slice(i + 1);
  switch (kind) {
    case "dn":
      return id.kind === "x509" && glob(pattern).test(id.subject);
    case "ca":
      return id.kind === "x509" && glob(pattern).test(id.issuer);
    case "iss":
      return id.kind === "token" && id.issuer === pattern;
    case "sub":
      return id.kind === "token" && glob(pattern).test(id.subject);
    case "group":
      return id.kind === "token" && (id.groups ?? []).includes(pattern);
    default:
      return false;
  }
}

function glob(p: string): RegExp {
  return new RegExp(`^${p.replace(/[.+^${}()|[\]\\]/g, "\\$&").replace(/\*/g, ".*").replace(/\?/g, ".")}$`);
}
