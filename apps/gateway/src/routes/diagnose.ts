import type { Context, Hono } from "hono";
import { buildActivityDocument, renderXml } from "@ce/glue2";
import { formatStatusFile } from "@ce/model";
import { activityInputFor } from "@ce/store";
import { isDiagnoseFile, renderFileList } from "@ce/controldir";
import type { AppEnv } from "../context.js";
import { MethodNotAllowed, NotFound } from "../errors.js";
import { requireScope } from "../middleware/identity/scopes.js";
import { fileResponse, ownedJob } from "../services/session/index.js";
import { isPageRequest } from "../render.js";
import { diagnoseIndexPage } from "../pages/job.js";

/**
 * E7 — `<base>/jobs/<id>/diagnose/<type>`: one of the 14 allowed control files (docs/interface.md E7),
 * never `proxy`, `spec` or any other private control file. Unknown type → 404 before the method
 * check, as A-REX; then scope `jobinfo`, job lookup, file (404 "Not found" when absent).
 */
export const DIAGNOSE_METHODS = ["GET", "HEAD"] as const;

export function diagnoseRoutes(r: Hono<AppEnv>): void {
  // No resource of the interface; a browser gets the index of the job's diagnose files.
  r.all("/:version/jobs/:id/diagnose", async (c) => {
    if (!isPageRequest(c)) unknownItem();
    requireScope(c, "jobinfo");
    return diagnoseIndexPage(c, await ownedJob(c, c.req.param("id") ?? ""));
  });
  r.all("/:version/jobs/:id/diagnose/:type", handle);
  r.all("/:version/jobs/:id/diagnose/:type/*", unknownItem);
}

function rendered(c: Context<AppEnv>, body: string, contentType: string): Response {
  c.header("content-type", contentType);
  c.header("content-length", String(Buffer.byteLength(body)));
  return c.req.method.toUpperCase() === "HEAD" ? c.body(null, 200) : c.body(body, 200);
}

function unknownItem(): never {
  throw new NotFound("Diagnostic item not found", "DIAGNOSE_ITEM_NOT_FOUND");
}

async function handle(c: Context<AppEnv>): Promise<Response> {
  const type = c.req.param("type") ?? "";
  // Exact match against the allow-list: no decoding tricks, no prefixes, no other control file.
  if (!isDiagnoseFile(type)) unknownItem();
  const method = c.req.method.toUpperCase();
  if (method !== "GET" && method !== "HEAD") throw new MethodNotAllowed(DIAGNOSE_METHODS);
  requireScope(c, "jobinfo");
  const job = await ownedJob(c, c.req.param("id") ?? "");
  const { control, config } = c.get("services");
  // `xml` (the job's GLUE2 ComputingActivity) is rendered from the record, the one truth, on
  // demand: no file is kept for it, so it cannot lag behind the record.
  if (type === "xml") {
    const body = renderXml(buildActivityDocument(activityInputFor(job, { hostname: new URL(config.endpoint.url).hostname })), {
      declaration: true,
    });
    return rendered(c, body, "application/xml");
  }
  // `status` likewise: the record's state in the file's words. The JEM keeps a `status` file for
  // its own repair after a crash, written at each move; the gateway writes none at submission.
  if (type === "status") return rendered(c, formatStatusFile(job.state, job.pending), "text/plain; charset=utf-8");
  // `input` / `output` (A-REX's file lists) are derived from the stored description: nothing
  // writes them.
  if (type === "input" || type === "output") {
    const body = renderFileList(type, await control.read(job.id, "spec"));
    if (body === undefined) throw new NotFound("Not found");
    return rendered(c, body, "text/plain; charset=utf-8");
  }
  let handle;
  try {
    handle = await control.openForRead(job.id, type);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === "ENOENT" || code === "ELOOP" || code === "ENOTDIR") throw new NotFound("Not found");
    throw e;
  }
  const stat = await handle.stat();
  if (!stat.isFile()) {
    await handle.close();
    throw new NotFound("Not found");
  }
  return fileResponse(handle, stat, {
    contentType: "text/plain; charset=utf-8",
    head: method === "HEAD",
    range: c.req.header("range"),
  });
}
