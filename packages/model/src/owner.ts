/**
 * The owner of a token's jobs, delegations and pool leases: `<iss>/<sub>`, with the `sub` escaped
 * (`%` → `%25`, `/` → `%2F`) so the last `/` always separates the two. Unescaped, `https://a.example`
 * + `r/x` and `https://a.example/r` + `x` were one owner: two users of two issuers shared jobs,
 * delegations and accounts. A `sub` without `/` or `%` (the usual UUID, number or e-mail address)
 * reads as before, so only the records of such subjects needed a migration (@ce/store
 * migrate-owners.ts). An X.509 owner is a DN, which starts with `/`; an issuer is an https URL, so
 * the two kinds never meet.
 */
export function tokenOwner(iss: string, sub: string): string {
  return `${iss}/${sub.replace(/%/g, "%25").replace(/\//g, "%2F")}`;
}

/** Issuer and subject of a token owner (`tokenOwner` reversed); undefined for a DN or a malformed owner. */
export function parseTokenOwner(owner: string): { iss: string; sub: string } | undefined {
  if (owner.startsWith("/")) return undefined;
  const slash = owner.lastIndexOf("/");
  if (slash <= 0) return undefined;
  const rest = owner.slice(slash + 1);
  if (/%(?!25|2F)/i.test(rest)) return undefined;
  return { iss: owner.slice(0, slash), sub: rest.replace(/%2F/gi, "/").replace(/%25/gi, "%") };
}

/**
 * What an owner written before the escaping (`<iss>/<sub>` as they came) becomes, given the issuers
 * this CE accepts. For an issuer that starts the owner, the rest is its `sub` in the old form; the
 * new form never has a `/` in it, so at most one issuer leaves a rest without `/`, and an owner
 * that has one is already valid (a `sub` without `/` reads the same in both forms; one with `%`
 * is taken as escaped). Then:
 *  - `same`: one issuer fits and the owner is valid as it is: nothing to do;
 *  - `to`: one issuer fits and the rest has a `/`: the escaped owner;
 *  - `ambiguous`: several issuers fit (`https://a.example/r/x` of `https://a.example` + `r/x`, or
 *    of `https://a.example/r` + `x`): the collision itself, the record could be either user's;
 *  - `unknown`: no configured issuer starts it (an issuer since removed).
 */
export type LegacyOwner = { kind: "same" } | { kind: "to"; owner: string } | { kind: "ambiguous"; issuers: string[] } | { kind: "unknown" };

export function legacyTokenOwner(owner: string, issuers: readonly string[]): LegacyOwner {
  if (owner.startsWith("/")) return { kind: "same" };
  const fits = [...new Set(issuers)].filter((iss) => owner.startsWith(`${iss}/`));
  if (fits.length === 0) return { kind: "unknown" };
  if (fits.length > 1) return { kind: "ambiguous", issuers: fits };
  const iss = fits[0]!;
  const rest = owner.slice(iss.length + 1);
  return rest.includes("/") ? { kind: "to", owner: tokenOwner(iss, rest) } : { kind: "same" };
}
