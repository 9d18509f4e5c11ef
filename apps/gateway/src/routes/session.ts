import { fstatSync } from "node:fs";
import type { FileHandle } from "node:fs/promises";
import { closeHandle, numOf, type OwnedFd } from "@ce/sessionfs";
import type { Context, Hono } from "hono";
import { sessionListingDoc } from "@ce/glue2";
import { completeUpload, SessionBytes } from "@ce/store";
import type { AppEnv } from "../context.js";
import { BadRequest, CeError, Forbidden, MethodNotAllowed, NotFound, PayloadTooLarge } from "../errors.js";
import { requireScope } from "../middleware/identity/scopes.js";
import { formatOf, respond } from "../render.js";
import { sessionListingPage } from "../pages/session.js";
import { BodyAborted, checkDeclaredLength, drainBody, receiveBody, writeBody } from "../services/session/receive.js";
import { DIRECT_MIN, reopenDirect } from "../services/session/direct.js";
import { openForWrite, openTarget, removePath, SessionFsError, type Target } from "../services/session/fs.js";
import { jobWithSession, ownedJob } from "../services/session/job.js";
import { davHref, parseSessionPath, rawTargetPath, type SessionPath } from "../services/session/path.js";
import { type DavEntry, listCapped, multistatusXml, parseDepth } from "../services/session/propfind.js";
import { fileResponse } from "../services/session/download.js";
import { parseContentRange, SessionQuotaExceeded, UploadQuota, UploadTracker } from "../services/session/accounting.js";

/**
 * E6 — `<base>/jobs/<id>/session[/<path>]`: files of the job's session directory (docs/interface.md E6,
 * decisions #13–#15). Every filesystem access goes through services/session-fs.ts, which never
 * follows a symlink; the path comes from the raw request target (services/session-path.ts).
 */
export const SESSION_METHODS = ["GET", "HEAD", "PUT", "DELETE", "PROPFIND"] as const;

/** PROPFIND bodies are ignored, but read (bounded) so the connection stays usable. */
const PROPFIND_BODY_LIMIT = 64 * 1024;

export function sessionRoutes(r: Hono<AppEnv>): void {
  r.all("/:version/jobs/:id/session", handle);
  r.all("/:version/jobs/:id/session/*", handle);
}

async function handle(c: Context<AppEnv>): Promise<Response> {
  const method = c.req.method.toUpperCase();
  const id = c.req.param("id") ?? "";
  switch (method) {
    case "GET":
    case "HEAD":
      return read(c, id, method === "HEAD");
    case "PUT":
      return put(c, id);
    case "DELETE":
      return del(c, id);
    case "PROPFIND":
      return propfind(c, id);
    default:
      // Job lookup first, as A-REX: a missing job is 404 whatever the method.
      await ownedJob(c, id);
      throw new MethodNotAllowed(SESSION_METHODS);
  }
}

function sessionPath(c: Context<AppEnv>, id: string): SessionPath {
  const { config } = c.get("services");
  const version = c.get("version") ?? c.req.param("version");
  return parseSessionPath(rawTargetPath(c), `${config.mountPath}/rest/${version}/jobs/${id}/session`);
}

class Conflict extends CeError {
  constructor(message: string) { super(409, "CONFLICT", message); }
}

/** Filesystem refusals → HTTP. Reading: everything that is not a plain file/dir is simply not found. */
function fsError(e: unknown, op: "read" | "write" | "delete"): never {
  if (!(e instanceof SessionFsError)) throw e;
  if (e.kind === "too-long") throw new BadRequest("Invalid session path: path too long", "BAD_PATH");
  // A job may chmod its own files away from the CE group: that is the owner's choice, said plainly.
  if (e.kind === "denied") throw new Forbidden(`Permission denied: ${e.at} is not accessible to the CE (the job changed its permissions)`, "SESSION_DENIED");
  if (e.kind === "missing" && e.at === "/" && op === "write") {
    // Recreated by the CE it would not be the mapped account's (owner, mode): it stays deleted.
    throw new CeError(409, "SESSION_DELETED", "The session directory of this job was deleted; it is not recreated");
  }
  if (e.kind === "missing" || op !== "write") throw new NotFound("Not found");
  switch (e.kind) {
    case "symlink":
      throw new Conflict(`Cannot write ${e.at}: it is or passes through a symbolic link, which is never followed`);
    case "not-dir":
      throw new Conflict(`Cannot write: ${e.at} exists and is not a directory`);
    case "is-dir":
      throw new Conflict(`Cannot write ${e.at}: it is a directory; PUT stores files only`);
    default:
      throw new Conflict(`Cannot write ${e.at}: not a regular file`);
  }
}

async function close(t: Target): Promise<void> {
  if (t.kind === "file") await closeHandle(t.handle, "session file");
  else await t.dir.close();
}

