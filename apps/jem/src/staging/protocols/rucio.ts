/**
 * `rucio://<server>[:port]/replicas/<scope>/<name>` inputs (the URL form of ARC's rucio data
 * point, which aCT writes): the JEM asks the Rucio server for the file's replicas with Rucio's
 * REST API and downloads the first one that works through the other protocols, checking the
 * size and checksum Rucio records for the file.
 *
 * - Authentication: with an X.509 proxy, `GET <authUrl>` (default `https://<server>/auth/x509_proxy`,
 *   as ARC) with the proxy as TLS client certificate and `X-Rucio-Account`; the answer's
 *   `X-Rucio-Auth-Token` is kept for this transfer client until shortly before its expiry.
 *   With a token delegation, the token itself is the `X-Rucio-Auth-Token` (Rucio accepts OIDC
 *   tokens), and only when the server is within the token's audience.
 * - `GET https://<server>/replicas/<scope>/<name>` answers JSON, one object per line
 *   (`application/x-json-stream`), with `bytes`, `adler32`, `md5`, and the replicas as `pfns`
 *   (PFN → rse, type, priority) or `rses` (RSE → PFNs).
 * - Replicas: only http(s), dav(s) and root(s) PFNs (never a local path), tape copies skipped,
 *   ordered by Rucio's priority and then by `transferprotocol=` (e.g. `https,root`; `https`
 *   also admits `davs`, `http` also `dav`).
 * Every request goes through the transfer client, hence through the staging destination policy.
 */
import { request } from "undici";
import { readCapped, redact, TransferError, wrapNetwork, type TransferClient } from "../http.js";
import type { TransferUrl } from "./url.js";

export interface RucioSettings {
  /** Authentication URL when it is not the server's own `/auth/x509_proxy`. */
  authUrl?: string | undefined;
  /** Account when the input names none with `rucioaccount=`. */
  account?: string | undefined;
  /** Bound on each call to Rucio (authentication, replica listing). */
  timeoutMs: number;
}

export interface RucioFile {
  scope: string;
  name: string;
  /** Candidate PFNs in the order they are tried. */
  replicas: string[];
  size?: number | undefined;
  /** `adler32:<hex>` or `md5:<hex>` as Rucio records it. */
  checksum?: string | undefined;
}

const REPLICA_SCHEMES = ["https", "davs", "http", "dav", "root", "roots"];
/** A replica listing larger than this is not a listing (a server error page, or hostile). */
const MAX_LISTING = 4 * 1024 * 1024;
const TOKEN_MARGIN_MS = 5 * 60_000;

/** Rucio tokens per transfer client (one credential), per auth URL and account. */
const tokens = new WeakMap<TransferClient, Map<string, { token: string; until: number }>>();

/** The server and DID a `rucio://` URL names; a final TransferError when it names none. */
export function rucioDid(t: TransferUrl): { base: string; scope: string; name: string } {
  const bad = () => new TransferError(`${redact(t.url)} is not rucio://<server>/replicas/<scope>/<name>`, false, 400);
  let u: URL;
  try {
    u = new URL(t.url);
  } catch {
    throw bad();
  }
  const m = /^\/replicas\/([^/]+)\/([^/]+)$/.exec(u.pathname);
  if (!m || !u.hostname || u.username || u.password) throw bad();
  const [scope, name] = [decodeURIComponent(m[1]!), decodeURIComponent(m[2]!)];
  // Rucio's own limits on scope and name characters; anything else is not a DID.
  if (!/^[A-Za-z0-9_.-]{1,30}$/.test(scope) || !/^[A-Za-z0-9_.+:-]{1,250}$/.test(name)) throw bad();
  return { base: `https://${u.host}`, scope, name };
}

const header = (h: Record<string, string | string[] | undefined>, k: string) => {
  const v = h[k];
  return Array.isArray(v) ? v[0] : v;
};

/** A refusal by Rucio, with its own explanation (`ExceptionClass`/`ExceptionMessage` headers). */
function rucioError(what: string, status: number, h: Record<string, string | string[] | undefined>): TransferError {
  const cls = header(h, "exceptionclass");
  const msg = header(h, "exceptionmessage");
  const why = [cls, msg].filter(Boolean).join(": ");
  return new TransferError(
    `${what}: HTTP ${status}${why ? ` (${why.slice(0, 300)})` : ""}`,
    status >= 500 || status === 408 || status === 429,
    status,
  );
}

async function authToken(
  client: TransferClient,
  base: string,
  account: string | undefined,
  s: RucioSettings,
  signal: AbortSignal,
  fresh: boolean,
): Promise<string> {
  const cred = client.credential;
  if (cred?.type === "jwt") {
    const refused = client.refuse(base);
    if (refused) throw new TransferError(`token not sent to Rucio at ${base}: ${refused}`, false);
    return cred.token;
  }
  if (cred?.type !== "x509")
    throw new TransferError(`Rucio at ${base} needs the job's X.509 proxy or token; the input has no delegation`, false);
  const authUrl = s.authUrl ?? `${base}/auth/x509_proxy`;
  const key = `${authUrl} ${account ?? ""}`;
  let held = tokens.get(client);
  if (!held) tokens.set(client, (held = new Map()));
  const have = held.get(key);
  if (have && !fresh && have.until > Date.now()) return have.token;
  const headers: Record<string, string> = account ? { "x-rucio-account": account } : {};
  const res = await request(authUrl, { method: "GET", dispatcher: client.dispatcher, headers, signal }).catch(
    wrapNetwork(`Rucio authentication ${redact(authUrl)}`),
  );
  await res.body.dump().catch(() => undefined);
  if (res.statusCode !== 200)
    throw rucioError(`Rucio authentication at ${redact(authUrl)}${account ? ` as account ${account}` : ""}`, res.statusCode, res.headers);
  const token = header(res.headers, "x-rucio-auth-token");
  if (!token || /[\r\n]/.test(token))
    throw new TransferError(`Rucio authentication at ${redact(authUrl)} answered without an X-Rucio-Auth-Token`, true);
  const expires = Date.parse(header(res.headers, "x-rucio-auth-token-expires") ?? "");
  // Rucio's tokens last an hour unless it says otherwise.
  held.set(key, { token, until: (Number.isFinite(expires) ? expires : Date.now() + 3_600_000) - TOKEN_MARGIN_MS });
  return token;
}

