import { randomBytes } from "node:crypto";
import { mkdir, readFile } from "node:fs/promises";
import { fileq, newNodeCapability, storeNodeCapabilityOp } from "@ce/controldir";
import { redisTrouble, type JobChange, type JobRecord } from "@ce/store";
import { jobFields, jobLog, type JemContext } from "../context.js";
import { credentialFor } from "../credentials.js";
import { sessionCredFiles, writeCredentialFiles, type WrittenCredentials } from "../credential-files.js";
import {
  appendErrors,
  appendPrivate,
  leftoverLocalId,
  parseSubmitting,
  readPrivate,
  readSpec,
  removePrivate,
  updateLocal,
  utcStamp,
} from "../files.js";
import type { Expected } from "../lrms/micro-batch.js";
import { BackendError, type Backend, type BatchJobSpec, type NodeTransfer, type RunAsJob, type SubmitResult } from "../lrms/types.js";
import { moved, waitUntil, type Step } from "./step.js";
import { failToFinishing, transition } from "./transition.js";
import { backendFor } from "../lrms/index.js";
import { jobRteNeeds } from "../lrms/batch.js";
import { turnLog } from "../turn-log.js";

/** Attempts of one submission (crash resumes included) after which a timeout or busy answer fails the job. */
const MAX_ATTEMPTS = 8;
const RETRY_MS = 5_000;

/**
 * SUBMIT (REST SUBMITTING): hand the job to the batch system exactly once. A kill is deferred
 * until the local id exists (docs/architecture.md, Job flow: Kill). Crash safety: the `submitting` marker names the
 * submission with a tag before the batch system is called, the back end records the tag with the
 * batch job (and never starts a second one for it), and the local id is persisted in `local`
 * before the CAS. A JEM that dies anywhere in between leaves the marker: the next attempt
 * resubmits with the same tag and `resume`, and the back end adopts what the first one started.
 */
export async function submit(ctx: JemContext, job: JobRecord): Promise<Step> {
  const adopted = job.localId ?? (await leftoverLocalId(ctx, job.id));
  if (adopted) {
    // The earlier attempt wrote the credential files; which ones the JEM keeps current follows
    // from the job's RTEs (credWritten stays unknown, so the next renewal replaces them).
    const needs = jobRteNeeds(job.summary?.rtes ?? [], ctx.config, ctx.config.paths.rteDir);
    const credFiles = sessionCredFiles(needs).join(",") || undefined;
    return toInlrms(ctx, job, adopted, "Job is passed to LRMS (adopted after restart)", credFiles ? { credFiles } : {});
  }

  const fail = async (text: string) => moved(await failToFinishing(ctx, job, text, { state: "SUBMIT", cause: "internal" }));
  const backend = backendFor(ctx.backends, job.backend);
  if (!backend) return fail(`Job submission to LRMS failed: batch system back end ${JSON.stringify(job.backend)} is not configured`);
  // Announced before this job's preparation: a bulk submit of a burst waits for it (up to a bound)
  // instead of leaving it to a script run of its own.
  const expected = backend.expectSubmit?.();
  try {
    return await submitTo(ctx, job, backend, expected, fail);
  } finally {
    expected?.settle();
  }
}

