import { randomUUID } from "node:crypto";
import type { BulkItem } from "@ce/glue2";
import { awaitingText, clientUploads, type JobDescription, type SettledDescription } from "@ce/model";
import { queueDecision, rteAvailable } from "@ce/mapping";
import { JobStore, enabledRtesCached, rteNeedsCached, type DelegationRecord, type JobRecord } from "@ce/store";
import { JobCommitError, createJobs as storeCreateJobs } from "@ce/controldir";
import type { Logger } from "pino";
import type { ApiVersion, Identity, Services } from "../context.js";
import type { RequestHold } from "../middleware/durability/hold.js";
import { Forbidden, ServiceUnavailable, StoreUnavailable } from "../errors.js";
import { RETRY_AFTER_SECONDS, outageOf } from "../outage.js";
import { mapLocalUser } from "./mapping.js";
import { settleDescriptions } from "./descriptions.js";
import { isDraining } from "./info.js";

/** One `POST /jobs?action=new` after the route parsed its query parameters. */
export interface SubmitRequest {
  version: ApiVersion;
  identity: Identity;
  body: string;
  contentType: string | undefined;
  /** 1.1 defaults for descriptions that name none. */
  queue?: string | undefined;
  delegationId?: string | undefined;
  /** 1.1: identical copies of the single description. */
  instances?: number | undefined;
  instancesMin?: number | undefined;
  requestId: string;
  clientHost?: string | undefined;
  clientSoftware?: string | undefined;
  log: Logger;
  /**
   * The request's submission hold (durability middleware): the jobs are created held and run only
   * once the 201 is written. Absent (tools, tests calling this directly): created runnable.
   */
  hold?: RequestHold | undefined;
}

/** A description that passed every check and becomes one (or, with instances, several) jobs. */
interface Plan {
  index: number;
  description: JobDescription;
  source: string;
  queue: string;
  delegations: string[];
  mainDelegation?: string | undefined;
  delegationExpires?: number | undefined;
}

type Outcome = { kind: "item"; item: BulkItem } | { kind: "plan"; plan: Plan };

const created = (id: string, state: string): BulkItem => ({ statusCode: 201, reason: "Created", id, state });
const failed = (statusCode: number, reason: string): BulkItem => ({ statusCode, reason });
const DELEGATION_ID = /^[A-Za-z0-9._-]{1,128}$/;
/** Reasons quote the offending value; a per-item reason stays short whatever the client sent. */
const MAX_REASON = 512;
const clip = (s: string) => (s.length > MAX_REASON ? `${s.slice(0, MAX_REASON)}…` : s);
// Enough parallel file creation to keep libuv's pool busy without flooding a shared file system.
const FILE_CONCURRENCY = 32;

/**
 * E4. Per-description results in request order. Each accepted description becomes a job that is
 * either fully created or not at all: @ce/controldir `createJobs` writes the control files (status
 * last), creates every record in ONE atomic Redis call within the limits (the commit point), then
 * delegations are bound and the JEM is notified. Files of jobs not committed are removed again.
 */
