import type { JobRecord } from "@ce/store";
import { jobLog, type JemContext } from "../context.js";
import { credentialFor, resolveCredential } from "../credentials.js";
import { leftoverLocalId, readPrivate, readSpec, removePrivate, updateLocal, utcStamp, writePrivate } from "../files.js";
import type { BatchJobSpec, RunAsJob } from "../lrms/types.js";
import { moved, type Step } from "./step.js";
import { failToFinishing, transition } from "./transition.js";
import { backendFor } from "../lrms/index.js";

/**
 * SUBMIT (REST SUBMITTING): hand the job to the batch system exactly once. A kill is deferred
 * until the local id exists (arex-jem §2.5). Crash safety: a `submitting` marker is written
 * first and the local id is persisted in `local` before the CAS, so a JEM that dies anywhere in
 * between is recovered by adopting the id instead of submitting twice.
 */
export async function submit(ctx: JemContext, job: JobRecord): Promise<Step> {
  const log = jobLog(ctx, job);
  const adopted = job.localId ?? (await leftoverLocalId(ctx, job.id));
  if (adopted) return toInlrms(ctx, job, adopted, "Job is passed to LRMS (adopted after restart)");

  const fail = async (text: string) => moved(await failToFinishing(ctx, job, text, { state: "SUBMIT", cause: "internal" }));
  const backend = backendFor(ctx.backends, job.backend);
  if (!backend) return fail(`Job submission to LRMS failed: batch system back end ${JSON.stringify(job.backend)} is not configured`);
  const desc = await readSpec(ctx, job.id);
  if (!desc) return fail("Could not process job description");

  const previous = await readPrivate(ctx, job.id, "submitting");
  if (previous) log.warn({ previous: previous.trim() }, "an earlier submission attempt left no local id; submitting again");
  await writePrivate(ctx, job.id, "submitting", `${utcStamp()} ${process.pid}\n`);

  // Mapping on: the session and a fresh batch dir become the account's, scripts run as it (src/priv).
  let runAs: RunAsJob | undefined;
  let jobDir = ctx.control.jobDir(job.id);
  if (ctx.priv) {
    try {
      const as = await ctx.priv.accountFor(job.id, job.localUser);
      await ctx.priv.prepareSession(job.id, as);
      jobDir = await ctx.priv.prepareBatchDir(job.id, as);
      runAs = ctx.priv.forJob(job.id, as);
    } catch (e) {
      log.warn({ err: e }, "job cannot run as its mapped account");
      return fail(`Job submission to LRMS failed: cannot run the job as its mapped account: ${(e as Error).message}`.slice(0, 1024));
    }
  }
  const cred = runAs ? await credentialFor(ctx, job, desc.delegationId) : await resolveCredential(ctx, job, desc.delegationId);
  const spec: BatchJobSpec = {
    jobId: job.id,
    owner: job.owner,
    sessionDir: ctx.control.sessionDir(job.id),
    jobDir,
    runAs,
    eventFile: ctx.control.eventFile(job.id),
    description: desc,
    queue: job.queue,
    rteDir: ctx.config.paths.rteDir,
    runtimeEnvironments: desc.runtimeEnvironments.map((r) => (r.version ? `${r.name}-${r.version}` : r.name)),
  };
  const partition = ctx.config.jobs.queues.find((q) => q.name === job.queue)?.partition;
  if (partition) spec.partition = partition;
  // Only an X.509 delegation becomes a proxy file; token jobs never see a proxy path (anchors §3.1).
  if (runAs && cred?.type === "x509") spec.credentialFile = await runAs.writeFile("proxy", cred.proxyPem, 0o600);
  else if (cred && "file" in cred && cred.file && cred.type === "x509") spec.credentialFile = cred.file as string;
  if (job.requestId) spec.requestId = job.requestId;

  const t0 = Date.now();
  log.info({ backend: backend.name }, "submitting to the batch system");
  let localId: string;
  try {
    ({ localId } = await backend.submit(spec));
  } catch (e) {
    const err = e as Error & { stderr?: string };
    if (err.stderr) await ctx.control.append(job.id, "errors", err.stderr).catch(() => undefined);
    log.warn({ err: e }, "batch submission failed");
    return fail(`Job submission to LRMS failed: ${err.message}`.slice(0, 1024));
  }
  log.info({ localId, ms: Date.now() - t0 }, "submitted to the batch system");
  await updateLocal(ctx, job.id, { localid: localId });
  return toInlrms(ctx, job, localId, "Job is passed to LRMS");
}

async function toInlrms(ctx: JemContext, job: JobRecord, localId: string, reason: string): Promise<Step> {
  const next = await transition(ctx, job, "INLRMS", { reason, change: { localId, lrms: undefined, startedAt: Date.now() } });
  if (next) await removePrivate(ctx, job.id, "submitting");
  return moved(next);
}
