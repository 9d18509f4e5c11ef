/** Checksums of what was sent, and of what a destination says it holds. */
import type { FileHandle } from "node:fs/promises";
import { request } from "undici";
import { checksummer, parseChecksum, sameDigest } from "../checksum.js";
import { TransferError, type TransferClient } from "../http.js";

/** A mismatch is the data's fault, not the network's: final, naming both values. */
export function checksumMismatch(alg: string, got: string, expected: string, where: string): TransferError {
  return new TransferError(`${alg} checksum mismatch ${where}: got ${got}, expected ${expected}`, false);
}

/** Checksum of the first `size` bytes of an open file (positional reads; the handle stays usable). */
export async function checksumOfHandle(handle: FileHandle, size: number, alg: string, signal: AbortSignal): Promise<string> {
  const spec = parseChecksum(alg);
  if (!spec) throw new TransferError(`checksum type '${alg}' is not supported (adler32, md5, sha256)`, false);
  const h = checksummer(spec.alg);
  const buf = Buffer.allocUnsafe(1024 * 1024);
  for (let pos = 0; pos < size;) {
    signal.throwIfAborted();
    const { bytesRead } = await handle.read(buf, 0, Math.min(buf.length, size - pos), pos);
    if (bytesRead === 0) throw new TransferError(`file shrank while computing its checksum (${pos} of ${size} bytes)`, false);
    h.update(buf.subarray(0, bytesRead));
    pos += bytesRead;
  }
  return h.digest();
}

/**
 * Compares an expected `alg:value` with a computed digest of the same algorithm; values of
 * another algorithm or length cannot be compared and are not an error (ARC does the same).
 */
export function verifyChecksum(expected: string | undefined, alg: string, got: string, where: string): void {
  const e = parseChecksum(expected);
  if (!e?.expected || e.alg !== alg) return;
  if (!sameDigest(got, e.expected)) throw checksumMismatch(alg, got, e.expected, where);
}

/**
 * What an HTTP/WebDAV server reports for a file (RFC 3230 `Want-Digest`, answered by dCache,
 * EOS and XRootD's HTTP): the hex value, or undefined when it reports none.
 */
export async function httpDigest(
  client: TransferClient,
  url: string,
  alg: "adler32" | "md5",
  signal: AbortSignal,
): Promise<string | undefined> {
  const res = await request(url, {
    method: "HEAD",
    dispatcher: client.dispatcher,
    headers: { ...client.headers, "want-digest": alg },
    signal,
  }).catch(() => undefined);
  if (!res) return undefined;
  await res.body.dump().catch(() => undefined);
  if (res.statusCode >= 300) return undefined;
  const header = res.headers.digest;
  const text = Array.isArray(header) ? header.join(",") : header;
  for (const part of (text ?? "").split(",")) {
    const eq = part.indexOf("=");
    if (eq < 0 || part.slice(0, eq).trim().toLowerCase() !== alg) continue;
    const v = part.slice(eq + 1).trim();
    // RFC 3230: md5 is base64; adler32 is hex.
    return alg === "md5" ? Buffer.from(v, "base64").toString("hex") : v.toLowerCase();
  }
  return undefined;
}