/** GET/HEAD: a file is streamed (Range aware), a directory is listed (decisions #13). */
async function read(c: Context<AppEnv>, id: string, head: boolean): Promise<Response> {
  const job = await jobWithSession(c, id);
  const p = sessionPath(c, id);
  const target = await openTarget(c.get("services").control.sessionDir(job.id), p.segments).catch((e: unknown) => fsError(e, "read"));
  try {
    requireScope(c, target.kind === "file" ? "dataread" : "datainfo");
  } catch (e) {
    await close(target);
    throw e;
  }
  if (target.kind === "file") {
    return fileResponse(target.handle, target.stat, {
      contentType: "application/octet-stream",
      head,
      range: c.req.header("range"),
      outgoing: c.env?.outgoing,
      extraHeaders: { "X-Request-Id": c.get("requestId") },
    });
  }
  let listing;
  try {
    listing = await listCapped(target.dir, p.normalized, c.get("services").config.gateway.limits.listingEntries);
  } finally {
    await target.dir.close();
  }
  if (formatOf(c) === "html") return sessionListingPage(c, job, p, listing);
  const doc = sessionListingDoc({
    files: listing.files.map((f) => ({ name: f.name, size: f.stat.size })),
    dirs: listing.dirs.map((d) => d.name),
  });
  return respond(c, doc);
}

/**
 * PUT (decisions #14): streams the body to disk, creating parent directories; truncates unless a
 * `Content-Range` gives the offset; `If-None-Match: *` is ignored on purpose (ARC clients send it
 * and would fail on 412). Answers exactly 200, as the Python client requires. The session-bytes
 * quota is checked before anything is written or truncated when the length is declared (the old
 * content stays on refusal); a chunked whole-file upload refused midway is removed again.
 */
async function put(c: Context<AppEnv>, id: string): Promise<Response> {
  requireScope(c, "datawrite");
  const services = c.get("services");
  const job = await jobWithSession(c, id);
  const p = sessionPath(c, id);
  if (p.segments.length === 0) throw new Conflict("Cannot write the session directory itself: PUT stores files only");
  const limit = services.config.gateway.limits.uploadBytes;
  checkDeclaredLength(c.req.header("content-length"), limit, "Upload");
  const range = parseContentRange(c.req.header("content-range"));
  const offset = range?.start ?? 0;
  if (offset >= limit) throw new PayloadTooLarge("Upload", limit);
  if (range?.total !== undefined && range.total > limit) throw new PayloadTooLarge("Upload (Content-Range total)", limit);

  const root = services.control.sessionDir(job.id);
  const quota = new UploadQuota(sessionBytes(c), job.owner, job.id);
  const declared = declaredLength(c.req.header("content-length"));
  if (declared !== undefined) {
    const before = await currentSize(root, p.segments);
    await quota.ensure((range ? Math.max(before, offset + declared) : declared) - before);
  }

  const handle = await openForWrite(root, p.segments).catch((e: unknown) => fsError(e, "write"));
  let received = 0;
  let sizeBefore = 0;
  let discard = false;
  let directFd: OwnedFd | undefined;
  try {
    // Synchronous stat + begin: no other PUT of this file settles in between (see UploadQuota).
    sizeBefore = fstatSync(numOf(handle, p.normalized)).size;
    quota.begin(p.normalized, sizeBefore);
    const base = range ? sizeBefore : 0;
    // Only a file with content is truncated: ext4 flushes a file truncated to 0 when it is closed
    // (its replace-by-truncate heuristic), which held the reply to a new 1 GiB upload ~0.4 s.
    if (!range && sizeBefore > 0) await handle.truncate(0);
    const grow = (n: number) => quota.need(Math.max(base, offset + n) - sizeBefore);
    // The Node request itself when there is one (the deployed server): far cheaper than a web stream.
    const incoming = c.env?.incoming;
    // A large (or unannounced) body bypasses the page cache (services/session-direct.ts).
    if (incoming && (declared === undefined || declared >= DIRECT_MIN)) directFd = await reopenDirect(handle, "w");
    received = incoming
      ? await receiveBody(incoming, handle, offset, limit - offset, "Upload", grow, directFd)
      : await writeBody(c.req.raw.body, handle, offset, limit - offset, "Upload", (n) => grow(n) ?? Promise.resolve());
  } catch (e) {
    discard = e instanceof SessionQuotaExceeded && !range;
    if (discard) await handle.truncate(0).catch(() => undefined);
    // A client that went away mid-body is not a server error; nothing is reported as complete.
    if (e instanceof BodyAborted || (!(e instanceof CeError) && c.env?.incoming?.errored)) throw new BadRequest("Upload aborted by the client", "UPLOAD_ABORTED");
    throw e;
  } finally {
    // receiveBody settled only with no write in flight: both descriptors are ours alone now.
    await directFd?.close();
    const settled = quota.settle(sizeBefore, sizeOf(handle, sizeBefore));
    await closeHandle(handle, p.normalized);
    await settled.catch((err: unknown) => c.get("log")?.warn({ err, jobId: job.id }, "session quota not settled"));
    if (discard) await removePath(root, p.segments).catch(() => undefined);
  }

  const uploads = uploadTracker(c);
  const complete = await uploads.record(job.id, p.normalized, range, received);
  // input_status (append) + JEM doorbell, only while the job waits for inputs: @ce/store owns the rule.
  if (complete) {
    await completeUpload(services.control, job, p.normalized, () => services.advance.ring([job.id]));
  }
  c.get("log")?.debug({ jobId: job.id, path: p.normalized, bytes: received, complete }, "session upload");
  return c.body(null, 200);
}