export async function submitJobs(s: Services, req: SubmitRequest): Promise<BulkItem[]> {
  const { config } = s;
  if (await isDraining(s)) throw new ServiceUnavailable("CE is draining: new jobs are not accepted", "DRAINING");
  const maxJobs = config.gateway.limits.jobsPerSubmission;
  // The parser stops at maxJobs descriptions (413) instead of reading them all first.
  const settled = settleDescriptions(req.body, req.contentType, {
    maxBytes: config.gateway.limits.descriptionBytes,
    maxRerun: config.jobs.maxRerun,
    maxDescriptions: maxJobs,
    localInputPrefixes: config.staging.localInputPrefixes,
  });
  if (req.instances !== undefined && settled.length > 1) {
    throw new Forbidden("No multiple descriptions and multiple instances simultaneously", "INSTANCES_WITH_ARRAY");
  }
  const outcomes = await checkDescriptions(s, req, settled);

  // Expand to one entry per job to create.
  let jobs: Plan[] = outcomes.flatMap((o) => (o.kind === "plan" ? [o.plan] : []));
  let minRequired = jobs.length > 0 ? 1 : 0;
  if (req.instances !== undefined && jobs.length === 1) {
    const min = req.instancesMin ?? 1;
    const headroom = await s.jobs.headroom(config.jobs.maxTotal);
    if (headroom < min)
      throw new Forbidden(
        `Number of requested instances exceeds allowed limit: ${headroom} more jobs allowed, instances_min is ${min}`,
        "INSTANCES_LIMIT",
      );
    const n = Math.min(req.instances, headroom, maxJobs);
    if (n < min)
      throw new Forbidden(
        `Can't create requested number of job instances: at most ${n} per request, instances_min is ${min}`,
        "INSTANCES_LIMIT",
      );
    jobs = Array.from({ length: n }, () => jobs[0]!);
    minRequired = min;
  }

  const results = new Map<number, BulkItem[]>();
  const add = (index: number, item: BulkItem) => {
    const list = results.get(index);
    if (list) list.push(item);
    else results.set(index, [item]);
  };
  outcomes.forEach((o, i) => {
    if (o.kind === "item") add(i, o.item);
  });

  const committed = await createJobs(s, req, jobs, minRequired);
  if (req.instances !== undefined && jobs.length > 0) {
    // Instances: only the created jobs are listed, and fewer than instances_min cancels all.
    const ok = committed.filter((r) => r.statusCode === 201);
    if (ok.length === 0) throw new Forbidden("Can't create requested number of job instances within the CE job limit", "INSTANCES_LIMIT");
    return ok;
  }
  committed.forEach((r, i) => add(jobs[i]!.index, r));
  return outcomes.flatMap((_, i) => results.get(i) ?? []);
}

/** Queue, runtime environments and delegations of every parsed description. */
async function checkDescriptions(s: Services, req: SubmitRequest, settled: SettledDescription[]): Promise<Outcome[]> {
  const { config } = s;
  const owner = req.identity.subject;
  const refs = (d: JobDescription) => {
    const main = d.delegationId ?? req.delegationId;
    const perFile = [...d.inputFiles, ...d.outputFiles].map((f) => f.delegationId).filter((x): x is string => !!x);
    return { main, all: [...new Set([...(main ? [main] : []), ...perFile])] };
  };
  const wanted = [...new Set(settled.flatMap((it) => (it.ok ? refs(it.description).all : [])))];
  const found = new Map(
    await Promise.all(wanted.map(async (id) => [id, DELEGATION_ID.test(id) ? await s.delegations.get(id, owner) : undefined] as const)),
  );
  return settled.map((it, index): Outcome => {
    if (!it.ok) return { kind: "item", item: failed(400, clip(it.error.message)) };
    const d = it.description;
    // Queue, its allow rule, GPU cap and RTEs: the one decision `ceadm explain` reports too.
    const q = queueDecision(config, req.identity, d, req.queue);
    if (!q.ok) return { kind: "item", item: failed(q.status, q.reason) };
    const queueName = q.queue;
    const { main, all } = refs(d);
    const missing = all.find((id) => !found.get(id));
    if (missing) return { kind: "item", item: failed(400, `Delegation ${missing} not found`) };
    const noCredential = credentialRefusal(config, d, main ? found.get(main) : undefined);
    if (noCredential) return { kind: "item", item: failed(400, noCredential) };
    return {
      kind: "plan",
      plan: {
        index,
        description: d,
        source: it.source,
        queue: queueName,
        delegations: all,
        mainDelegation: main,
        delegationExpires: main ? found.get(main)?.expires : undefined,
      },
    };
  });
}

/**
 * Why a job cannot run with the credential it brings (undefined: it can). An RTE that needs a
 * proxy (ENV/PROXY, or `# needs: proxy` in its header) would find no proxy file without an X.509
 * delegation that holds one, and ENV/TOKEN (`# needs: token`) no token without a JWT delegation:
 * such a job could only fail later, so it is refused now, naming the RTE and what is missing.
 * Only the RTEs the job asks for: a site default applies to every job whatever its credential.
 */
