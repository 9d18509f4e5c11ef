/**
 * root:// and roots:// through Debian's xrootd client (`xrdcp`, `xrdfs`), driven with execa.
 * The data never passes through a path the job could change: downloads stream from xrdcp's
 * stdout into the session entry we hold open, uploads stream our descriptor into xrdcp's stdin.
 * The job's proxy or token is handed over in a private 0600 file, removed afterwards, and the
 * client sees no other credential (xrootd-auth.ts).
 * Checksums: the stager sums what it streams; after an upload the server's value
 * (`xrdfs query checksum`) must match it when the server publishes one.
 *
 * Destinations: xrdcp connects by itself, so the staging policy (destinations.ts) is applied
 * before it runs: the host is resolved once, checked, and xrdcp is given that address (GSI still
 * checks the certificate against the name, through XrdSecGSISRVNAMES). A redirect the xrootd
 * server sends is followed by xrdcp without our check: sites that enable root:// trust their
 * storage's redirectors (docs/staging-protocols.md).
 */
import { pipeline } from "node:stream/promises";
import { Readable, Transform } from "node:stream";
import { execa } from "execa";
import { createFileIn } from "@ce/sessionfs";
import { rename, unlink } from "node:fs/promises";
import { checksummer, parseChecksum, sameDigest } from "../checksum.js";
import { redact, TransferError, type SessionDest, type TransferClient, type UploadSource } from "../http.js";
import { checksumMismatch } from "./verify.js";
import { xrdCredentialEnv } from "./xrootd-auth.js";

/**
 * The URL with its host replaced by the one address the policy allows (resolved once), and the
 * variables that keep GSI's host check on the name; DestinationRefused (final) otherwise.
 */
async function pinned(client: TransferClient, url: string): Promise<{ url: string; env: Record<string, string> }> {
  if (!client.policy) return { url, env: {} };
  const u = new URL(url);
  const name = u.hostname.replace(/^\[|\]$/g, "");
  try {
    const { address, family } = await client.policy.resolve(name, Number(u.port) || 1094);
    u.hostname = family === 6 ? `[${address}]` : address;
  } catch (e) {
    throw new TransferError((e as Error).message, false);
  }
  return { url: u.toString(), env: { XrdSecGSISRVNAMES: name } };
}

function hostAndPath(url: string): { server: string; path: string } {
  const u = new URL(url);
  return { server: `${u.protocol}//${u.host}`, path: decodeURIComponent(u.pathname).replace(/^\/+/, "/") };
}

/**
 * xrdcp's failure as a TransferError. Errors the server reports (not found, no permission, an
 * authentication it refused) are final: another attempt with the same credential cannot succeed.
 * A refused authentication says so, and what the client presented.
 */
function failure(what: string, url: string, presents: string, e: { exitCode?: number; stderr?: unknown; message?: string }): TransferError {
  const text =
    String(e.stderr ?? e.message ?? "")
      .trim()
      .split("\n")
      .pop()
      ?.replace(/^Run: /, "") ?? "";
  if (/Auth failed|authentication failed/i.test(text)) {
    return new TransferError(`${what} ${redact(url)}: authentication failed, the server refused ${presents}: ${text}`, false, 401);
  }
  const final = /No such file|not found|Permission denied|Unable to open/i.test(text);
  return new TransferError(`${what} ${redact(url)}: ${text || `xrdcp exit ${e.exitCode}`}`, !final);
}

export interface XrdDownload {
  signal: AbortSignal;
  size?: number | undefined;
  checksum?: string | undefined;
  mode?: number | undefined;
  onBytes?: (n: number) => void;
  onChecksum?: ((sum: string) => void) | undefined;
}

export async function xrootdDownload(client: TransferClient, given: string, dest: SessionDest, o: XrdDownload): Promise<number> {
  const target = await pinned(client, given);
  const url = target.url;
  const { env: credEnv, presents, cleanup } = await xrdCredentialEnv(client, given);
  const env = { ...credEnv, ...target.env };
  const part = `.ce-part-${process.pid}-${Math.random().toString(36).slice(2, 10)}`;
  const sum = parseChecksum(o.checksum);
  const hasher = sum ? checksummer(sum.alg) : undefined;
  let bytes = 0;
  let fh: Awaited<ReturnType<typeof createFileIn>> | undefined;
  try {
    fh = await createFileIn(dest.dir, part, dest.at, o.mode ?? 0o644);
    const proc = execa("xrdcp", ["--nopbar", "--silent", url, "-"], {
      env,
      extendEnv: false,
      cancelSignal: o.signal,
      forceKillAfterDelay: 5_000,
      stdout: "pipe",
      stderr: "pipe",
      buffer: { stdout: false, stderr: true },
    });
    const count = new Transform({
      transform(chunk: Buffer, _e, cb) {
        bytes += chunk.length;
        hasher?.update(chunk);
        o.onBytes?.(chunk.length);
        cb(null, chunk);
      },
    });
    await Promise.all([pipeline(proc.stdout, count, fh.createWriteStream()), proc]).catch((e: unknown) => {
      if (o.signal.aborted) throw e;
      throw failure("xrdcp", given, presents, e as Error);
    });
    if (o.size !== undefined && bytes !== o.size)
      throw new TransferError(`size mismatch for ${redact(given)}: got ${bytes} bytes, expected ${o.size}`, true);
    const got = hasher?.digest();
    if (sum?.expected && got !== undefined && !sameDigest(got, sum.expected))
      throw checksumMismatch(sum.alg, got, sum.expected, `for ${redact(given)}`);
    await rename(dest.dir.at(part), dest.dir.at(dest.name));
    if (sum && got !== undefined) o.onChecksum?.(`${sum.alg}:${got}`);
    return bytes;
  } finally {
    await fh?.close().catch(() => undefined);
    await unlink(dest.dir.at(part)).catch(() => undefined);
    await cleanup();
  }
}

