import { Failure } from "@ce/model";
import { rename, unlink, type FileHandle } from "node:fs/promises";
import { Readable, Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import { createSecureContext, rootCertificates } from "node:tls";
import { Agent, buildConnector, request } from "undici";
import { closeHandle, createFileIn, type Dir } from "@ce/sessionfs";
import type { JobCredential } from "@ce/store";
import { tokenRefusal } from "../credentials.js";
import { checksummer, parseChecksum, sameDigest } from "./checksum.js";
import { DestinationRefused, type DestinationPolicy } from "./destinations.js";
import { toolRunner, type ToolRunner } from "./tools.js";

/** A transfer failure; `retryable` = worth another attempt (network, 5xx, 408/429, corrupt data). */
export class TransferError extends Failure {
  constructor(
    message: string,
    readonly retryable: boolean,
    readonly status?: number,
    code = "TRANSFER_FAILED",
  ) {
    super(code, message);
  }
}

export interface TransferClient {
  dispatcher: Agent;
  headers: Record<string, string>;
  /** The credential itself, for protocols driven through external tools (xrootd). */
  credential?: JobCredential | undefined;
  /** The destination policy, for protocols driven through external tools (they connect by themselves). */
  policy?: DestinationPolicy | undefined;
  /** CA directory (hashed layout) for tools that verify servers themselves (xrootd's X509_CERT_DIR). */
  certDir?: string | undefined;
  /** The site sends tokens whose audience is the WLCG any-audience. */
  allowAnyAudience?: boolean | undefined;
  /** How external tools (xrdcp, xrdfs) are started: as the job's account, never as root (tools.ts). */
  tools: ToolRunner;
  /** Why this client's credential must not be sent to `url` (undefined = allowed). */
  refuse(url: string): string | undefined;
  close(): Promise<void>;
}

const PEM_RE = /-----BEGIN ([A-Z ]+)-----[\s\S]+?-----END \1-----\n?/g;

export interface ClientOptions {
  caPem?: string | undefined;
  /** Bound on establishing a connection (TCP + TLS). */
  connectTimeoutMs: number;
  /** Bound on waiting for response headers, and between body chunks. */
  idleTimeoutMs: number;
  allowAnyAudience?: boolean;
  /** Checked on every connection (first request, redirects, MKCOL, PUT); none: no check (unit tests of the client). */
  policy?: DestinationPolicy | undefined;
  /** See TransferClient.certDir. */
  certDir?: string | undefined;
  /** See TransferClient.tools; none: tools run as this process, refused when it is root. */
  tools?: ToolRunner | undefined;
}

/**
 * HTTP(S) client for one credential: an X.509 proxy is the TLS client certificate (chain + key),
 * a token goes into `Authorization: Bearer`. Extra CAs are added to, not substituted for, the
 * system roots. Every connection goes through the destination policy: the host is resolved once,
 * the address is checked, and the socket connects to that very address (TLS still verifies and
 * sends SNI for the name), so a second DNS answer cannot lead elsewhere.
 */
export function transferClient(cred: JobCredential | undefined, opts: ClientOptions): TransferClient {
  const tlsOpts: Record<string, unknown> = {};
  if (opts.caPem) tlsOpts.ca = [...rootCertificates, opts.caPem];
  const headers: Record<string, string> = {};
  if (cred?.type === "x509") {
    const blocks = [...cred.proxyPem.matchAll(PEM_RE)];
    tlsOpts.cert = blocks
      .filter((b) => b[1] === "CERTIFICATE")
      .map((b) => b[0])
      .join("");
    tlsOpts.key = blocks.find((b) => b[1]!.endsWith("PRIVATE KEY"))?.[0];
  } else if (cred?.type === "jwt") {
    headers.authorization = `Bearer ${cred.token}`;
  }
  // One TLS context per credential, built here once: handing `ca`/`cert`/`key` to every connect
  // made Node parse the whole CA list (the system roots and the site's) again for each connection.
  const secureContext = Object.keys(tlsOpts).length > 0 ? createSecureContext(tlsOpts) : undefined;
  const base = buildConnector({ ...(secureContext ? { secureContext } : {}), timeout: opts.connectTimeoutMs });
  const policy = opts.policy;
  const connect: buildConnector.connector = policy
    ? (o, cb) => {
        const port = Number(o.port) || (o.protocol === "https:" ? 443 : 80);
        policy.resolve(o.hostname, port).then(
          ({ address }) => base({ ...o, hostname: address }, cb),
          (e: unknown) => cb(e as Error, null),
        );
      }
    : base;
  const dispatcher = new Agent({ connect, headersTimeout: opts.idleTimeoutMs, bodyTimeout: opts.idleTimeoutMs });
  const token = cred?.type === "jwt" ? cred.token : undefined;
  return {
    dispatcher,
    headers,
    credential: cred,
    policy: opts.policy,
    certDir: opts.certDir,
    allowAnyAudience: opts.allowAnyAudience ?? false,
    tools: opts.tools ?? toolRunner(() => Promise.resolve(undefined)),
    refuse: (url) => (token === undefined ? undefined : tokenRefusal(token, url, opts.allowAnyAudience ?? false)),
    close: () => dispatcher.close(),
  };
}

/** Scheme and credential checks before anything is sent; a refusal is final (not retried). */
function checkTarget(client: TransferClient, url: string): void {
  const scheme = new URL(url).protocol;
  if (scheme !== "https:" && scheme !== "http:")
    throw new TransferError(`Unsupported protocol ${scheme.replace(/:$/, "")} in ${redact(url)}`, false);
  const refused = client.refuse(url);
  if (refused) throw new TransferError(`token not sent to ${redact(url)}: ${refused}`, false);
}

/** URLs may carry credentials or A-REX `;opt=val` options; logs get neither. */
export function redact(url: string): string {
  try {
    // `host;opt=val` (ARC options, e.g. in @output.list lines) is no WHATWG syntax: cut first.
    const u = new URL(url.replace(/^([a-z][a-z0-9+.-]*:\/\/[^/?#;]*);[^/?#]*/i, "$1"));
    u.username = "";
    u.password = "";
    u.search = "";
    return u.toString();
  } catch {
    return "<invalid URL>";
  }
}

function httpError(status: number, what: string): TransferError {
  return new TransferError(`${what}: HTTP ${status}`, status >= 500 || status === 408 || status === 429, status);
}

/** A network failure as a TransferError: retryable, but a destination refusal is final. */
export function wrapNetwork(what: string): (e: unknown) => never {
  return (e) => {
    if (e instanceof TransferError) throw e;
    const err = e as Error;
    if (err.name === "AbortError") throw e;
    if (e instanceof DestinationRefused) throw new TransferError(`${what} refused: ${e.reason}`, false);
    throw new TransferError(err.message || String(e), true);
  };
}

export interface DownloadOptions {
  signal: AbortSignal;
  size?: number | undefined;
  checksum?: string | undefined;
  /** File mode of the result (0o755 for executables), given at creation of the temporary file. */
  mode?: number | undefined;
  onBytes?: (n: number) => void;
  /** The response's headers, before the body is read (the input cache keeps ETag/Last-Modified). */
  onHeaders?: (headers: Record<string, string | string[] | undefined>) => void;
  /** The verified `alg:value` of what arrived, when a checksum was asked for. */
  onChecksum?: (sum: string) => void;
}

/** Where a download lands: entry `name` of a session directory we hold open. */
export interface SessionDest {
  dir: Dir;
  name: string;
  /** Session-relative path, for messages. */
  at: string;
}

/**
 * GET into `dest` via a new temporary entry of the held directory (O_EXCL|O_NOFOLLOW: never an
 * existing file or link), verifying size and checksum before the rename within that directory.
 */
export async function download(client: TransferClient, url: string, dest: SessionDest, o: DownloadOptions): Promise<number> {
  checkTarget(client, url);
  const part = `.ce-part-${process.pid}-${Math.random().toString(36).slice(2, 10)}`;
  let fh: FileHandle | undefined;
  try {
    // undici drops Authorization on a redirect to another origin: a token stays with its audience.
    const res = await request(url, {
      method: "GET",
      dispatcher: client.dispatcher,
      headers: client.headers,
      signal: o.signal,
      maxRedirections: 5,
    }).catch(wrapNetwork(`input ${redact(url)}`));
    if (res.statusCode >= 300) {
      await res.body.dump().catch(() => undefined);
      throw httpError(res.statusCode, `GET ${redact(url)}`);
    }
    o.onHeaders?.(res.headers);
    const sum = parseChecksum(o.checksum);
    const hasher = sum ? checksummer(sum.alg) : undefined;
    let bytes = 0;
    const count = new Transform({
      transform(chunk: Buffer, _enc, cb) {
        bytes += chunk.length;
        hasher?.update(chunk);
        o.onBytes?.(chunk.length);
        cb(null, chunk);
      },
    });
    // The mode is set at creation (O_EXCL|O_NOFOLLOW): no chmod by path afterwards.
    fh = await createFileIn(dest.dir, part, dest.at, o.mode ?? 0o644);
    await pipeline(res.body, count, fh.createWriteStream(), { signal: o.signal }).catch(wrapNetwork(`input ${redact(url)}`));
    fh = undefined; // closed by the stream
    if (o.size !== undefined && bytes !== o.size) throw new TransferError(`size mismatch: got ${bytes} bytes, expected ${o.size}`, true);
    // A corrupt file is the data's fault: final, not retried, naming both values.
    const got = hasher?.digest();
    if (sum?.expected && got !== undefined && !sameDigest(got, sum.expected))
      throw new TransferError(`${sum.alg} checksum mismatch for ${redact(url)}: got ${got}, expected ${sum.expected}`, false);
    await rename(dest.dir.at(part), dest.dir.at(dest.name));
    if (sum && got !== undefined) o.onChecksum?.(`${sum.alg}:${got}`);
    return bytes;
  } finally {
    // The transfer's own error is the one to report; a stolen descriptor is logged by the hook.
    if (fh) await closeHandle(fh, dest.at).catch(() => undefined);
    await unlink(dest.dir.at(part)).catch(() => undefined);
  }
}

/** Positional reads from 0 to `size`: every attempt (retry, after MKCOL) sends the same bytes. */
async function* readAt(handle: FileHandle, size: number): AsyncGenerator<Buffer> {
  for (let pos = 0; pos < size;) {
    const buf = Buffer.allocUnsafe(Math.min(64 * 1024, size - pos));
    const { bytesRead } = await handle.read(buf, 0, buf.length, pos);
    if (bytesRead === 0) throw new TransferError(`file shrank while uploading (${pos} of ${size} bytes)`, false);
    pos += bytesRead;
    yield buf.subarray(0, bytesRead);
  }
}

/** A file to upload: the descriptor opened (and checked) in the session, and its size then. */
export interface UploadSource {
  handle: FileHandle;
  size: number;
}

/**
 * PUT a file, streaming from the descriptor we opened (never re-opened by path); WebDAV targets
 * get missing parent collections created (MKCOL) on 404/409.
 */
export async function upload(client: TransferClient, file: UploadSource, url: string, o: { signal: AbortSignal }): Promise<number> {
  checkTarget(client, url);
  const { size } = file;
  const put = () =>
    request(url, {
      method: "PUT",
      dispatcher: client.dispatcher,
      headers: { ...client.headers, "content-length": String(size) },
      body: size === 0 ? "" : Readable.from(readAt(file.handle, size)),
      signal: o.signal,
    }).catch(wrapNetwork(`output ${redact(url)}`));
  let res = await put();
  if (res.statusCode === 404 || res.statusCode === 409) {
    await res.body.dump().catch(() => undefined);
    await mkcolParents(client, url, o.signal);
    res = await put();
  }
  await res.body.dump().catch(() => undefined);
  if (res.statusCode >= 300) throw httpError(res.statusCode, `PUT ${redact(url)}`);
  return size;
}

async function mkcolParents(client: TransferClient, url: string, signal: AbortSignal): Promise<void> {
  const u = new URL(url);
  const parts = u.pathname.split("/").filter(Boolean).slice(0, -1);
  let path = "";
  for (const p of parts) {
    path += `/${p}`;
    // undici types list only standard methods; MKCOL is WebDAV (RFC 4918).
    const res = await request(`${u.origin}${path}/`, {
      method: "MKCOL" as "PUT",
      dispatcher: client.dispatcher,
      headers: client.headers,
      signal,
    }).catch(wrapNetwork(`output collection ${redact(`${u.origin}${path}/`)}`));
    await res.body.dump().catch(() => undefined);
    // 201 created, 405 already there, 301/302 some servers redirect collections. Another upload
    // creating the same collection at the same moment can make the server refuse ours (Apache's
    // mod_dav answers 403 when the directory appeared between its check and its mkdir): a
    // collection that exists now is what we asked for.
    if (res.statusCode >= 400 && res.statusCode !== 405 && !(await isCollection(client, `${u.origin}${path}/`, signal)))
      throw httpError(res.statusCode, `MKCOL ${redact(`${u.origin}${path}/`)}`);
  }
}

/** Whether `url` names an existing WebDAV collection (PROPFIND, Depth 0, resourcetype). */
async function isCollection(client: TransferClient, url: string, signal: AbortSignal): Promise<boolean> {
  const res = await request(url, {
    method: "PROPFIND" as "PUT",
    dispatcher: client.dispatcher,
    headers: { ...client.headers, depth: "0", "content-type": "application/xml" },
    body: '<?xml version="1.0"?><propfind xmlns="DAV:"><prop><resourcetype/></prop></propfind>',
    signal,
  }).catch(() => undefined);
  if (!res) return false;
  if (res.statusCode !== 207) {
    await res.body.dump().catch(() => undefined);
    return false;
  }
  // The answer is small (one resource, one property); anything larger is not what we asked for.
  const text = await readCapped(res.body, 64 * 1024, `PROPFIND ${redact(url)}`).catch(() => "");
  return /<(?:[\w-]+:)?collection\s*\/>/.test(text);
}

/** A small answer body as text; larger than `max` bytes fails (not retried) naming `what`. */
export async function readCapped(body: AsyncIterable<Buffer>, max: number, what: string): Promise<string> {
  const chunks: Buffer[] = [];
  let n = 0;
  for await (const c of body) {
    n += c.length;
    if (n > max) throw new TransferError(`${what}: answer larger than ${max} bytes`, false);
    chunks.push(c);
  }
  return Buffer.concat(chunks).toString("utf8");
}

/** Exponential backoff with jitter; stops early on abort or non-retryable errors. */
export async function withRetries<T>(
  fn: (attempt: number) => Promise<T>,
  o: { retries: number; baseMs: number; signal: AbortSignal; onRetry?: (e: Error, attempt: number, delayMs: number) => void },
): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await fn(attempt);
    } catch (e) {
      const retryable = e instanceof TransferError && e.retryable;
      if (!retryable || attempt >= o.retries || o.signal.aborted) throw e;
      const delay = Math.min(o.baseMs * 2 ** attempt, 300_000) * (0.75 + Math.random() * 0.5);
      o.onRetry?.(e as Error, attempt + 1, delay);
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, delay);
        o.signal.addEventListener(
          "abort",
          () => {
            clearTimeout(t);
            resolve();
          },
          { once: true },
        );
      });
      if (o.signal.aborted) throw e;
    }
  }
}
