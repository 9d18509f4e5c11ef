/**
 * root:// and roots:// through Debian's xrootd client (`xrdcp`, `xrdfs`), driven with execa.
 *
 * The user names the server (or the user's Rucio server picks it), so the server and whatever it
 * answers are untrusted, and so is the tool that obeys it:
 *  - the tool runs as the job's mapped account, never as root (../tools.ts), with the job's proxy
 *    or token alone, in a private 0700 directory of that account removed afterwards
 *    (xrootd-auth.ts);
 *  - the data never passes through a path: downloads stream from xrdcp's stdout into the session
 *    entry we hold open, uploads stream our descriptor into xrdcp's stdin;
 *  - the tool follows no redirect itself: we read the target from its log, refuse local files
 *    (`file://`, a bare path, stdio) and anything but root(s)://, check the host with the
 *    destination policy (destinations.ts) and run it again against the checked address
 *    (xrootd-hops.ts). A refused target is never connected to. GSI still checks the certificate
 *    against the name (XrdSecGSISRVNAMES).
 * Checksums: the stager sums what it streams; after an upload the server's value
 * (`xrdfs query checksum`) must match it when the server publishes one.
 */
import { pipeline } from "node:stream/promises";
import { Readable, Writable } from "node:stream";
import { createFileIn } from "@ce/sessionfs";
import { rename, unlink } from "node:fs/promises";
import { checksummer, parseChecksum, sameDigest } from "../checksum.js";
import { redact, TransferError, type SessionDest, type TransferClient, type UploadSource } from "../http.js";
import { checksumMismatch } from "./verify.js";
import { xrdCredentialEnv, type XrdCredentialEnv } from "./xrootd-auth.js";
import { followRedirects, readToolStderr, XRD_CLIENT_ENV, type Hop, type HopResult, type ToolOutput } from "./xrootd-hops.js";

function hostAndPath(url: string): { server: string; path: string } {
  const u = new URL(url);
  return { server: `${u.protocol}//${u.host}`, path: decodeURIComponent(u.pathname).replace(/^\/+/, "/") };
}

/**
 * A failed run as a TransferError. Errors the server reports (not found, no permission, an
 * authentication it refused) are final: another attempt with the same credential cannot succeed.
 * A refused authentication says so, and what the client presented.
 */
function failure(what: string, url: string, presents: string, exitCode: number | undefined, said: string): TransferError {
  const text =
    said
      .trim()
      .split("\n")
      .pop()
      ?.replace(/^Run: /, "") ?? "";
  if (/Auth failed|authentication failed/i.test(text)) {
    return new TransferError(`${what} ${redact(url)}: authentication failed, the server refused ${presents}: ${text}`, false, 401);
  }
  // The budget of 0 was hit but no target could be read from the log: never guessed, refused.
  if (/Redirect limit has been reached/i.test(text))
    return new TransferError(`${what} ${redact(url)}: the server redirected to a target that could not be read, refused: ${text}`, false);
  const final = /No such file|not found|Permission denied|Unable to open/i.test(text);
  return new TransferError(`${what} ${redact(url)}: ${text || `exit ${exitCode}`}`, !final);
}

interface Ran {
  exitCode: number | undefined;
  said: ToolOutput;
  stdout: string;
}

/**
 * One run of an xrootd tool against one hop, as the job's account (client.tools), with the job's
 * credential, the hardened client settings and the hop's checked address. Its stdin and stdout are
 * pipes of ours: `feed` writes the upload, `sink` takes the download (else stdout is returned).
 */