async function* readAt(file: UploadSource): AsyncGenerator<Buffer> {
  for (let pos = 0; pos < file.size;) {
    const buf = Buffer.allocUnsafe(Math.min(1024 * 1024, file.size - pos));
    const { bytesRead } = await file.handle.read(buf, 0, buf.length, pos);
    if (bytesRead === 0) throw new TransferError(`file shrank while uploading (${pos} of ${file.size} bytes)`, false);
    pos += bytesRead;
    yield buf.subarray(0, bytesRead);
  }
}

/** Uploads from our descriptor; `--path` creates missing directories, `--force` on overwrite=yes. */
export async function xrootdUpload(
  client: TransferClient,
  file: UploadSource,
  given: string,
  o: { signal: AbortSignal; overwrite: boolean; checksum?: string | undefined },
): Promise<number> {
  const target = await pinned(client, given);
  const url = target.url;
  const { env: credEnv, presents, cleanup } = await xrdCredentialEnv(client, given);
  const env = { ...credEnv, ...target.env };
  try {
    const args = ["--nopbar", "--silent", "--path", "--posc", ...(o.overwrite ? ["--force"] : []), "-", url];
    const proc = execa("xrdcp", args, {
      env,
      extendEnv: false,
      cancelSignal: o.signal,
      forceKillAfterDelay: 5_000,
      stdin: "pipe",
      stderr: "pipe",
    });
    await Promise.all([pipeline(Readable.from(readAt(file)), proc.stdin), proc]).catch((e: unknown) => {
      if (o.signal.aborted) throw e;
      throw failure("xrdcp to", given, presents, e as Error);
    });
    const sum = parseChecksum(o.checksum);
    if (sum?.expected) {
      const { server, path } = hostAndPath(url);
      const q = await execa("xrdfs", [server, "query", "checksum", path], { env, extendEnv: false, cancelSignal: o.signal, reject: false });
      // "adler32 3d1ae86e"; a server without checksums answers an error, which is not a mismatch.
      const [alg, value] = (q.exitCode === 0 ? String(q.stdout) : "").trim().split(/\s+/);
      if (alg?.toLowerCase() === sum.alg && value && !sameDigest(value, sum.expected)) {
        throw checksumMismatch(sum.alg, value, sum.expected, `reported by ${redact(given)} after the upload`);
      }
    }
    return file.size;
  } finally {
    await cleanup();
  }
}

/** What an xrootd server says of a file for the job's credential (the input cache's access check). */
export interface XrdStat {
  /** false: the server refuses this credential the file, or has none (no cached copy for them). */
  allowed: boolean;
  status: number;
  size?: number | undefined;
  mtime?: string | undefined;
  reason?: string | undefined;
}

/**
 * `xrdfs <server> stat <path>` with the job's credential, through the same private environment
 * and destination policy as xrdcp. Not found, no permission and a refused authentication are an
 * answer (allowed: false); anything else is a retryable error.
 */
export async function xrootdStat(client: TransferClient, given: string, signal: AbortSignal): Promise<XrdStat> {
  const target = await pinned(client, given);
  const { env: credEnv, presents, cleanup } = await xrdCredentialEnv(client, given);
  try {
    const { server, path } = hostAndPath(target.url);
    const r = await execa("xrdfs", [server, "stat", path], {
      env: { ...credEnv, ...target.env },
      extendEnv: false,
      cancelSignal: signal,
      forceKillAfterDelay: 5_000,
      reject: false,
    });
    if (signal.aborted) signal.throwIfAborted();
    const out = String(r.stdout);
    if (r.exitCode === 0) {
      const size = /^Size:\s+(\d+)/m.exec(out)?.[1];
      return {
        allowed: true,
        status: 200,
        size: size === undefined ? undefined : Number(size),
        mtime: /^MTime:\s+(.+)$/m.exec(out)?.[1]?.trim(),
      };
    }
    const text =
      String(r.stderr || r.stdout || "")
        .trim()
        .split("\n")
        .pop() ?? "";
    if (/Auth failed|authentication failed/i.test(text))
      return { allowed: false, status: 401, reason: `authentication refused (${presents}): ${text}` };
    if (/No such file|not found/i.test(text)) return { allowed: false, status: 404, reason: text };
    if (/Permission denied|not authorized/i.test(text)) return { allowed: false, status: 403, reason: text };
    throw new TransferError(`xrdfs stat ${redact(given)}: ${text || `exit ${r.exitCode}`}`, true);
  } finally {
    await cleanup();
  }
}