/** Wanted schemes from `transferprotocol=` (https admits davs, http admits dav); undefined = any. */
function wantedSchemes(opt: string | undefined): string[] | undefined {
  if (!opt) return undefined;
  const out: string[] = [];
  for (const p of opt
    .toLowerCase()
    .split(",")
    .map((x) => x.trim())
    .filter(Boolean)) {
    out.push(p);
    if (p === "https") out.push("davs");
    if (p === "http") out.push("dav");
  }
  return out;
}

/** The replicas, size and checksum of one DID from a replica listing. */
export function parseListing(text: string, scope: string, name: string, transferProtocol?: string): RucioFile | undefined {
  for (const line of text.split("\n")) {
    if (!line.trim()) continue;
    let o: Record<string, unknown>;
    try {
      o = JSON.parse(line) as Record<string, unknown>;
    } catch {
      throw new TransferError(`Rucio's replica listing of ${scope}:${name} is not JSON`, true);
    }
    if (o === null || typeof o !== "object" || o.name !== name || (o.scope !== undefined && o.scope !== scope)) continue;
    const found: Array<{ pfn: string; priority: number }> = [];
    if (o.pfns && typeof o.pfns === "object") {
      for (const [pfn, meta] of Object.entries(o.pfns as Record<string, { type?: unknown; priority?: unknown }>)) {
        if (String(meta?.type ?? "").toUpperCase() === "TAPE") continue;
        found.push({ pfn, priority: typeof meta?.priority === "number" ? meta.priority : found.length + 1 });
      }
    } else if (o.rses && typeof o.rses === "object") {
      for (const list of Object.values(o.rses as Record<string, unknown>)) {
        if (Array.isArray(list)) for (const pfn of list) if (typeof pfn === "string") found.push({ pfn, priority: found.length + 1 });
      }
    }
    const wanted = wantedSchemes(transferProtocol);
    const schemeOf = (pfn: string) => (/^([a-z][a-z0-9+.-]*):\/\//i.exec(pfn)?.[1] ?? "").toLowerCase();
    const rank = (pfn: string) => (wanted ? wanted.indexOf(schemeOf(pfn)) : 0);
    const replicas = found
      .filter((r) => REPLICA_SCHEMES.includes(schemeOf(r.pfn)) && rank(r.pfn) >= 0)
      .sort((a, b) => rank(a.pfn) - rank(b.pfn) || a.priority - b.priority)
      .map((r) => r.pfn);
    const hex = (v: unknown) => (typeof v === "string" && /^[0-9a-f]{1,64}$/i.test(v) ? v.toLowerCase() : undefined);
    const adler = hex(o.adler32);
    const md5 = hex(o.md5);
    return {
      scope,
      name,
      replicas,
      size: typeof o.bytes === "number" && Number.isSafeInteger(o.bytes) && o.bytes >= 0 ? o.bytes : undefined,
      checksum: adler ? `adler32:${adler}` : md5 ? `md5:${md5}` : undefined,
    };
  }
  return undefined;
}

/** Asks Rucio for the replicas of the DID a `rucio://` URL names. An unknown DID is final (404). */
export async function resolveRucio(client: TransferClient, t: TransferUrl, s: RucioSettings, signal: AbortSignal): Promise<RucioFile> {
  const { base, scope, name } = rucioDid(t);
  const account = t.options.rucioaccount || s.account;
  const url = `${base}/replicas/${encodeURIComponent(scope)}/${encodeURIComponent(name)}`;
  const bounded = AbortSignal.any([signal, AbortSignal.timeout(s.timeoutMs)]);
  for (let attempt = 0; ; attempt++) {
    const token = await authToken(client, base, account, s, bounded, attempt > 0);
    const res = await request(url, {
      method: "GET",
      dispatcher: client.dispatcher,
      headers: { "x-rucio-auth-token": token, accept: "application/x-json-stream", ...(account ? { "x-rucio-account": account } : {}) },
      signal: bounded,
    }).catch(wrapNetwork(`Rucio replica listing ${url}`));
    // An expired token: one fresh authentication, then the answer stands.
    if (res.statusCode === 401 && attempt === 0 && client.credential?.type === "x509") {
      await res.body.dump().catch(() => undefined);
      continue;
    }
    if (res.statusCode === 404) {
      await res.body.dump().catch(() => undefined);
      throw rucioError(`Rucio has no file ${scope}:${name} at ${base}`, 404, res.headers);
    }
    if (res.statusCode !== 200) {
      await res.body.dump().catch(() => undefined);
      throw rucioError(`Rucio replica listing ${url}`, res.statusCode, res.headers);
    }
    const text = await readCapped(res.body, MAX_LISTING, `Rucio replica listing ${url}`).catch(wrapNetwork(`Rucio replica listing ${url}`));
    const file = parseListing(text, scope, name, t.options.transferprotocol);
    // Rucio answers an empty listing for a DID it does not know (ARC reads it so too).
    if (!file) throw new TransferError(`Rucio has no file ${scope}:${name} at ${base}`, false, 404);
    return file;
  }
}