export function credentialRefusal(config: Services["config"], d: JobDescription, main: DelegationRecord | undefined): string | undefined {
  const enabled = enabledRtesCached(config);
  for (const r of d.runtimeEnvironments) {
    const wanted = r.version ? `${r.name}-${r.version}` : r.name;
    const name = enabled.find((c) => c === wanted) ?? enabled.find((c) => rteAvailable(r, [c])) ?? wanted;
    for (const need of rteNeedsCached(config, name)) {
      if (need === "proxy" && !(main?.type === "x509" && main.expires !== undefined)) {
        const has = !main
          ? "no delegation"
          : main.type === "jwt"
            ? "a token delegation only"
            : "an X.509 delegation without a stored proxy";
        return `Requested runtime environment ${wanted} needs an X.509 proxy, but the job has ${has}: delegate a proxy and name it in the job (delegation_id), or do not ask for ${wanted}`;
      }
      if (need === "token" && main?.type !== "jwt") {
        const has = main ? "an X.509 delegation only" : "no delegation";
        return `Requested runtime environment ${wanted} needs a bearer token, but the job has ${has}: delegate a token (action=new&type=jwt with X-Token-Delegation) and name it in the job (delegation_id), or do not ask for ${wanted}`;
      }
    }
  }
  return undefined;
}

/** Files → one atomic create → bind → notify. Returns one result per plan, in order. */
async function createJobs(s: Services, req: SubmitRequest, plans: Plan[], minRequired: number): Promise<BulkItem[]> {
  if (plans.length === 0) return [];
  const localUser = await mapLocalUser(s, req.identity); // once per request; stored on every record
  const { config } = s;
  const owner = req.identity.subject;
  const now = new Date();
  const hostname = new URL(config.endpoint.url).hostname;
  const ids = plans.map(() => randomUUID());
  const uploadDeadline = now.getTime() + config.jobs.uploadTimeoutSeconds * 1000;
  const hold = req.hold?.begin(ids);
  const records: JobRecord[] = plans.map((p, i) => {
    const d = p.description;
    const uploads = clientUploads(d);
    return JobStore.newRecord(
      {
        id: ids[i]!,
        owner,
        queue: p.queue,
        backend: config.lrms.backend,
        language: d.language,
        jobName: d.jobName,
        rerun: Math.min(d.rerun ?? 0, config.jobs.maxRerun),
        lifetime: Math.min(d.lifetimeSeconds ?? config.jobs.sessionLifetimeSeconds, config.jobs.sessionLifetimeSeconds),
        delegations: p.delegations,
        mainDelegation: p.mainDelegation,
        requestId: req.requestId,
        hold: hold?.key,
        clientHost: req.clientHost,
        delegationExpires: p.delegationExpires,
        localUser,
        // The groups in effect at submission (accounting needs them; a later proxy cannot change them).
        fqans: req.identity.fqans?.length ? [...req.identity.fqans] : undefined,
        // What the job waits for from the client, shown until the JEM has them (the JEM keeps it current).
        ...(uploads.length > 0 ? { awaiting: awaitingText(uploads), uploadDeadline } : {}),
        summary: {
          stdin: d.stdin,
          stdout: d.stdout,
          stderr: d.stderr,
          logDir: d.logDir,
          wallTime: d.wallTimeSeconds,
          cpuTime: d.cpuTimeSeconds,
          slots: d.count,
          rtes: d.runtimeEnvironments.map((r) => (r.version ? `${r.name}-${r.version}` : r.name)),
        },
      },
      now.getTime(),
    );
  });

  // mark → files → commit → notify: the one creation sequence of @ce/controldir (protocol.ts).
  const endpointUrl = config.endpoint.url.replace(/\/+$/, "");
  let result;
  try {
    result = await storeCreateJobs(
      { control: s.control, jobs: s.jobs },
      plans.map((p, i) => ({
        record: records[i]!,
        files: {
          id: ids[i]!,
          description: p.description,
          source: p.source,
          owner,
          queue: p.queue,
          backend: config.lrms.backend,
          endpointUrl,
          hostname,
          version: req.version,
          lifetime: records[i]!.lifetime,
          rerun: records[i]!.rerun,
          mainDelegation: p.mainDelegation,
          delegationExpires: p.delegationExpires,
          clientHost: req.clientHost,
          clientSoftware: req.clientSoftware,
          requestId: req.requestId,
          now,
          localUser,
          fqans: records[i]!.fqans,
          uploadDeadline: records[i]!.uploadDeadline,
        },
      })),
      {
        maxTotal: config.jobs.maxTotal,
        minRequired,
        maxPerOwner: config.quotas.jobsPerOwner,
        concurrency: FILE_CONCURRENCY,
        // A job that only waits for the client's uploads is created admitted (PREPARING): the JEM
        // then has nothing to do for it until an upload completes or its upload deadline passes.
        admit: { maxActivePerOwner: config.jobs.maxActivePerOwner, uploadTimeoutMs: config.jobs.uploadTimeoutSeconds * 1000 },
        holdUntil: hold?.until,
        lease: localUser?.pool ? { account: localUser.account, identity: req.identity.subject } : undefined,
        notify: (committed) => {
          req.hold?.created(Date.now() + config.jobs.uploadTimeoutSeconds * 1000, committed.length);
          return afterCommit(s, req, committed);
        },
        warn: (what, err, jobId) => req.log.warn({ err, jobId }, what),
      },
    );
  } catch (err) {
    if (!(err instanceof JobCommitError)) throw err;
    // Redis trouble is logged once per outage episode (outage.ts); anything else here is worth a line.
    if (!outageOf(s).report(err.cause)) req.log.error({ err: err.cause }, "job records could not be created");
    throw new StoreUnavailable("Job database unavailable; no job was created", RETRY_AFTER_SECONDS);
  }
  const { outcomes, committed, limitedBy } = result;
  if (records.length > committed.length) s.metrics?.countSubmission("rejected", records.length - committed.length);
  if (limitedBy) logLimit(req, limitedBy, outcomes.filter((o) => o === "limited").length, committed.length, config);
  const restOf = new Map(committed.map((r) => [r.id, r.rest]));
  return records.map((r, i) => {
    if (outcomes[i] === "created") return created(r.id, restOf.get(r.id) ?? r.rest);
    if (outcomes[i] === "files-failed") return failed(500, "Failed to create the job's control files");
    if (limitedBy === "lease")
      return failed(
        503,
        `No job was created: pool account ${localUser?.account} of pool ${localUser?.pool} was released while this submission was being committed; submit again`,
      );
    if (limitedBy === "owner")
      return failed(
        403,
        `No more jobs allowed: the per-owner quota quotas.jobsPerOwner (${config.quotas.jobsPerOwner} jobs, WIPED ones not counted) is reached`,
      );
    return failed(503, `No more jobs allowed: the CE job limit (${config.jobs.maxTotal}) is reached`);
  });
}