async function runXrd(
  client: TransferClient,
  cred: XrdCredentialEnv,
  hop: Hop,
  file: string,
  args: string[],
  o: { signal: AbortSignal; feed?: () => Readable; sink?: Writable },
): Promise<Ran> {
  const { proc } = await client.tools.start(
    file,
    args,
    { ...cred.env, ...XRD_CLIENT_ENV, ...hop.env },
    {
      cancelSignal: o.signal,
      forceKillAfterDelay: 5_000,
      stdin: o.feed ? "pipe" : "ignore",
      stdout: "pipe",
      stderr: "pipe",
      buffer: { stdout: !o.sink, stderr: false },
      // xrdfs answers (stat, checksum) are a few lines; a server cannot make us hold more.
      maxBuffer: 1024 * 1024,
      reject: false,
    },
  );
  const said = readToolStderr(proc);
  // A tool that exits early (a redirect, a refusal) closes its end: that is no error of ours.
  const feeding = o.feed ? pipeline(o.feed(), proc.stdin!).catch(() => undefined) : undefined;
  const sinking = o.sink
    ? pipeline(proc.stdout!, o.sink).then(
        () => undefined,
        (e: unknown) => e as Error,
      )
    : undefined;
  const r = await proc;
  const [sinkErr] = await Promise.all([sinking, feeding]);
  const out = await said;
  if (o.signal.aborted) throw r;
  // Our side failed (the session file could not be written): that, not xrdcp's broken pipe, is the reason.
  if (sinkErr && !out.redirect) throw new TransferError(`writing what ${file} received: ${sinkErr.message}`, true);
  return { exitCode: r.exitCode, said: out, stdout: typeof r.stdout === "string" ? r.stdout : "" };
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
  const cred = await xrdCredentialEnv(client, given);
  const part = `.ce-part-${process.pid}-${Math.random().toString(36).slice(2, 10)}`;
  const sum = parseChecksum(o.checksum);
  let fh: Awaited<ReturnType<typeof createFileIn>> | undefined;
  try {
    const file = (fh = await createFileIn(dest.dir, part, dest.at, o.mode ?? 0o644));
    const { bytes, got } = await followRedirects<{ bytes: number; got: string | undefined }>(client, given, async (hop) => {
      // A redirect may come after data (a read the data server redirects): each hop starts afresh.
      await file.truncate(0);
      const hasher = sum ? checksummer(sum.alg) : undefined;
      let n = 0;
      // Written at positions through the descriptor we hold, summed as it passes.
      const sink = new Writable({
        write(chunk: Buffer, _e, cb) {
          file.write(chunk, 0, chunk.length, n).then(() => {
            n += chunk.length;
            hasher?.update(chunk);
            o.onBytes?.(chunk.length);
            cb();
          }, cb);
        },
      });
      const r = await runXrd(client, cred, hop, "xrdcp", ["--nopbar", "--silent", hop.wire, "-"], { signal: o.signal, sink });
      if (r.exitCode !== 0) {
        if (r.said.redirect) return { redirect: r.said.redirect };
        throw failure("xrdcp", hop.url, cred.presents, r.exitCode, r.said.tail);
      }
      return { done: { bytes: n, got: hasher?.digest() } };
    });
    if (o.size !== undefined && bytes !== o.size)
      throw new TransferError(`size mismatch for ${redact(given)}: got ${bytes} bytes, expected ${o.size}`, true);
    if (sum?.expected && got !== undefined && !sameDigest(got, sum.expected))
      throw checksumMismatch(sum.alg, got, sum.expected, `for ${redact(given)}`);
    await rename(dest.dir.at(part), dest.dir.at(dest.name));
    if (sum && got !== undefined) o.onChecksum?.(`${sum.alg}:${got}`);
    return bytes;
  } finally {
    await fh?.close().catch(() => undefined);
    await unlink(dest.dir.at(part)).catch(() => undefined);
    await cred.cleanup();
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

/**
 * Uploads from our descriptor (read at positions: each hop sends the file from its start);
 * `--path` creates missing directories, `--force` on overwrite=yes. The checksum the server
 * reports is asked of the server that took the file.
 */
export async function xrootdUpload(
  client: TransferClient,
  file: UploadSource,
  given: string,
  o: { signal: AbortSignal; overwrite: boolean; checksum?: string | undefined },
): Promise<number> {
  const cred = await xrdCredentialEnv(client, given);
  try {
    const args = ["--nopbar", "--silent", "--path", "--posc", ...(o.overwrite ? ["--force"] : []), "-"];
    const landed = await followRedirects<Hop>(client, given, async (hop) => {
      const r = await runXrd(client, cred, hop, "xrdcp", [...args, hop.wire], {
        signal: o.signal,
        feed: () => Readable.from(readAt(file)),
      });
      if (r.exitCode === 0) return { done: hop };
      if (r.said.redirect) return { redirect: r.said.redirect };
      throw failure("xrdcp to", hop.url, cred.presents, r.exitCode, r.said.tail);
    });
    const sum = parseChecksum(o.checksum);
    if (sum?.expected) {
      const { path } = hostAndPath(landed.url);
      const value = await followRedirects<string>(client, landed.url, async (hop) => {
        const q = await runXrd(client, cred, hop, "xrdfs", [hostAndPath(hop.wire).server, "query", "checksum", path], { signal: o.signal });
        if (q.exitCode !== 0 && q.said.redirect) return { redirect: q.said.redirect };
        // "adler32 3d1ae86e"; a server without checksums answers an error, which is not a mismatch.
        return { done: q.exitCode === 0 ? q.stdout : "" };
      });
      const [alg, reported] = value.trim().split(/\s+/);
      if (alg?.toLowerCase() === sum.alg && reported && !sameDigest(reported, sum.expected)) {
        throw checksumMismatch(sum.alg, reported, sum.expected, `reported by ${redact(given)} after the upload`);
      }
    }
    return file.size;
  } finally {
    await cred.cleanup();
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
 * `xrdfs <server> stat <path>` with the job's credential, through the same runner, settings,
 * redirect checks and destination policy as xrdcp. Not found, no permission and a refused
 * authentication are an answer (allowed: false); anything else is a retryable error.
 */
export async function xrootdStat(client: TransferClient, given: string, signal: AbortSignal): Promise<XrdStat> {
  const cred = await xrdCredentialEnv(client, given);
  try {
    const { path } = hostAndPath(given);
    return await followRedirects(client, given, async (hop): Promise<HopResult<XrdStat>> => {
      const r = await runXrd(client, cred, hop, "xrdfs", [hostAndPath(hop.wire).server, "stat", path], { signal });
      const out = r.stdout;
      if (r.exitCode === 0) {
        const size = /^Size:\s+(\d+)/m.exec(out)?.[1];
        return {
          done: {
            allowed: true,
            status: 200,
            size: size === undefined ? undefined : Number(size),
            mtime: /^MTime:\s+(.+)$/m.exec(out)?.[1]?.trim(),
          },
        };
      }
      if (r.said.redirect) return { redirect: r.said.redirect };
      const text = (r.said.tail || out).trim().split("\n").pop() ?? "";
      if (/Auth failed|authentication failed/i.test(text))
        return { done: { allowed: false, status: 401, reason: `authentication refused (${cred.presents}): ${text}` } };
      if (/No such file|not found/i.test(text)) return { done: { allowed: false, status: 404, reason: text } };
      if (/Permission denied|not authorized/i.test(text)) return { done: { allowed: false, status: 403, reason: text } };
      throw new TransferError(`xrdfs stat ${redact(given)}: ${text || `exit ${r.exitCode}`}`, true);
    });
  } finally {
    await cred.cleanup();
  }
}
