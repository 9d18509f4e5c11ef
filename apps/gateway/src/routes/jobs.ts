import type { Context, Hono } from "hono";
import { type BulkItem, bulkResultsDoc } from "@ce/glue2";
import { REST_STATES, type RestState, isRestState } from "@ce/model";
import type { AppEnv, Identity } from "../context.js";
import { BadRequest, CeError, MethodNotAllowed, NotFound } from "../errors.js";
import { requireFullProxy, requireScope } from "../middleware/identity/scopes.js";
import { formatOf, isPageRequest, respond, sendRendered, sendStreamed } from "../render.js";
import { mediaType, readTextBody } from "../services/body.js";
import { ACTION_SCOPE, BULK_ACTIONS, bulkStatus, isBulkAction, runBulk } from "../services/bulk.js";
import { bulkInfoText } from "../services/bulkinfo.js";
import { renderBulkStatus } from "../services/bulkstatus.js";
import { idListKind, parseIdList } from "../services/idlist.js";
import { descriptionLanguage } from "../services/descriptions.js";
import { STREAM_MIN_JOBS, renderJobList, streamJobList } from "../services/joblist.js";
import { submitJobs } from "../services/submit.js";
import { ownedJob } from "../services/session/index.js";
import { jobListPage, parseListQuery } from "../pages/joblist.js";
import { jobPage } from "../pages/job.js";
import { postBulkForm, postJobForm } from "../pages/actions.js";

/** E3 list, E4 submission, E5 bulk management on `<base>/jobs`. */
export function jobRoutes(r: Hono<AppEnv>): void {
  r.get("/:version/jobs", listJobs);
  r.post("/:version/jobs", async (c) => {
    const action = c.req.query("action");
    if (action === "new") return submit(c);
    if (isBulkAction(action)) return bulk(c, action);
    // The job list's bulk form (pages/actions.tsx): a browser's form post, no `action` parameter.
    if (action === undefined && isFormPost(c)) return postBulkForm(c);
    const known = ["new", ...BULK_ACTIONS].join(", ");
    throw new BadRequest(
      action ? `Unknown action ${JSON.stringify(action)}; one of ${known}` : `Missing action parameter; one of ${known}`,
      "BAD_ACTION",
    );
  });
  r.all("/:version/jobs", () => {
    throw new MethodNotAllowed(["GET", "HEAD", "POST"]);
  });
  // `GET /jobs/<id>` is not a resource of the interface (A-REX: "Missing job sub-resource"); a
  // browser gets the job page there, and its buttons post forms to it (pages/).
  r.all("/:version/jobs/:id", async (c) => {
    if (isPageRequest(c)) {
      requireScope(c, "jobinfo");
      return jobPage(c, await ownedJob(c, c.req.param("id") ?? ""));
    }
    // Only a browser's form post (HTML negotiated): programs keep the interface's 404.
    if (c.req.method.toUpperCase() === "POST" && isFormPost(c)) return postJobForm(c, c.req.param("id") ?? "");
    throw new NotFound("Missing job sub-resource: use /jobs/<id>/session or /jobs/<id>/diagnose/<file>", "MISSING_SUBRESOURCE");
  });
}

/** A browser's form post (HTML negotiated, form-encoded body): what only the pages send. */
const isFormPost = (c: Context<AppEnv>) => formatOf(c) === "html" && mediaType(c) === "application/x-www-form-urlencoded";

function identityOf(c: Context<AppEnv>): Identity {
  const id = c.get("identity");
  if (!id) throw new CeError(401, "NO_CREDENTIAL", "Authentication required");
  return id;
}

/** `state` filter: comma-separated REST state names; an unknown name is a 400 naming it. */
export function parseStateFilter(raw: string | undefined): RestState[] | undefined {
  if (raw === undefined) return undefined;
  const names = raw
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
  const unknown = names.filter((n) => !isRestState(n));
  if (unknown.length > 0) {
    throw new BadRequest(
      `Unknown job state ${unknown.map((n) => JSON.stringify(n)).join(", ")} in state filter; states are ${REST_STATES.join(", ")}`,
      "BAD_STATE",
    );
  }
  return [...new Set(names as RestState[])];
}

async function listJobs(c: Context<AppEnv>): Promise<Response> {
  requireScope(c, "jobinfo");
  const owner = identityOf(c).subject;
  const states = parseStateFilter(c.req.query("state"));
  const fmt = formatOf(c);
  // Browsers: the job table (pages/joblist.tsx), with its own sort and page parameters.
  if (fmt === "html") return jobListPage(c, parseListQuery(c, states));
  const jobs = await c.get("services").jobs.list(owner, states);
  if (jobs.length < STREAM_MIN_JOBS) return sendRendered(c, renderJobList(jobs, fmt), fmt);
  const { length, body } = streamJobList(jobs, fmt);
  return sendStreamed(c, body, length, fmt);
}