/**
 * A limit refused jobs of this request: one line for the request with the count (a bulk of 1,000
 * refused by the owner quota is one line, not 1,000). Info: the owner is told in each item's
 * reason; it is the operator's only when it happens a lot.
 */
function logLimit(
  req: SubmitRequest,
  limitedBy: "total" | "owner" | "lease",
  refused: number,
  created: number,
  config: Services["config"],
): void {
  if (refused === 0) return;
  const limit =
    limitedBy === "owner"
      ? `quotas.jobsPerOwner (${config.quotas.jobsPerOwner})`
      : limitedBy === "total"
        ? `jobs.maxTotal (${config.jobs.maxTotal})`
        : "the pool account lease (released meanwhile)";
  req.log.info(
    { refused, created, limit: limitedBy, owner: req.identity.subject },
    `submission: ${refused} job(s) not created, ${limit} reached; ${created} created`,
  );
}

/** Delegation binding and the JEM wake-up. The job exists already: failures are logged, not fatal. */
async function afterCommit(s: Services, req: SubmitRequest, jobs: JobRecord[]): Promise<void> {
  if (jobs.length === 0) return;
  const groups = new Map<string, string[]>();
  for (const j of jobs) {
    if (j.delegations.length === 0) continue;
    const k = j.delegations.join(",");
    groups.set(k, [...(groups.get(k) ?? []), j.id]);
  }
  const bind = Promise.all([...groups].map(([k, ids]) => s.delegations.bind(k.split(","), ids)));
  // No separate JEM wake-up: the create script put the jobs on the JEM's work list (advance set).
  const [b] = await Promise.allSettled([bind]);
  if (b.status === "rejected") req.log.error({ err: b.reason }, "binding delegations failed");
  s.metrics?.countSubmission("accepted", jobs.length);
  req.log.info({ jobs: jobs.length, owner: req.identity.subject }, "jobs submitted");
}
