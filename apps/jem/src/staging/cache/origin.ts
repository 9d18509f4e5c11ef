import { request } from "undici";
import { redact, TransferError, type TransferClient } from "../http.js";
import { resolveRucio, type RucioSettings } from "../protocols/rucio.js";
import { xrootdStat } from "../protocols/xrootd.js";
import type { CacheTarget } from "./policy.js";

/** What the origin says of a URL for one user's credential. */
export interface OriginAnswer {
  /** false: the origin refuses this user (401/403/404/410): no cached copy for them. */
  allowed: boolean;
  status: number;
  etag?: string | undefined;
  lastModified?: string | undefined;
  size?: number | undefined;
  /** Why the origin refused, in its own words (Rucio's exception, xrdfs's message). */
  reason?: string | undefined;
}

const REFUSED = new Set([401, 403, 404, 410]);

const header = (h: Record<string, string | string[] | undefined>, name: string): string | undefined => {
  const v = h[name];
  return Array.isArray(v) ? v[0] : v;
};

/** ETag, Last-Modified and size of a response (HEAD, a 206 range or a full GET). */
export function validators(h: Record<string, string | string[] | undefined>): Pick<OriginAnswer, "etag" | "lastModified" | "size"> {
  const range = /\/(\d+)$/.exec(header(h, "content-range") ?? "");
  const len = header(h, "content-length");
  return {
    etag: header(h, "etag"),
    lastModified: header(h, "last-modified"),
    size: range ? Number(range[1]) : len !== undefined && /^\d+$/.test(len) ? Number(len) : undefined,
  };
}

/**
 * Asks the origin, with the user's own credential, whether it gives `url` to this user: HEAD, and
 * a GET of the first byte (Range: bytes=0-0) where HEAD is not served (405/501). A refusal is an
 * answer; 5xx and network trouble are retryable errors (the transfer's retries apply).
 */
export async function askOrigin(client: TransferClient, url: string, signal: AbortSignal): Promise<OriginAnswer> {
  const refused = client.refuse(url);
  if (refused) throw new TransferError(`token not sent to ${redact(url)}: ${refused}`, false);
  const once = async (method: "HEAD" | "GET") => {
    const headers = method === "GET" ? { ...client.headers, range: "bytes=0-0" } : client.headers;
    const res = await request(url, { method, dispatcher: client.dispatcher, headers, signal, maxRedirections: 5 }).catch((e: unknown) => {
      if ((e as Error).name === "AbortError") throw e;
      throw new TransferError(`access check of ${redact(url)}: ${(e as Error).message}`, true);
    });
    await res.body.dump().catch(() => undefined);
    return res;
  };
  let res = await once("HEAD");
  if (res.statusCode === 405 || res.statusCode === 501) res = await once("GET");
  const status = res.statusCode;
  if (status < 300) return { allowed: true, status, ...validators(res.headers) };
  if (REFUSED.has(status)) return { allowed: false, status };
  throw new TransferError(`access check of ${redact(url)}: HTTP ${status}`, status >= 500 || status === 408 || status === 429, status);
}

/**
 * Whether the origin's copy differs from the stored one. ETags decide when both have one, then
 * Last-Modified, then the size; with nothing to compare the stored copy is taken as stale (a
 * `cache=check` user asked for the origin's version).
 */
export function changed(
  stored: { etag?: string | undefined; lastModified?: string | undefined; size: number },
  now: OriginAnswer,
): boolean {
  if (stored.etag && now.etag) return stored.etag !== now.etag;
  if (stored.lastModified && now.lastModified) return stored.lastModified !== now.lastModified;
  if (now.size !== undefined) return now.size !== stored.size || !(stored.etag || stored.lastModified);
  return true;
}

/**
 * Whether the origin gives the input to this user, asked with the user's credential, by scheme:
 *  - http(s), dav(s): askOrigin on the http(s) URL (ETag, Last-Modified and size are the validators);
 *  - root(s): `xrdfs stat` (size and modification time);
 *  - rucio: the DID resolves (authentication and replica listing with the user's proxy or token);
 *    Rucio's checksum (as `etag`) and size are the validators, whichever replica was downloaded.
 */
export async function askAccess(
  client: TransferClient,
  t: CacheTarget,
  signal: AbortSignal,
  rucio: RucioSettings | undefined,
): Promise<OriginAnswer> {
  switch (t.scheme) {
    case "root":
    case "roots": {
      const s = await xrootdStat(client, t.wire, signal);
      return { allowed: s.allowed, status: s.status, size: s.size, lastModified: s.mtime, reason: s.reason };
    }
    case "rucio":
      try {
        const f = await resolveRucio(client, t.transfer, rucio ?? { timeoutMs: 60_000 }, signal);
        return { allowed: true, status: 200, etag: f.checksum, size: f.size };
      } catch (e) {
        if (e instanceof TransferError && e.status !== undefined && REFUSED.has(e.status))
          return { allowed: false, status: e.status, reason: e.message };
        throw e;
      }
    default:
      return askOrigin(client, t.wire, signal);
  }
}