async function submitTo(
  ctx: JemContext,
  job: JobRecord,
  backend: Backend,
  expected: Expected | undefined,
  fail: (text: string) => Promise<Step>,
): Promise<Step> {
  const log = jobLog(ctx, job);
  const desc = await readSpec(ctx, job.id);
  if (!desc) return fail("Could not process job description");

  const previous = parseSubmitting(await readPrivate(ctx, job.id, "submitting"));
  const tag = previous?.tag ?? `${job.id}.${randomBytes(4).toString("hex")}`;
  if (previous)
    log.warn(
      { tag, attempts: previous.attempts },
      "an earlier submission attempt left no local id; asking the batch system for it before submitting",
    );
  await appendPrivate(ctx, job.id, "submitting", `${utcStamp()} ${process.pid} tag=${tag}\n`);

  // Mapping on: the session and a fresh batch dir become the account's, scripts run as it (src/priv).
  // A resumed attempt keeps a complete batch dir: it may hold the earlier attempt's start record
  // and job. One the earlier attempt did not finish preparing is prepared again (no script ran in it).
  // Either way the back end writes the batch files again (temporary name + rename) before it runs.
  let runAs: RunAsJob | undefined;
  let jobDir = ctx.control.batchDir(job.id);
  if (!ctx.priv) {
    // Mapping off: the batch dir is the CE's own (an earlier attempt's is kept, as above).
    await mkdir(jobDir, { mode: 0o700 }).catch((e: unknown) => {
      if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e;
    });
  } else {
    try {
      const as = await ctx.priv.accountFor(job.id, job.localUser);
      if (!previous || !(await ctx.priv.batchDirReady(job.id, as))) {
        await ctx.priv.prepareSession(job.id, as, log);
        jobDir = await ctx.priv.prepareBatchDir(job.id, as);
      }
      runAs = ctx.priv.forJob(job.id, as);
    } catch (e) {
      log.warn({ err: e }, "job cannot run as its mapped account");
      return fail(`Job submission to LRMS failed: cannot run the job as its mapped account: ${(e as Error).message}`.slice(0, 1024));
    }
  }
  const spec: BatchJobSpec = {
    jobId: job.id,
    owner: job.owner,
    fqans: job.fqans,
    sessionDir: ctx.control.sessionDir(job.id),
    jobDir,
    runAs,
    eventFile: ctx.control.eventFile(job.id),
    description: desc,
    queue: job.queue,
    rteDir: ctx.config.paths.rteDir,
    runtimeEnvironments: desc.runtimeEnvironments.map((r) => (r.version ? `${r.name}-${r.version}` : r.name)),
    submitTag: tag,
    resume: previous !== undefined,
  };
  const partition = ctx.config.jobs.queues.find((q) => q.name === job.queue)?.partition;
  if (partition) spec.partition = partition;
  // The job's credential files (credential-files.ts): an X.509 delegation becomes the batch job's
  // proxy file, a JWT one the session's token file when an RTE needs it (ENV/TOKEN); token jobs never
  // see a proxy path.
  let written: WrittenCredentials;
  try {
    const cred = await credentialFor(ctx, job, desc.delegationId);
    written = await writeCredentialFiles(ctx, job, cred, runAs, jobRteNeeds(spec.runtimeEnvironments, ctx.config, spec.rteDir));
  } catch (e) {
    if (redisTrouble(e)) throw e;
    log.warn({ err: e }, "credential files of the job not written");
    return fail(`Job submission to LRMS failed: the job's credential files could not be written: ${(e as Error).message}`.slice(0, 1024));
  }
  if (written.proxyFile) spec.credentialFile = written.proxyFile;
  if (written.tokenFile) spec.tokenFile = written.tokenFile;
  if (job.requestId) spec.requestId = job.requestId;
  if (!ctx.config.lrms.sharedSession) {
    try {
      spec.node = await nodeTransfer(ctx, job.id);
    } catch (e) {
      log.warn({ err: e }, "the nothing-shared settings are not usable");
      return fail(`Job submission to LRMS failed: ${(e as Error).message}`.slice(0, 1024));
    }
  }

  const t0 = Date.now();
  log.debug({ backend: backend.name }, "submitting to the batch system");
  let localId: string;
  try {
    // The bulk script (and a rate limit) is waited for without an advance slot: the rest of a burst gets on.
    const r = ctx.outsideSlot ? await ctx.outsideSlot(job.id, () => backend.submit(spec, expected)) : await backend.submit(spec, expected);
    localId = r.localId;
    await noteStage0(ctx, job.id, r);
  } catch (e) {
    // Not failed, only not known yet (an earlier attempt still in flight, no answer): the marker
    // stays and the next attempt asks again under the same tag.
    if (e instanceof BackendError && (e.code === "BUSY" || e.code === "TIMEOUT") && (previous?.attempts ?? 0) + 1 < MAX_ATTEMPTS) {
      log.warn({ err: e }, "batch submission not confirmed; asking again");
      return waitUntil(Date.now() + RETRY_MS);
    }
    const err = e as Error & { stderr?: string };
    if (err.stderr) await appendErrors(ctx, job.id, err.stderr);
    log.warn({ err: e }, "batch submission failed");
    return fail(`Job submission to LRMS failed: ${err.message}`.slice(0, 1024));
  }
  // The one info line of a submission (the back end's own is debug); the submissions of one turn
  // of the event loop share one line (each pino line with redaction has a real cost in a burst).
  logSubmitted(ctx, {
    ...jobFields(job),
    backend: backend.name,
    localId,
    queue: job.queue,
    ms: Date.now() - t0,
    ...(previous ? { resumed: true } : {}),
  });
  await updateLocal(ctx, job.id, { localid: localId });
  return toInlrms(ctx, job, localId, "Job is passed to LRMS", written.change);
}

