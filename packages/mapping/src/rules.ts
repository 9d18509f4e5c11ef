/**
 * The one rule matcher of the CE: site access (auth.allow/deny), queue `allow` lists and the
 * identity mapping all use it. Rules are `kind:pattern` (globs use `*` and `?`, everything else
 * is literal):
 *   `*`                    every authenticated identity
 *   `dn:<glob>`            X.509 end-entity subject (`/DC=org/DC=example/CN=Jane Doe`)
 *   `ca:<glob>`            X.509: DN of the CA that issued the end-entity certificate
 *   `iss:<url>`            token issuer, exact
 *   `sub:<glob>`           token identity `<iss>/<sub>` (sub is unique only per issuer; `%` and `/` in it written `%25`, `%2F`)
 *   `group:<group>`        a group, exact: a token `wlcg.groups` entry or the group part of a VOMS
 *                          FQAN (`/atlas/lcg1`); groups are not hierarchical
 *   `scope:<scope>`        token carries this scope, exact
 *   `kind:x509|token`      how the caller authenticated
 *   `vo:<name>`            the identity carries a VOMS attribute or a token group of this VO, exact
 *   `fqan:<glob>`          some FQAN matches, in its short form (`/atlas/Role=production`,
 *                          `/atlas/lcg1`) or its long form (`…/Role=NULL/Capability=NULL`);
 *                          a token's wlcg.groups entries count as FQANs
 * One vocabulary for both credentials: the gateway fills groups/fqans/vos from VOMS ACs and from
 * token wlcg.groups alike (identity/groups.ts).
 * A rule that does not parse never matches (so a typo cannot open access); `invalidRules` lets
 * the boot code refuse such a configuration.
 */

/** What a rule can look at; the gateway's Identity extends it. */
export interface MatchIdentity {
  /** Owner string: end-entity DN (`/DC=org/.../CN=Jane`), or `<iss>/<sub>` for tokens. */
  subject: string;
  kind: "x509" | "token";
  /** Issuer CA DN (x509) or token issuer URL. */
  issuer: string;
  /** Token scopes (`compute.read` ...); undefined for x509 callers, who are not scope-limited. */
  scopes?: ReadonlySet<string> | undefined;
  /** Groups: token wlcg.groups, or the group part of each verified VOMS FQAN. */
  groups?: readonly string[] | undefined;
  /** VO names of the verified VOMS ACs, or of the token's groups. */
  vos?: readonly string[] | undefined;
  /** FQANs in short form, primary first (VOMS), or the token's wlcg.groups. */
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
  group: (p) => (id) => (id.groups ?? []).includes(p),
  scope: (p) => (id) => id.kind === "token" && (id.scopes?.has(p) ?? false),
  kind: (p) => (p === "x509" || p === "token" ? (id) => id.kind === p : undefined),
  vo: (p) => (id) => (id.vos ?? []).includes(p),
  fqan: (p) => {
    const g = glob(p);
    return (id) => (id.fqans ?? []).some((f) => fqanForms(f).some((x) => g.test(x)));
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

/** `/atlas/lcg1/Role=NULL/Capability=NULL` → `/atlas/lcg1` (how ARC and voms-proxy-info print FQANs). */
export function shortFqan(fqan: string): string {
  return fqan.replace(/\/Capability=NULL$/i, "").replace(/\/Role=NULL$/i, "");
}

/** The short and the long (VOMS wire) forms of an FQAN, for matching either. */
export function fqanForms(fqan: string): string[] {
  const short = shortFqan(fqan);
  if (!short.startsWith("/")) return [fqan];
  const withRole = /\/Role=/i.test(short) ? short : `${short}/Role=NULL`;
  const long = /\/Capability=/i.test(withRole) ? withRole : `${withRole}/Capability=NULL`;
  return [...new Set([fqan, short, long])];
}

function glob(p: string): RegExp {
  return new RegExp(
    `^${p
      .replace(/[.+^${}()|[\]\\]/g, "\\$&")
      .replace(/\*/g, ".*")
      .replace(/\?/g, ".")}$`,
    "s",
  );
}
