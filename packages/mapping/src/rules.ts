/**
 * The one rule matcher of the CE: site access (auth.allow/deny), queue `allow` lists and the
 * identity mapping all use it. Rules are `kind:pattern` (globs use `*` and `?`, everything else
 * is literal):
 *   `*`                    every authenticated identity
 *   `dn:<glob>`            X.509 end-entity subject (`/DC=org/DC=example/CN=Jane Doe`)
 *   `ca:<glob>`            X.509: DN of the CA that issued the end-entity certificate
 *   `iss:<url>`            token issuer, exact
 *   `sub:<glob>`           token identity `<iss>/<sub>` (sub is unique only per issuer)
 *   `group:<group>`        token `wlcg.groups` entry, exact (WLCG groups are not hierarchical)
 *   `scope:<scope>`        token carries this scope, exact
 *   `kind:x509|token`      how the caller authenticated
 *   `vo:<name>`            VOMS: the identity carries an attribute of this VO, exact
 *   `fqan:<glob>`          VOMS: some FQAN (`/atlas/Role=production/Capability=NULL`) matches
 * A rule that does not parse never matches (so a typo cannot open access); `invalidRules` lets
 * the boot code refuse such a configuration.
 */

/** What a rule can look at; the gateway's Identity is structurally one of these. */
export interface MatchIdentity {
  /** DN, or `<iss>/<sub>` for tokens. */
  subject: string;
  kind: "x509" | "token";
  /** Issuer CA DN (x509) or token issuer URL. */
  issuer: string;
  scopes?: ReadonlySet<string> | undefined;
  groups?: readonly string[] | undefined;
  /** VOMS VOs and FQANs, once another component verifies them. */
  vos?: readonly string[] | undefined;
  fqans?: readonly string[] | undefined;
}

type Rule = (id: MatchIdentity) => boolean;

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
  vo: (p) => (id) => (id.vos ?? []).includes(p),
  fqan: (p) => {
    const g = glob(p);
    return (id) => (id.fqans ?? []).some((f) => g.test(f));
  },
};

const compiled = new Map<string, Rule | undefined>();

function compile(rule: string): Rule | undefined {
  if (compiled.has(rule)) return compiled.get(rule);
  let r: Rule | undefined;
  if (rule === "*") r = () => true;
  else {
    const i = rule.indexOf(":");
    const make = i > 0 && Object.hasOwn(KINDS, rule.slice(0, i)) ? KINDS[rule.slice(0, i)] : undefined;
    const pattern = rule.slice(i + 1);
    r = make && pattern !== "" ? make(pattern) : undefined;
  }
  if (compiled.size > 10_000) compiled.clear(); // rules come from configuration; bound it anyway
  compiled.set(rule, r);
  return r;
}

export function ruleMatches(rule: string, id: MatchIdentity): boolean {
  return compile(rule)?.(id) ?? false;
}

/** Every condition holds (a mapping rule's `match` list). */
export function allMatch(rules: readonly string[], id: MatchIdentity): boolean {
  return rules.length > 0 && rules.every((r) => ruleMatches(r, id));
}

/** Rules that do not parse (for boot-time validation). */
export function invalidRules(rules: readonly string[]): string[] {
  return rules.filter((r) => compile(r) === undefined);
}

function glob(p: string): RegExp {
  return new RegExp(`^${p.replace(/[.+^${}()|[\]\\]/g, "\\$&").replace(/\*/g, ".*").replace(/\?/g, ".")}$`, "s");
}
