import type { ServerResponse } from "node:http";
import { closeHandle } from "@ce/sessionfs";
import { SESSION_TOKEN_FILE, type JobRecord } from "@ce/store";
import { Forbidden } from "../../errors.js";
import type { Logger } from "pino";
import type { Services } from "../../context.js";
import { SessionAccounts } from "./accounting.js";
import { fileResponse } from "./download.js";
import { fsError } from "./errors.js";
import { openTarget, removePath, type Entry, type Target } from "./fs.js";
import { checkDeclaredLength, drainBody } from "./intake.js";
import { davHref, type SessionPath } from "./path.js";
import { type DavEntry, listCapped, multistatusXml, parseDepth } from "./propfind.js";
import { type PutRequest, UploadWriter } from "./upload.js";

/**
 * The operations of E6 (`<base>/jobs/<id>/session[/<path>]`, docs/interface.md E6, decisions
 * #13–#15) that routes/session.ts calls once it has parsed the request (job, path, headers). Every
 * filesystem access goes through fs.ts, which never follows a symlink.
 */

/** PROPFIND bodies are ignored, but read (bounded) so the connection stays usable. */
const PROPFIND_BODY_LIMIT = 64 * 1024;

async function close(t: Target): Promise<void> {
  if (t.kind === "file") await closeHandle(t.handle, "session file");
  else await t.dir.close();
}

export interface ReadRequest {
  root: string;
  path: SessionPath;
  head: boolean;
  range: string | undefined;
  /** The Node response when there is one: a file is then written to it directly. */
  outgoing: ServerResponse | undefined;
  requestId: string;
  listingEntries: number;
  /** Checks the caller may read what was found (throws); called before anything is read. */
  authorize(kind: "file" | "dir"): void;
  /**
   * How a file is presented when a page asked (pages/fileview.ts): its type and extra headers.
   * Absent for every REST client: `application/octet-stream`, no disposition.
   */
  presentation?: { contentType: string; headers: Record<string, string> } | undefined;
}

export type ReadResult = { kind: "file"; response: Response } | { kind: "dir"; listing: { files: Entry[]; dirs: Entry[] } };

/** GET/HEAD: a file is streamed (Range aware, download.ts), a directory is listed (decisions #13). */
export async function readEntry(req: ReadRequest): Promise<ReadResult> {
  // The job's bearer token is handed out only by `action=get` of its delegation (decisions #36),
  // whoever runs the gateway: a compute.read caller must not read it here instead.
  if (req.path.segments.length === 1 && req.path.segments[0] === SESSION_TOKEN_FILE)
    throw new Forbidden(
      `${SESSION_TOKEN_FILE} is the job's bearer token (ENV/TOKEN): it is not served from the session; its delegation's action=get gives it to a caller with compute.create`,
      "SESSION_TOKEN_FILE",
    );
  const target = await openTarget(req.root, req.path.segments).catch((e: unknown) => fsError(e, "read"));
  try {
    req.authorize(target.kind);
  } catch (e) {
    await close(target);
    throw e;
  }
  if (target.kind === "file") {
    const response = await fileResponse(target.handle, target.stat, {
      contentType: req.presentation?.contentType ?? "application/octet-stream",
      head: req.head,
      range: req.range,
      outgoing: req.outgoing,
      headers: req.presentation?.headers,
      extraHeaders: { "X-Request-Id": req.requestId },
    });
    return { kind: "file", response };
  }
  try {
    return { kind: "dir", listing: await listCapped(target.dir, req.path.normalized, req.listingEntries) };
  } finally {
    await target.dir.close();
  }
}

/**
 * PUT (decisions #14): the upload writer (upload.ts) through its states, then the debug line.
 * `If-None-Match: *` is ignored on purpose (ARC clients send it and would fail on 412).
 */
export async function putFile(services: Services, job: JobRecord, req: PutRequest, log?: Logger): Promise<void> {
  const writer = new UploadWriter(req, new SessionAccounts(services, job), log);
  const complete = await writer.run();
  log?.debug({ jobId: job.id, path: req.path.normalized, bytes: writer.received, complete }, "session upload");
}

/**
 * DELETE (decisions #15): file or whole directory (the session root too). A deleted file's bytes,
 * or all of the job's for the root, no longer count against the session quota.
 */
export async function deleteEntry(services: Services, job: JobRecord, root: string, path: SessionPath): Promise<void> {
  const removed = await removePath(root, path.segments).catch((e: unknown) => fsError(e, "delete"));
  await new SessionAccounts(services, job).deleted(path.normalized, removed);
}

export interface PropfindRequest {
  root: string;
  path: SessionPath;
  /** The session root's name in the answer (the job id). */
  rootName: string;
  depth: string | undefined;
  contentLength: string | undefined;
  body: ReadableStream<Uint8Array> | null;
  listingEntries: number;
}

/**
 * PROPFIND (decisions #13): Depth 0/1 (absent or infinity → 1), `DAV:multistatus` XML, the
 * collection itself first. A missing path is 404 for the whole request.
 */
export async function propfindEntry(req: PropfindRequest): Promise<string> {
  const { path } = req;
  const depth = parseDepth(req.depth);
  checkDeclaredLength(req.contentLength, PROPFIND_BODY_LIMIT, "PROPFIND body");
  await drainBody(req.body, PROPFIND_BODY_LIMIT, "PROPFIND body");

  const target = await openTarget(req.root, path.segments).catch((e: unknown) => fsError(e, "read"));
  const name = path.segments[path.segments.length - 1] ?? req.rootName;
  const entries: DavEntry[] = [];
  if (target.kind === "file") {
    await closeHandle(target.handle, path.normalized);
    entries.push({ href: path.requestHref, displayName: name, stat: target.stat, dir: false });
  } else {
    try {
      entries.push({ href: `${path.requestHref}/`, displayName: name, stat: target.stat, dir: true });
      if (depth === 1) {
        const { files, dirs } = await listCapped(target.dir, path.normalized, req.listingEntries);
        for (const d of dirs)
          entries.push({ href: davHref(path.requestHref, [d.name], true), displayName: d.name, stat: d.stat, dir: true });
        for (const f of files)
          entries.push({ href: davHref(path.requestHref, [f.name], false), displayName: f.name, stat: f.stat, dir: false });
      }
    } finally {
      await target.dir.close();
    }
  }
  return multistatusXml(entries);
}
