/**
 * One entry per direction for every protocol the stager speaks. The worker hands over the URL as
 * the description (or an output list) wrote it; this module splits ARC's options and metadata
 * off, picks the protocol and applies the checksum rules (production-site.md §2.3):
 *   http, https      HTTP (http.ts)
 *   dav, davs        WebDAV = HTTP on the wire; missing parent collections created (MKCOL)
 *   root, roots      xrootd through xrdcp/xrdfs (xrootd.ts)
 *   file:///…        a listed site software area, linked (local.ts)
 *   rucio            replicas from Rucio, downloaded through the above (rucio.ts); inputs only
 * Every other scheme is a final refusal naming it. All go through the worker's per-transfer
 * bounds (timeout signal, retries, global slots).
 */
import { download, redact, TransferError, upload, type SessionDest, type TransferClient, type UploadSource } from "../http.js";
import { linkLocalInput } from "./local.js";
import { davToHttp, expectedChecksum, parseTransferUrl, type TransferUrl } from "./url.js";
import { checksumOfHandle, checksumMismatch, httpDigest } from "./verify.js";
import { xrootdDownload, xrootdUpload } from "./xrootd.js";
import { resolveRucio, type RucioSettings } from "./rucio.js";
import { parseChecksum } from "../checksum.js";

export { parseTransferUrl } from "./url.js";

export interface FetchOptions {
  signal: AbortSignal;
  /** The input's options from the description (win over those inside the URL). */
  options: Record<string, string>;
  /** Expected size (bytes) and `alg[:value]` checksum from the description, if any. */
  size?: number | undefined;
  checksum?: string | undefined;
  mode?: number | undefined;
  onBytes?: (n: number) => void;
  /** The response headers of an http(s)/dav(s) download (the input cache keeps ETag and Last-Modified). */
  onHeaders?: (h: Record<string, string | string[] | undefined>) => void;
  localInputPrefixes: readonly string[];
  rucio?: RucioSettings | undefined;
  /** The replica a `rucio://` input was downloaded from. */
  onReplica?: (url: string) => void;
  /** The verified `alg:value` of the file, when a checksum was asked for (or Rucio gave one). */
  onChecksum?: ((sum: string) => void) | undefined;
}

function unsupported(scheme: string, url: string): TransferError {
  return new TransferError(`Unsupported protocol ${scheme || "(none)"} in ${redact(url)}`, false);
}

/** Downloads one input into `dest`; returns the bytes written (or the linked file's size). */
export async function fetchInput(client: TransferClient, raw: string, dest: SessionDest, o: FetchOptions): Promise<number> {
  const t = parseTransferUrl(raw, o.options);
  const checksum = expectedChecksum(t, o.checksum);
  const common = { signal: o.signal, size: o.size, checksum, mode: o.mode, onBytes: o.onBytes, onChecksum: o.onChecksum };
  switch (t.scheme) {
    case "http":
    case "https":
      return download(client, t.url, dest, { ...common, onHeaders: o.onHeaders });
    case "dav":
    case "davs":
      return download(client, davToHttp(t.url), dest, { ...common, onHeaders: o.onHeaders });
    case "root":
    case "roots":
      return xrootdDownload(client, t.url, dest, common);
    case "file":
      return linkLocalInput(t.url, dest, o.localInputPrefixes);
    case "rucio":
      return rucioInput(client, t, dest, o);
    default:
      throw unsupported(t.scheme, t.url);
  }
}

/**
 * A `rucio://` input: the replicas Rucio lists, tried in order until one arrives whole. The
 * size and checksum Rucio records are checked unless the description names its own value (or
 * `checksum=no`). A corrupt or unreachable replica moves on to the next; when all fail, the
 * reason names each (a single replica's own error is reported as it is).
 */
async function rucioInput(client: TransferClient, t: TransferUrl, dest: SessionDest, o: FetchOptions): Promise<number> {
  const file = await resolveRucio(client, t, o.rucio ?? { timeoutMs: 60_000 }, o.signal);
  const did = `${file.scope}:${file.name}`;
  if (file.replicas.length === 0) {
    throw new TransferError(
      `Rucio lists no replica of ${did} over ${t.options.transferprotocol ?? "http(s), dav(s) or root(s)"}`,
      false,
      404,
    );
  }
  const own = t.options.checksum?.toLowerCase();
  const checksum = own === "no" ? undefined : (o.checksum ?? t.checksum ?? file.checksum ?? own);
  const size = o.size ?? file.size;
  const failed: string[] = [];
  let retryable = false;
  for (const pfn of file.replicas) {
    try {
      const bytes = await fetchInput(client, pfn, dest, { ...o, options: {}, checksum, size, onHeaders: undefined });
      o.onReplica?.(pfn);
      return bytes;
    } catch (e) {
      if (o.signal.aborted || !(e instanceof TransferError)) throw e;
      if (file.replicas.length === 1) throw e;
      failed.push(`${redact(pfn)}: ${e.message}`);
      retryable ||= e.retryable;
    }
  }
  throw new TransferError(`no replica of ${did} could be downloaded: ${failed.join("; ")}`, retryable);
}

export interface SendOptions {
  signal: AbortSignal;
  options: Record<string, string>;
}

/** What an upload did: the bytes sent and the checksum verified, if one was asked for. */
export interface Sent {
  bytes: number;
  checksum?: string | undefined;
}

/**
 * Uploads one output. With a checksum asked for (`:checksumtype=…:checksumvalue=…` after the
 * path, or `checksum=<type>`), the file is summed before it is sent: a value that differs from
 * the one given fails the file at once; after the upload, the value the server reports (if it
 * reports one) must match what was sent.
 */
export async function sendOutput(client: TransferClient, file: UploadSource, raw: string, o: SendOptions): Promise<Sent> {
  const t = parseTransferUrl(raw, o.options);
  let wire: string | undefined;
  switch (t.scheme) {
    case "http":
    case "https":
      wire = t.url;
      break;
    case "dav":
    case "davs":
      wire = davToHttp(t.url);
      break;
    case "root":
    case "roots":
      wire = undefined;
      break;
    default:
      throw unsupported(t.scheme, t.url);
  }
  const spec = parseChecksum(expectedChecksum(t));
  let sum: string | undefined;
  if (spec) {
    sum = await checksumOfHandle(file.handle, file.size, spec.alg, o.signal);
    if (spec.expected && sum.replace(/^0+/, "") !== spec.expected.replace(/^0+/, "")) {
      throw checksumMismatch(spec.alg, sum, spec.expected, `of the file to upload to ${redact(t.url)}`);
    }
  }
  if (wire === undefined) {
    const overwrite = t.options.overwrite?.toLowerCase() === "yes";
    const bytes = await xrootdUpload(client, file, t.url, {
      signal: o.signal,
      overwrite,
      checksum: sum === undefined ? undefined : `${spec!.alg}:${sum}`,
    });
    return { bytes, checksum: sum === undefined ? undefined : `${spec!.alg}:${sum}` };
  }
  const bytes = await upload(client, file, wire, { signal: o.signal });
  if (sum !== undefined && (spec!.alg === "adler32" || spec!.alg === "md5")) {
    const reported = await httpDigest(client, wire, spec!.alg, o.signal);
    if (reported !== undefined && reported.replace(/^0+/, "") !== sum.replace(/^0+/, "")) {
      throw checksumMismatch(spec!.alg, reported, sum, `reported by ${redact(t.url)} after the upload`);
    }
  }
  return { bytes, checksum: sum === undefined ? undefined : `${spec!.alg}:${sum}` };
}
