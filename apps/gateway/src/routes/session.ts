import type { Context, Hono } from "hono";
import { sessionListingDoc } from "@ce/glue2";
import type { AppEnv } from "../context.js";
import { MethodNotAllowed } from "../errors.js";
import { requireScope } from "../middleware/identity/scopes.js";
import { sessionListingPage } from "../pages/session.js";
import { filePresentation } from "../pages/fileview.js";
import { formatOf, respond } from "../render.js";
import {
  archiveResponse,
  deleteEntry,
  jobWithSession,
  ownedJob,
  parseSessionPath,
  propfindEntry,
  putFile,
  rawTargetPath,
  readEntry,
  type SessionPath,
} from "../services/session/index.js";

/**
 * E6 — `<base>/jobs/<id>/session[/<path>]`: files of the job's session directory (docs/interface.md
 * E6, decisions #13–#15). This file parses the request (method, job, the path from the raw request
 * target, headers, scopes) and calls services/session/ (its README.md traces an upload and a download).
 */
export const SESSION_METHODS = ["GET", "HEAD", "PUT", "DELETE", "PROPFIND"] as const;

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

/** GET/HEAD: a file is streamed (Range aware), a directory is listed (decisions #13). */
async function read(c: Context<AppEnv>, id: string, head: boolean): Promise<Response> {
  const services = c.get("services");
  const job = await jobWithSession(c, id);
  const p = sessionPath(c, id);
  // The job page's "download all" link; REST clients never ask.
  if (c.req.query("download") === "tar") {
    requireScope(c, "dataread");
    return archiveResponse({
      root: services.control.sessionDir(job.id),
      segments: p.segments,
      top: job.id,
      maxBytes: services.config.gateway.limits.archiveBytes,
      maxEntries: services.config.gateway.limits.listingEntries,
      head,
      log: c.get("log"),
    });
  }
  const found = await readEntry({
    root: services.control.sessionDir(job.id),
    path: p,
    head,
    range: c.req.header("range"),
    outgoing: c.env?.outgoing,
    requestId: c.get("requestId"),
    listingEntries: services.config.gateway.limits.listingEntries,
    authorize: (kind) => requireScope(c, kind === "file" ? "dataread" : "datainfo"),
    // Only the pages' own links ask (`?view=text`, `?download=1`); REST clients never do.
    presentation: filePresentation(c, p.segments),
  });
  if (found.kind === "file") return found.response;
  const { listing } = found;
  if (formatOf(c) === "html") return sessionListingPage(c, job, p, listing);
  const doc = sessionListingDoc({
    files: listing.files.map((f) => ({ name: f.name, size: f.stat.size })),
    dirs: listing.dirs.map((d) => d.name),
  });
  return respond(c, doc);
}

/** PUT (decisions #14): answers exactly 200, as the Python client requires. */
async function put(c: Context<AppEnv>, id: string): Promise<Response> {
  requireScope(c, "datawrite");
  const services = c.get("services");
  const job = await jobWithSession(c, id);
  await putFile(
    services,
    job,
    {
      root: services.control.sessionDir(job.id),
      path: sessionPath(c, id),
      contentLength: c.req.header("content-length"),
      contentRange: c.req.header("content-range"),
      incoming: c.env?.incoming,
      body: () => c.req.raw.body,
      limit: services.config.gateway.limits.uploadBytes,
    },
    c.get("log"),
  );
  return c.body(null, 200);
}

/** DELETE (decisions #15): file or whole directory (the session root too); 202 as A-REX. */
async function del(c: Context<AppEnv>, id: string): Promise<Response> {
  requireScope(c, "datawrite");
  const services = c.get("services");
  const job = await jobWithSession(c, id);
  await deleteEntry(services, job, services.control.sessionDir(job.id), sessionPath(c, id));
  return c.body(null, 202);
}

/** PROPFIND (decisions #13): 207 `DAV:multistatus`. */
async function propfind(c: Context<AppEnv>, id: string): Promise<Response> {
  requireScope(c, "datainfo");
  const services = c.get("services");
  const job = await jobWithSession(c, id);
  const body = await propfindEntry({
    root: services.control.sessionDir(job.id),
    path: sessionPath(c, id),
    rootName: job.id,
    depth: c.req.header("depth"),
    contentLength: c.req.header("content-length"),
    body: c.req.raw.body,
    listingEntries: services.config.gateway.limits.listingEntries,
  });
  return c.body(body, 207, { "Content-Type": "application/xml; charset=utf-8", "Content-Length": String(Buffer.byteLength(body)) });
}
