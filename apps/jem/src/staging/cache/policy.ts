import { createHash } from "node:crypto";
import type { CompiledConfig } from "@ce/config";
import type { InputFile } from "@ce/model";

/** A-REX's `cache=` values (docs/cache.md). */
export const CACHE_MODES = ["no", "yes", "check", "invariant", "renew", "copy"] as const;
export type CacheMode = (typeof CACHE_MODES)[number];

/** Schemes the cache serves: those whose origin it can ask about a user's access (HEAD / range GET). */
const CACHEABLE = new Set(["https:", "http:"]);

/** A `cache=` value the CE does not know: the transfer fails with this reason (never silently uncached). */
export class CacheOptionError extends Error {
  readonly code = "CACHE_OPTION_INVALID";
  constructor(value: string) {
    super(`URL option cache=${value} is not one of ${CACHE_MODES.join(", ")}`);
    this.name = "CacheOptionError";
  }
}

/**
 * The cache mode of an input: its URL option `cache=` (the xRSL `cache` attribute sets it on every
 * input), else the site default; `no` when the cache is off or the scheme is not cacheable.
 */
export function cacheModeOf(f: Pick<InputFile, "source" | "options">, config: CompiledConfig): CacheMode {
  const c = config.staging.cache;
  if (c.dirs.length === 0 || !f.source) return "no";
  let scheme: string;
  try {
    scheme = new URL(f.source).protocol;
  } catch {
    return "no";
  }
  if (!CACHEABLE.has(scheme)) return "no";
  const v = f.options.cache?.toLowerCase() ?? c.default;
  if (!(CACHE_MODES as readonly string[]).includes(v)) throw new CacheOptionError(f.options.cache!);
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
  return createHash("sha256").update(cacheUrl(url)).digest("hex");
}
