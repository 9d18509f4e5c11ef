import { Failure } from "@ce/model";
import { createHash } from "node:crypto";
import type { CompiledConfig } from "@ce/config";
import type { InputFile } from "@ce/model";
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