function declaredLength(header: string | undefined): number | undefined {
  const n = header === undefined ? NaN : Number(header);
  return Number.isSafeInteger(n) && n >= 0 ? n : undefined;
}

/** Size of an open file now (`fallback` if it cannot be read). */
function sizeOf(handle: FileHandle, fallback: number): number {
  try {
    return fstatSync(numOf(handle, "session file")).size;
  } catch {
    return fallback;
  }
}

/** Size of the regular file the path names now (0 when missing or not a file): the quota baseline. */
async function currentSize(root: string, segments: readonly string[]): Promise<number> {
  const t = await openTarget(root, segments).catch(() => undefined);
  if (!t) return 0;
  await close(t);
  return t.kind === "file" ? t.stat.size : 0;
}

function sessionBytes(c: Context<AppEnv>): SessionBytes {
  const { config, redis, jobs } = c.get("services");
  return new SessionBytes(redis, jobs.keys.prefix, { perJob: config.quotas.sessionBytesPerJob, perOwner: config.quotas.sessionBytesPerOwner });
}

function uploadTracker(c: Context<AppEnv>): UploadTracker {
  const { config, redis, jobs } = c.get("services");
  return new UploadTracker(redis, jobs.keys.prefix, { maxRanges: config.gateway.limits.uploadRanges, maxFiles: config.gateway.limits.partialUploadsPerJob });
}

/**
 * DELETE (decisions #15): file or whole directory (the session root too); 202 as A-REX. A deleted
 * file's bytes, or all of the job's for the root, no longer count against the session quota.
 */
async function del(c: Context<AppEnv>, id: string): Promise<Response> {
  requireScope(c, "datawrite");
  const services = c.get("services");
  const job = await jobWithSession(c, id);
  const p = sessionPath(c, id);
  const root = services.control.sessionDir(job.id);
  // A file or a whole subtree gives back what it held; the session root gives back the job's usage.
  const removed = await removePath(root, p.segments).catch((e: unknown) => fsError(e, "delete"));
  await uploadTracker(c).forget(job.id, p.normalized);
  const bytes = sessionBytes(c);
  const freed = p.segments.length === 0 ? (await bytes.usage(job.owner, job.id)).job : removed;
  await bytes.release(job.owner, job.id, freed);
  return c.body(null, 202);
}

/**
 * PROPFIND (decisions #13): Depth 0/1 (absent or infinity → 1), 207 `DAV:multistatus`, the
 * collection itself first. A missing path is 404 for the whole request.
 */
async function propfind(c: Context<AppEnv>, id: string): Promise<Response> {
  requireScope(c, "datainfo");
  const services = c.get("services");
  const job = await jobWithSession(c, id);
  const p = sessionPath(c, id);
  const depth = parseDepth(c.req.header("depth"));
  checkDeclaredLength(c.req.header("content-length"), PROPFIND_BODY_LIMIT, "PROPFIND body");
  await drainBody(c.req.raw.body, PROPFIND_BODY_LIMIT, "PROPFIND body");

  const target = await openTarget(services.control.sessionDir(job.id), p.segments).catch((e: unknown) => fsError(e, "read"));
  const name = p.segments[p.segments.length - 1] ?? job.id;
  const entries: DavEntry[] = [];
  if (target.kind === "file") {
    await closeHandle(target.handle, p.normalized);
    entries.push({ href: p.requestHref, displayName: name, stat: target.stat, dir: false });
  } else {
    try {
      entries.push({ href: `${p.requestHref}/`, displayName: name, stat: target.stat, dir: true });
      if (depth === 1) {
        const { files, dirs } = await listCapped(target.dir, p.normalized, services.config.gateway.limits.listingEntries);
        for (const d of dirs) entries.push({ href: davHref(p.requestHref, [d.name], true), displayName: d.name, stat: d.stat, dir: true });
        for (const f of files) entries.push({ href: davHref(p.requestHref, [f.name], false), displayName: f.name, stat: f.stat, dir: false });
      }
    } finally {
      await target.dir.close();
    }
  }
  const body = multistatusXml(entries);
  return c.body(body, 207, { "Content-Type": "application/xml; charset=utf-8", "Content-Length": String(Buffer.byteLength(body)) });
}
