import type { Context } from "hono";
import { Hono } from "hono";
import { fileq, JOB_ID_RE, NODE_CAPABILITY_RE, nodeCapabilityMatches, readNodeCapabilityOp } from "@ce/controldir";
import { createFileIn, Dir, SessionFsError, walkFiles } from "@ce/sessionfs";
import type { InternalState } from "@ce/model";
import type { JobRecord } from "@ce/store";
import { rename, unlink } from "node:fs/promises";
import type { AppEnv } from "../context.js";
import { BadRequest, Forbidden, MethodNotAllowed, NotFound, PayloadTooLarge, Unauthorized } from "../errors.js";
import { parseSessionPath, putFile, rawTargetPath, readEntry } from "../services/session/index.js";

/**
 * `<mount>/node/1/jobs/<id>/…`: what a batch job on a node that shares no file system with the CE
 * (`lrms.sharedSession: false`) fetches and sends back, with the job's node capability as a bearer
 * token (@ce/controldir node-capability.ts). Not under `<mount>/rest`: the bearer is no grid
 * identity (no certificate, no token issuer) and gets no other route. What it may do, for its own
 * job only and only while the batch job runs (SUBMIT, INLRMS, CANCELING):
 *
 * - `GET  files`              the session's regular files, NUL-separated relative paths (links, specials, hard links left out);
 * - `GET  session/<path>`     one file of the session (the client download code: no link followed);
 * - `PUT  session/<path>`     one output into the session (the client upload code: quota, names, no links);
 * - `PUT  batch/<name>`       `diag`, `comment` or `lrms_done` into the job's batch dir, size-capped;
 *                             `lrms_done` rings the JEM's doorbell.
 *
 * A capability that does not match the job's stored hash is answered as a missing job: a stolen or
 * replayed one names no other job's files, and the answer says nothing about which jobs exist.
 */

/** Internal states in which the batch job may still fetch and send (the submission may race the transition). */
const RUNNING: ReadonlySet<InternalState> = new Set(["SUBMIT", "INLRMS", "CANCELING"]);

/** The batch facts a node sends, with the most the JEM will read of each (priv/collect.ts). */
const BATCH_FACTS: Readonly<Record<string, number>> = { diag: 64 * 1024, comment: 1024 * 1024, lrms_done: 64 * 1024 };
/** Entries listed by `files` at most (a job's session with more is refused, not cut short). */
const LIST_MAX = 100_000;

export function nodeRoutes(): Hono<AppEnv> {
  const r = new Hono<AppEnv>({ strict: false });
  r.get("/jobs/:id/files", listFiles);
  r.on(["GET", "HEAD"], "/jobs/:id/session/*", readFile);
  r.put("/jobs/:id/session/*", writeFile);
  r.put("/jobs/:id/batch/:name", writeBatchFact);
  r.all("/jobs/:id/*", async (c) => {
    await bearerJob(c, c.req.param("id") ?? "");
    throw new MethodNotAllowed(["GET", "HEAD", "PUT"]);
  });
  return r;
}

/** The job the bearer's capability opens, or the refusal. */
async function bearerJob(c: Context<AppEnv>, id: string): Promise<JobRecord> {
  const { control, jobs } = c.get("services");
  const token = /^Bearer (\S+)$/.exec(c.req.header("authorization") ?? "")?.[1];
  if (token === undefined || !NODE_CAPABILITY_RE.test(token))
    throw new Unauthorized(
      "This route takes a batch job's node capability (Authorization: Bearer cenode1_…)",
      'Bearer realm="ce-node"',
      "NODE_CAPABILITY_REQUIRED",
    );
  if (!JOB_ID_RE.test(id)) throw new NotFound("Job not found", "JOB_NOT_FOUND");
  const stored = await fileq.one(readNodeCapabilityOp(control, id));
  if (!nodeCapabilityMatches(token, stored ?? undefined)) throw new NotFound("Job not found", "JOB_NOT_FOUND");
  const job = await jobs.get(id);
  if (!job) throw new NotFound("Job not found", "JOB_NOT_FOUND");
  if (!RUNNING.has(job.state))
    throw new Forbidden(
      `The job's batch run is over (${job.state}): its node capability opens nothing any more`,
      "NODE_CAPABILITY_EXPIRED",
    );
  return job;
}

function sessionPathOf(c: Context<AppEnv>, id: string) {
  const { config } = c.get("services");
  return parseSessionPath(rawTargetPath(c), `${config.mountPath}/node/1/jobs/${id}/session`);
}

