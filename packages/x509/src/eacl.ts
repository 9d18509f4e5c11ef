import { Failure } from "@ce/model";
/**
 * IGTF namespace policies (EACL): which subjects a trusted CA may vouch for. Two file formats sit
 * next to each CA in an X509_CERT_DIR, named by the CA's subject hash:
 *
 *   <hash>.namespaces       TO Issuer "/C=XX/O=Grid/CN=Grid CA" PERMIT Subject "/C=XX/O=Grid/.*"
 *   <hash>.signing_policy   access_id_CA X509 '/C=XX/O=Grid/CN=Grid CA'
 *                           pos_rights globus CA:sign
 *                           cond_subjects globus '"/C=XX/O=Grid/*" "/C=YY/*"'
 *
 * `.namespaces` patterns are POSIX extended regular expressions matched against the whole DN;
 * `.signing_policy` patterns are globs (`*`, `?`). Both compare case-insensitively, as the grid
 * tools do (DN attribute values are case-insensitive strings). A subject is allowed when it
 * matches a PERMIT and no DENY of the rules for its issuer. Parsing only: no I/O here.
 */

export interface EaclRule {
  /** Issuer DN (one-line form) the rule applies to; "SELF" rules apply to the file's own CA. */
  issuer: string;
  permit: boolean;
  pattern: RegExp;
  /** The pattern as written, for messages. */
  source: string;
}

export interface Eacl {
  format: "namespaces" | "signing_policy";
  rules: EaclRule[];
}

export class EaclParseError extends Failure<"EACL_PARSE"> {
  constructor(message: string) {
    super("EACL_PARSE", message);
  }
}

/** Tokens: bare words and quoted strings ('…' or "…"), comments (#…) and line continuations dropped. */
function tokenize(text: string): { value: string; quoted: boolean }[] {
  const src = text.replace(/\\\r?\n/g, " ");
  const out: { value: string; quoted: boolean }[] = [];
  let i = 0;
  while (i < src.length) {
    const ch = src[i]!;
    if (ch === "#") {
      while (i < src.length && src[i] !== "\n") i++;
    } else if (/\s/.test(ch)) {
      i++;
    } else if (ch === '"' || ch === "'") {
      const end = src.indexOf(ch, i + 1);
      if (end < 0) throw new EaclParseError(`unterminated ${ch} string`);
      out.push({ value: src.slice(i + 1, end), quoted: true });
      i = end + 1;
    } else {
      let j = i;
      while (j < src.length && !/[\s"'#]/.test(src[j]!)) j++;
      out.push({ value: src.slice(i, j), quoted: false });
      i = j;
    }
  }
  return out;
}

/** POSIX ERE → anchored, case-insensitive JS RegExp (the subset IGTF files use is common to both). */
function ereToRegExp(re: string): RegExp {
  try {
    return new RegExp(`^(?:${re})$`, "i");
  } catch (e) {
    throw new EaclParseError(`bad regular expression ${JSON.stringify(re)}: ${(e as Error).message}`);
  }
}

/** Glob (`*` any run, `?` one character) → anchored, case-insensitive RegExp. */
function globToRegExp(glob: string): RegExp {
  const body = glob
    .replace(/[.+^${}()|[\]\\]/g, "\\$&")
    .replace(/\*/g, ".*")
    .replace(/\?/g, ".");
  return new RegExp(`^${body}$`, "i");
}

export function parseNamespaces(text: string): Eacl {
  const toks = tokenize(text);
  const rules: EaclRule[] = [];
  let i = 0;
  const word = (w: string) => {
    const t = toks[i++];
    if (!t || t.quoted || t.value.toUpperCase() !== w) throw new EaclParseError(`expected ${w} near token ${i}`);
  };
  while (i < toks.length) {
    word("TO");
    word("ISSUER");
    const iss = toks[i++];
    if (!iss || (!iss.quoted && iss.value.toUpperCase() !== "SELF")) throw new EaclParseError("TO Issuer needs a quoted DN or SELF");
    const issuer = iss.quoted ? iss.value : "SELF";
    let n = 0;
    while (i < toks.length && !toks[i]!.quoted && /^(PERMIT|DENY)$/i.test(toks[i]!.value)) {
      const permit = toks[i++]!.value.toUpperCase() === "PERMIT";
      word("SUBJECT");
      const pat = toks[i++];
      if (!pat?.quoted) throw new EaclParseError("Subject needs a quoted pattern");
      rules.push({ issuer, permit, pattern: ereToRegExp(pat.value), source: pat.value });
      n++;
    }
    if (n === 0) throw new EaclParseError(`TO Issuer ${JSON.stringify(issuer)} has no PERMIT or DENY`);
  }
  return { format: "namespaces", rules };
}

export function parseSigningPolicy(text: string): Eacl {
  const toks = tokenize(text);
  const rules: EaclRule[] = [];
  let issuer: string | undefined;
  let canSign = false;
  for (let i = 0; i < toks.length;) {
    const key = toks[i++]!.value.toLowerCase();
    const kind = toks[i++]; // X509 / globus
    const value = toks[i++];
    if (!kind || !value) throw new EaclParseError(`incomplete ${key} entry`);
    if (key === "access_id_ca") {
      issuer = value.value;
      canSign = false;
    } else if (key === "pos_rights") {
      canSign ||= /(^|\s)CA:sign(\s|$)/i.test(value.value);
    } else if (key === "cond_subjects") {
      if (!issuer) throw new EaclParseError("cond_subjects before access_id_CA");
      if (!canSign) continue; // no CA:sign right: the conditions grant nothing
      const pats = [...value.value.matchAll(/"([^"]*)"/g)].map((m) => m[1]!);
      const list = pats.length ? pats : value.value.split(/\s+/).filter(Boolean);
      for (const p of list) rules.push({ issuer, permit: true, pattern: globToRegExp(p), source: p });
    } else {
      throw new EaclParseError(`unknown entry ${key}`);
    }
  }
  return { format: "signing_policy", rules };
}

/**
 * Whether `issuerDn` may have issued a certificate for `subjectDn` under this policy; the refusal
 * reason otherwise. `selfDn` is the DN of the CA the file belongs to (for `TO Issuer SELF`).
 */
export function eaclDenies(policy: Eacl, issuerDn: string, subjectDn: string, selfDn: string): string | undefined {
  const same = (a: string, b: string) => a.toLowerCase() === b.toLowerCase();
  const rules = policy.rules.filter((r) => same(r.issuer === "SELF" ? selfDn : r.issuer, issuerDn));
  if (rules.length === 0) return `the ${policy.format} file of CA ${JSON.stringify(issuerDn)} grants it no namespace`;
  const deny = rules.find((r) => !r.permit && r.pattern.test(subjectDn));
  if (deny)
    return `subject ${JSON.stringify(subjectDn)} is denied by ${JSON.stringify(deny.source)} in the ${policy.format} of CA ${JSON.stringify(issuerDn)}`;
  if (!rules.some((r) => r.permit && r.pattern.test(subjectDn))) {
    return `subject ${JSON.stringify(subjectDn)} is outside the namespace of CA ${JSON.stringify(issuerDn)} (${policy.format})`;
  }
  return undefined;
}
