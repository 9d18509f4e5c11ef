import { accessSync, constants } from "node:fs";
import type { CompiledConfig } from "@ce/config";
import { invalidRules } from "@ce/mapping";

/**
 * Authentication settings that would fail only at request time, found at boot instead: access
 * rules that do not parse (they would silently never match), token issuers or key URLs that are
 * not HTTPS (keys must come over verified HTTPS), unreadable issuer CA files.
 * Returns one line per problem; the caller refuses to start when any is returned.
 */
export function authConfigProblems(config: CompiledConfig): string[] {
  const out: string[] = [];
  const rules = (where: string, list: readonly string[]) => {
    for (const r of invalidRules(list)) out.push(`${where}: rule ${JSON.stringify(r)} does not parse`);
  };
  rules("auth.allow", config.auth.allow);
  rules("auth.deny", config.auth.deny);
  for (const q of config.jobs.queues) rules(`jobs.queues[${q.name}].allow`, q.allow);
  const t = config.auth.tokens;
  if (!t.enabled) return out;
  t.issuers.forEach((i, n) => {
    const at = `auth.tokens.issuers[${n}]`;
    if (!i.issuer.startsWith("https://")) out.push(`${at}.issuer: ${i.issuer} is not an https:// URL`);
    if (i.jwksUri && !i.jwksUri.startsWith("https://")) out.push(`${at}.jwksUri: ${i.jwksUri} is not an https:// URL`);
    if (i.caFile) {
      try {
        accessSync(i.caFile, constants.R_OK);
      } catch {
        out.push(`${at}.caFile: ${i.caFile} is not readable`);
      }
    }
  });
  if (new Set(t.issuers.map((i) => i.issuer)).size !== t.issuers.length) out.push("auth.tokens.issuers: an issuer is listed twice");
  if (t.algorithms.length === 0) out.push("auth.tokens.algorithms: no algorithm allowed");
  return out;
}