async function listFiles(c: Context<AppEnv>): Promise<Response> {
  const job = await bearerJob(c, c.req.param("id") ?? "");
  const root = c.get("services").control.sessionDir(job.id);
  const walked = await walkFiles(root, [], LIST_MAX).catch((e: unknown) => {
    if (e instanceof SessionFsError && e.kind === "too-large") throw new PayloadTooLarge("session listing (entries)", LIST_MAX);
    throw e;
  });
  // Session-relative, without the leading slash: what the node appends to `session/`.
  const body = walked.files.map((f) => `${f.replace(/^\/+/, "")}\0`).join("");
  return c.body(body, 200, { "Content-Type": "application/octet-stream" });
}

async function readFile(c: Context<AppEnv>): Promise<Response> {
  const id = c.req.param("id") ?? "";
  const job = await bearerJob(c, id);
  const services = c.get("services");
  const found = await readEntry({
    root: services.control.sessionDir(job.id),
    path: sessionPathOf(c, id),
    head: c.req.method === "HEAD",
    range: c.req.header("range"),
    outgoing: c.env?.outgoing,
    requestId: c.get("requestId"),
    listingEntries: services.config.gateway.limits.listingEntries,
    authorize: (kind) => {
      if (kind !== "file") throw new BadRequest("A node fetches files only; the list is at files", "NOT_A_FILE");
    },
  });
  if (found.kind !== "file") throw new BadRequest("A node fetches files only; the list is at files", "NOT_A_FILE");
  return found.response;
}

async function writeFile(c: Context<AppEnv>): Promise<Response> {
  const id = c.req.param("id") ?? "";
  const job = await bearerJob(c, id);
  const services = c.get("services");
  await putFile(
    services,
    job,
    {
      root: services.control.sessionDir(job.id),
      path: sessionPathOf(c, id),
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

/** Reads at most `max` bytes of the body; more is 413. */
async function cappedBody(c: Context<AppEnv>, what: string, max: number): Promise<Buffer> {
  const declared = Number(c.req.header("content-length") ?? Number.NaN);
  if (Number.isFinite(declared) && declared > max) throw new PayloadTooLarge(what, max);
  const chunks: Buffer[] = [];
  let n = 0;
  const body = c.req.raw.body;
  if (body) {
    for await (const chunk of body) {
      n += chunk.byteLength;
      if (n > max) throw new PayloadTooLarge(what, max);
      chunks.push(Buffer.from(chunk));
    }
  }
  return Buffer.concat(chunks);
}

/**
 * A batch fact into the job's batch dir `<session>.lrms` (the account's, 2770 with the CE's
 * group): a fresh name (O_EXCL|O_NOFOLLOW) renamed over the old one within the held directory, so
 * the JEM reads a whole file or the previous one, and nothing the job planted is followed.
 */
async function writeBatchFact(c: Context<AppEnv>): Promise<Response> {
  const id = c.req.param("id") ?? "";
  const name = c.req.param("name") ?? "";
  const job = await bearerJob(c, id);
  const max = Object.hasOwn(BATCH_FACTS, name) ? BATCH_FACTS[name] : undefined;
  if (max === undefined)
    throw new NotFound(`No batch fact ${JSON.stringify(name.slice(0, 40))}: diag, comment or lrms_done`, "NO_SUCH_FACT");
  const content = await cappedBody(c, `batch fact ${name}`, max);
  const { control } = c.get("services");
  const dir = await Dir.open(control.batchDir(job.id)).catch((e: unknown) => {
    throw new Forbidden(`The job's batch directory cannot be opened: ${(e as NodeJS.ErrnoException).code ?? String(e)}`, "NO_BATCH_DIR");
  });
  try {
    const tmp = `.${name}.node-${process.pid}-${Math.random().toString(36).slice(2)}`;
    const h = await createFileIn(dir, tmp, `/${tmp}`, 0o660);
    try {
      await h.writeFile(content);
    } finally {
      await h.close();
    }
    await rename(dir.at(tmp), dir.at(name)).catch(async (e: unknown) => {
      await unlink(dir.at(tmp)).catch(() => undefined);
      throw e;
    });
  } finally {
    await dir.close();
  }
  if (name === "lrms_done") await ringDoorbell(c, job.id);
  c.get("log")?.debug({ jobId: job.id, fact: name, bytes: content.length }, "batch fact from the node");
  return c.body(null, 200);
}

/** The JEM's completion doorbell (watcher.ts): best effort, its periodic scan finds lrms_done anyway. */
async function ringDoorbell(c: Context<AppEnv>, id: string): Promise<void> {
  const { control } = c.get("services");
  try {
    const events = await Dir.open(control.eventsDir());
    try {
      await (await createFileIn(events, id, `/${id}`, 0o600)).close();
    } finally {
      await events.close();
    }
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "EEXIST") c.get("log")?.debug({ err: e, jobId: id }, "doorbell not rung");
  }
}