const POSITIVE = /^[1-9][0-9]{0,8}$/;

function positiveParam(c: Context<AppEnv>, name: string): number | undefined {
  const v = c.req.query(name);
  if (v === undefined) return undefined;
  if (!POSITIVE.test(v)) throw new BadRequest(`${name} must be a positive integer, got ${JSON.stringify(v)}`, "BAD_INSTANCES");
  return Number(v);
}

async function submit(c: Context<AppEnv>): Promise<Response> {
  requireScope(c, ACTION_SCOPE.new);
  requireFullProxy(c, "submit jobs");
  const s = c.get("services");
  const version = c.get("version");
  // The 1.1 parameters do not exist in 1.0; A-REX ignores them there, and so do we.
  let queue: string | undefined;
  let delegationId: string | undefined;
  let instances: number | undefined;
  let instancesMin: number | undefined;
  if (version === "1.1") {
    queue = c.req.query("queue") || undefined;
    delegationId = c.req.query("delegation_id") || undefined;
    instances = positiveParam(c, "instances");
    instancesMin = positiveParam(c, "instances_min");
    if (instancesMin !== undefined) instances ??= 1;
    if (instances !== undefined && instancesMin !== undefined && instancesMin > instances) {
      throw new BadRequest(`instances_min (${instancesMin}) is larger than instances (${instances})`, "BAD_INSTANCES");
    }
  }
  // The type before the body: a refused one (a form's, another site's) costs no read.
  const contentType = mediaType(c);
  descriptionLanguage(contentType);
  const body = await readTextBody(c, s.config.gateway.limits.descriptionBytes, "Job description");
  const items = await submitJobs(s, {
    version,
    identity: identityOf(c),
    body,
    contentType,
    queue,
    delegationId,
    instances,
    instancesMin,
    requestId: c.get("requestId"),
    clientHost: peerAddress(c),
    clientSoftware: c.req.header("user-agent"),
    log: c.get("log"),
    hold: c.get("hold"),
  });
  return respond(c, bulkResultsDoc(items.map(asSubmitted)), { status: 201, title: "Submitted jobs" });
}

/**
 * E4: a created item says ACCEPTING, the state the interface gives every successful submission,
 * whatever the record holds: jobs that only wait for the client's uploads are stored already
 * admitted (PREPARING), an internal shortcut clients must not see (tests/wire/submission.test.ts).
 */
function asSubmitted(item: BulkItem): BulkItem {
  return item.statusCode === 201 && item.state !== undefined ? { ...item, state: SUBMITTED_STATE } : item;
}
const SUBMITTED_STATE: RestState = "ACCEPTING";

async function bulk(c: Context<AppEnv>, action: (typeof BULK_ACTIONS)[number]): Promise<Response> {
  requireScope(c, ACTION_SCOPE[action]);
  if (action === "restart") requireFullProxy(c, "restart jobs");
  const s = c.get("services");
  const { idListBytes, idsPerRequest } = s.config.gateway.limits;
  const contentType = mediaType(c);
  idListKind(contentType); // 415 before the body is read
  const body = await readTextBody(c, idListBytes, "Job id list");
  const ids = parseIdList(body, contentType, idsPerRequest); // 413 TOO_MANY_IDS past the cap
  // Deployed clients require 201 for every action (decisions #1); the interface text states 201
  // only for info, so the strict switch answers the plain 200 for the others.
  const status = s.config.compat.strictSpecCodes && action !== "info" ? 200 : 201;
  const fmt = formatOf(c);
  // The hottest requests: rendered straight to text (no element tree) in JSON and XML.
  if (action === "status" && fmt !== "html")
    return sendRendered(c, renderBulkStatus(await bulkStatus(s, ids, identityOf(c)), fmt), fmt, { status });
  if (action === "info" && fmt !== "html") return sendRendered(c, await bulkInfoText(s, ids, identityOf(c), fmt), fmt, { status });
  const items = await runBulk(s, action, ids, { identity: identityOf(c), requestId: c.get("requestId"), log: c.get("log") });
  return respond(c, bulkResultsDoc(items), { status, title: `Jobs: ${action}` });
}

function peerAddress(c: Context<AppEnv>): string | undefined {
  const a = c.env?.incoming?.socket.remoteAddress;
  return a?.startsWith("::ffff:") ? a.slice(7) : a;
}
