import type { InternalState } from "@ce/model";
import type { JobChange, JobRecord } from "@ce/store";
import { forgetInputs } from "@ce/controldir";
import { jobLog, type JemContext } from "../context.js";
import { batchEnd, forgetLocalId, leftoverLocalId, logErrors, readSpec, removePrivate } from "../files.js";
import { backendFor } from "../lrms/index.js";
import { batchDirOf, runAsOf } from "../priv/jobs.js";
import { sessionFileStat } from "../staging/paths.js";
import { moved, waitUntil, type Step } from "./step.js";
import { transition } from "./transition.js";

/** How soon a restart waiting for the old batch job to go is tried again. */
const OLD_BATCH_JOB_RECHECK_MS = 2_000;

/**
 * A restart request on the record (the gateway's `restart`, lua/request.lua), acted on at the
 * job's next look before its state handler: a FAILED job with restarts left goes back to the
 * state where it failed (docs/architecture.md, Job flow: Restart); anything else answers the
 * request by dropping its flag, with a line in `errors` when the restart is refused.
 */
export async function restartStep(ctx: JemContext, job: JobRecord): Promise<Step> {
  const log = jobLog(ctx, job);
  // Nothing to restart (or done already): the request is answered, its flag goes.
  if (job.state !== "FINISHED" || !job.failure) return moved(await ctx.jobs.update(job, { restartRequested: undefined }));
  const target = job.rerun > 0 ? await restartTarget(ctx, job) : undefined;
  if (!target) {
    const answered = await ctx.jobs.update(job, { restartRequested: undefined });
    await logErrors(
      ctx,
      job.id,
      job.rerun > 0 ? "Restart refused: job did not fail in a restartable state" : "Restart refused: no more restarts allowed",
    );
    log.info({ failedState: job.failedState, rerun: job.rerun }, "restart refused");
    return moved(answered);
  }
  // The old batch job must be over before its id is dropped: else the job could run twice.
  const old = await oldBatchJob(ctx, job);
  if (old) {
    log.info({ localId: old }, "restart waits for the old batch job to end (cancelled)");
    return waitUntil(Date.now() + OLD_BATCH_JOB_RECHECK_MS);
  }
  const missing = target === "ACCEPTED" ? await missingDownloads(ctx, job) : [];
  const next = await transition(ctx, job, target, {
    pending: true,
    reason: `Job restarted from ${job.failedState} (${job.rerun - 1} restarts left)`,
    change: restartChange(job, target),
  });
  if (!next) return moved(undefined);
  await ctx.jobs.unscheduleExpiry(job.id);
  await ctx.control.remove(job.id, "failed");
  await batchEnd.forget(ctx, job.id);
  await removePrivate(ctx, job.id, "stageout.done", "stagein.failed", "submitting");
  // The old batch id must never be adopted by the new submission: it may still run, or be another job by then.
  await forgetLocalId(ctx, job.id);
  // Appended, never rewritten: a gateway may be appending an upload record right now.
  await forgetInputs(ctx.control, job.id, missing);
  log.info({ target }, "job restarted");
  return moved(next);
}

/** The record's change for a restart to `target`: the failure and the last run's facts go. */
function restartChange(job: JobRecord, target: InternalState): JobChange {
  const change: JobChange = {
    rerun: job.rerun - 1,
    failure: undefined,
    failedState: undefined,
    failedCause: undefined,
    outcome: undefined,
    localId: undefined,
    lrms: undefined,
    endedAt: undefined,
    cleanupAt: undefined,
    killRequested: undefined,
    restartRequested: undefined,
  };
  // Restarted at INLRMS (a failed stage-out), the run's usage is still the job's.
  if (target !== "INLRMS")
    Object.assign(change, {
      exitCode: undefined,
      nodes: undefined,
      usedWallSeconds: undefined,
      usedCpuSeconds: undefined,
      usedMemoryMB: undefined,
      usedUserSeconds: undefined,
      usedSystemSeconds: undefined,
      processors: undefined,
    });
  return change;
}

/** Restart point per failed state (docs/architecture.md, Job flow: Restart); undefined = not restartable. */
async function restartTarget(ctx: JemContext, job: JobRecord): Promise<InternalState | undefined> {
  switch (job.failedState) {
    case "PREPARING":
      return "ACCEPTED";
    case "SUBMIT":
    case "INLRMS":
      return (await missingDownloads(ctx, job)).length > 0 ? "ACCEPTED" : "PREPARING";
    case "FINISHING":
      return "INLRMS";
    default:
      return undefined;
  }
}

/** Remote inputs no longer in the session dir (purged at FINISHING): they must be fetched again. */
async function missingDownloads(ctx: JemContext, job: JobRecord): Promise<string[]> {
  const desc = await readSpec(ctx, job.id);
  const out: string[] = [];
  for (const f of desc?.inputFiles ?? []) {
    if (!f.source) continue;
    if (!(await sessionFileStat(ctx.control.sessionDir(job.id), f.name))) out.push(f.name);
  }
  return out;
}

/**
 * The local id of a restarted job's batch job while the batch system may still run it (it is then
 * cancelled), undefined once it is over. Only an answer of the batch system counts: a failed
 * query keeps the restart waiting; a job the batch system no longer knows is over.
 */
async function oldBatchJob(ctx: JemContext, job: JobRecord): Promise<string | undefined> {
  const localId = job.localId ?? (await leftoverLocalId(ctx, job.id));
  const backend = backendFor(ctx.backends, job.backend);
  if (!localId || !backend) return undefined;
  const jobDir = batchDirOf(ctx, job.id);
  const state = (await backend.poll([{ jobId: job.id, localId, jobDir }])).get(job.id);
  if (state?.kind === "done" || (state?.kind === "unknown" && !/^(POLL_FAILED|TIMEOUT|BAD_OUTPUT)/.test(state.reason))) return undefined;
  if (state?.kind === "active") {
    await backend
      .cancel(localId, { jobId: job.id, jobDir, runAs: await runAsOf(ctx, job) })
      .catch((e: unknown) => jobLog(ctx, job).warn({ err: e }, "cancel of the old batch job failed"));
  }
  return localId;
}