type Submitted = ReturnType<typeof jobFields> & { backend: string; localId: string; queue: string; ms: number; resumed?: boolean };
/**
 * "submitted to the batch system": one info line per submission as ever when it is alone in its
 * turn of the event loop; the submissions of a bulk script's answers in one turn are one line
 * (local ids by job id), each job's own line then at debug (turn-log.ts).
 */
export const logSubmitted = turnLog<Submitted>("submitted to the batch system", "submitted to the batch system", (list) => {
  const localIds: Record<string, string> = {};
  for (const x of list) localIds[x.jobId] = x.localId;
  const resumed = list.filter((x) => x.resumed).map((x) => x.jobId);
  return {
    count: list.length,
    backend: [...new Set(list.map((x) => x.backend))].join(","),
    msMax: Math.max(...list.map((x) => x.ms)),
    localIds,
    ...(resumed.length ? { resumed } : {}),
  };
});

/**
 * `lrms.sharedSession: false`: a fresh capability for this job (its hash replaces an earlier
 * attempt's, so a resubmission's batch script holds the only one that opens anything), the CE's
 * URL and the CA the node trusts it with.
 */
async function nodeTransfer(ctx: JemContext, id: string): Promise<NodeTransfer> {
  const caFile = ctx.config.lrms.nodeCaFile;
  if (!caFile) throw new Error("lrms.sharedSession is false but lrms.nodeCaFile (the CA a node trusts the CE with) is not set");
  const caPem = await readFile(caFile, "utf8").catch((e: unknown) => {
    throw new Error(`lrms.nodeCaFile ${caFile} cannot be read: ${(e as NodeJS.ErrnoException).code ?? String(e)}`);
  });
  if (!caPem.includes("-----BEGIN CERTIFICATE-----")) throw new Error(`lrms.nodeCaFile ${caFile} holds no PEM certificate`);
  const cap = newNodeCapability();
  await fileq.one(storeNodeCapabilityOp(ctx.control, id, cap.hash));
  return {
    url: `${ctx.config.endpoint.url.replace(/\/+$/, "")}/node/1/jobs/${id}`,
    caPem,
    capability: cap.token,
    scratchDir: ctx.config.lrms.scratchDir,
  };
}

/** What RTE stage 0 printed and changed goes to the job's `errors` (diagnose file, `arcstat -l` readers). */
async function noteStage0(ctx: JemContext, id: string, r: SubmitResult): Promise<void> {
  const lines = [
    ...(r.rteLog?.trim() ? [r.rteLog.trimEnd()] : []),
    ...(r.rteChanges ?? []).map((c) => `${utcStamp()} Runtime environment stage 0 changed ${c}`),
  ];
  if (lines.length > 0) await appendErrors(ctx, id, `${lines.join("\n")}\n`);
}

async function toInlrms(ctx: JemContext, job: JobRecord, localId: string, reason: string, cred: JobChange = {}): Promise<Step> {
  const next = await transition(ctx, job, "INLRMS", { reason, change: { ...cred, localId, lrms: undefined, startedAt: Date.now() } });
  if (next) await removePrivate(ctx, job.id, "submitting");
  return moved(next);
}
