import { Failure } from "@ce/model";
import { createHash } from "node:crypto";
import type { CompiledConfig } from "@ce/config";
import type { InputFile } from "@ce/model";
import type { JobCredential } from "@ce/store";
import { pemBlocks } from "@ce/x509";
import { rucioDid } from "../protocols/rucio.js";
import { davToHttp, parseTransferUrl, type TransferUrl } from "../protocols/url.js";

/** A-REX's `cache=` values (docs/cache.md). */
export const CACHE_MODES = ["no", "yes", "check", "invariant", "renew", "copy"] as const;
export type CacheMode = (typeof CACHE_MODES)[number];

/**
 * Schemes the cache serves: those whose origin it can ask about a user's access with the user's
 * credential (origin.ts): HEAD / range GET for http(s) and WebDAV, `xrdfs stat` for xrootd, the
 * replica listing for Rucio.
 */
const CACHEABLE = new Set(["https", "http", "davs", "dav", "root", "roots", "rucio"]);

/** A `cache=` value the CE does not know: the transfer fails with this reason (never silently uncached). */
export class CacheOptionError extends Failure<"CACHE_OPTION_INVALID"> {
  constructor(value: string) {
    super("CACHE_OPTION_INVALID", `URL option cache=${value} is not one of ${CACHE_MODES.join(", ")}`);
  }
}

/**
 * The cache mode of an input: its URL option `cache=` (the xRSL `cache` attribute sets it on every
 * input), else the site default; `no` when the cache is off or the scheme is not cacheable.
 */
export function cacheModeOf(f: Pick<InputFile, "source" | "options">, config: CompiledConfig): CacheMode {
  const c = config.staging.cache;
  if (c.dirs.length === 0 || !f.source) return "no";
  let t: TransferUrl;
  try {
    t = parseTransferUrl(f.source, f.options);
  } catch {
    return "no"; // the download itself fails with the reason
  }
  if (!CACHEABLE.has(t.scheme)) return "no";
  // Options written inside the URL (aCT's `rucio://host;cache=invariant/…`) count as the file's own.
  const v = t.options.cache?.toLowerCase() ?? c.default;
  if (!(CACHE_MODES as readonly string[]).includes(v)) throw new CacheOptionError(t.options.cache!);
  return v as CacheMode;
}

/**
 * The URL as the cache names it: without credentials (user:password@) and fragment, so the same
 * file is one entry whoever asks for it. Query strings stay: they name different files.
 */
export function cacheUrl(url: string): string {
  const u = new URL(url);
  u.username = "";
  u.password = "";
  u.hash = "";
  return u.toString();
}

/** The entry's name: sha256 of the cache URL, hex. */
export function urlHash(url: string): string {
  return keyHash(cacheUrl(url));
}

const keyHash = (key: string) => createHash("sha256").update(key).digest("hex");

/** What the cache stores an input under, and where it asks about a user's access. */
export interface CacheTarget {
  /** `https`, `dav`, `root`, `rucio`, … */
  scheme: string;
  /** The name of the file for the cache (hashed into the entry's name). */
  key: string;
  /** The entry's name: sha256 of `key`, hex. */
  hash: string;
  /** The input's URL without ARC options and metadata; the http form for WebDAV. */
  wire: string;
  transfer: TransferUrl;
}

/**
 * The cache's name of an input:
 *  - http(s): the URL without credentials and fragment;
 *  - dav(s): the same for its http(s) form (WebDAV is HTTP: `davs://h/f` and `https://h/f` are one file);
 *  - root(s): the URL without credentials;
 *  - rucio: `rucio://<server>/<scope>:<name>`, the DID at that Rucio, whichever replica is
 *    downloaded and whatever account or protocol options the URL names. The server stays in the
 *    name: a DID is only a name within one Rucio, and another server could list other bytes for it.
 */
export function cacheTarget(raw: string, options: Record<string, string>): CacheTarget {
  const t = parseTransferUrl(raw, options);
  const wire = t.scheme === "dav" || t.scheme === "davs" ? davToHttp(t.url) : t.url;
  let key: string;
  if (t.scheme === "rucio") {
    const d = rucioDid(t);
    key = `rucio://${new URL(d.base).host}/${d.scope}:${d.name}`;
  } else key = cacheUrl(wire);
  return { scheme: t.scheme, key, hash: keyHash(key), wire, transfer: t };
}

/**
 * Whose access the cache remembers (`Keys.cachePerm`/`cacheEver`): the credential the origin saw,
 * not the grid identity. An origin decides by what the credential carries (a VOMS role in the
 * proxy's AC, a token's scopes, groups and audience), so a user whose role or scope changed is
 * asked about again, and a narrower credential never inherits what a broader one was given.
 *  - X.509: every certificate of the proxy chain (the VOMS ACs are inside it; never the key) plus
 *    the FQANs in effect for the job: a new proxy is a new credential, checked once.
 *  - token: issuer, subject, scopes, audiences and groups (the claims an origin authorizes by; a
 *    token refreshed with the same claims keeps the answer);
 *  - none: the owner asked anonymously.
 * The fields are JSON-encoded before hashing, so no two different credentials make one text.
 */
export function credentialKey(cred: JobCredential | undefined, fqans: readonly string[] | undefined, owner: string): string {
  let parts: unknown[];
  if (cred?.type === "x509") {
    const chain = pemBlocks(cred.proxyPem)
      .filter((b) => b.label === "CERTIFICATE")
      .map((b) => b.der.toString("base64"));
    parts = ["x509", chain, [...(fqans ?? [])]];
  } else if (cred?.type === "jwt") {
    const c = jwtClaims(cred.token);
    const list = (v: unknown) => (Array.isArray(v) ? v : v === undefined ? [] : [v]).map(String).sort();
    const scopes = typeof c.scope === "string" ? c.scope.split(" ").filter(Boolean).sort() : list(c.scp);
    parts = ["jwt", String(c.iss ?? ""), String(c.sub ?? ""), scopes, list(c.aud), list(c["wlcg.groups"])];
  } else parts = ["none", owner];
  return createHash("sha256").update(JSON.stringify(parts)).digest("base64url").slice(0, 32);
}

/** The claims of a token the gateway verified at delegation (no signature check here); {} if unreadable. */
function jwtClaims(token: string): Record<string, unknown> {
  try {
    const claims: unknown = JSON.parse(Buffer.from(token.split(".")[1] ?? "", "base64url").toString("utf8"));
    return claims && typeof claims === "object" ? (claims as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}
