import type { CompiledConfig } from "@ce/config";
import type { Identity } from "../../context.js";

/**
 * Site access policy (the model is arc.conf `allowaccess`/`denyaccess` over authgroups).
 *
 * Rules, each `kind:pattern` (globs use `*` and `?`, everything else is literal):
 *   `*`                    every authenticated identity
 *   `dn:<glob>`            X.509 end-entity subject (`/DC=org/DC=example/CN=Jane Doe`)
 *   `ca:<glob>`            X.509: DN of the CA that issued the end-entity certificate
 *   `iss:<url>`            token issuer, exact
 *   `sub:<glob>`           token identity `<iss>/<sub>`
 *   `group:<group>`        token `wlcg.groups` entry, exact (WLCG groups are not hierarchical)
 *   `scope:<scope>`        token carries this scope, exact
 *   `kind:x509|token`      how the caller authenticated
 *
 * Deny rules win over allow rules; an empty allow list admits every authenticated identity.
 * A rule that does not parse never matches (so a typo cannot open access); `invalidRules` lets the
 * boot code refuse such a configuration.
 */
export function checkAccessPolicy(config: CompiledConfig, id: Identity): string | undefined {
  const { allow, deny } = config.auth;
  const hit = deny.find((r) => ruleMatches(r, id));
  if (hit) return `identity ${id.subject} matches deny rule ${hit}`;
  if (allow.length === 0) return undefined;
  return matchesAny(allow, id) ? undefined : `identity ${id.subject} matches no allow rule`;
}

/** True when some rule admits the identity (per-queue `allow` lists use this; empty = nobody). */
export function matchesAny(rules: readonly string[], id: Identity): boolean {
  return rules.some((r) => ruleMatches(r, id));
}

type Rule = (id: Identity) => boolean;

const KINDS: Record<string, (pattern: string) => Rule | undefined> = {
  dn: (p) => {
    const g = glob(p);
    return (id) => id.kind === "x509" && g.test(id.subject);
  },
  ca: (p) => {
    const g = glob(p);
    return (id) => id.kind === "x509" && g.test(id.issuer);
  },
  iss: (p) => (id) => id.kind === "token" && id.issuer === p,
  sub: (p) => {
    const g = glob(p);
    return (id) => id.kind === "token" && g.test(id.subject);
  },
  group: (p) => (id) => id.kind === "token" && (id.groups ?? []).includes(p),
  scope: (p) => (id) => id.kind === "token" && (id.scopes?.has(p) ?? false),
  kind: (p) => (p === "x509" || p === "token" ? (id) => id.kind === p : undefined),
};

const compiled = new Map<string, Rule | undefined>();

function compile(rule: string): Rule | undefined {
  if (compiled.has(rule)) return compiled.get(rule);
  let r: Rule | undefined;
  if (rule === "*") r = () => true;
  else {
    const i = rule.indexOf(":");
    const make = i > 0 ? KINDS[rule.slice(0, i)] : undefined;
    const pattern = rule.slice(i + 1);
    r = make && pattern !== "" ? make(pattern) : undefined;
  }
  if (compiled.size > 10_000) compiled.clear(); // rules come from configuration; bound it anyway
  compiled.set(rule, r);
  return r;
}

export function ruleMatches(rule: string, id: Identity): boolean {
  return compile(rule)?.(id) ?? false;
}

/** Rules that do not parse (for boot-time validation of auth.allow/deny and queue allow lists). */
export function invalidRules(rules: readonly string[]): string[] {
  return rules.filter((r) => compile(r) === undefined);
}

function glob(p: string): RegExp {
  return new RegExp(`^${p.replace(/[.+^${}()|[\]\\]/g, "\\$&").replace(/\*/g, ".*").replace(/\?/g, ".")}$`, "s");
}
