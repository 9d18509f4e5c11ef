import { FINAL_INTERNAL_STATES, type InternalState } from "@ce/model";
import { type JobChange, type JobRecord, type QueueCatalog } from "@ce/store";
import { forgetInputs } from "@ce/controldir";
import { enqueueAdvance, jobLog, type JemContext } from "./context.js";
import { forgetLocalId, leftoverLocalId, logErrors, readSpec, removePrivate } from "./files.js";
import type { Lease } from "./locks.js";
import { backendFor } from "./lrms/index.js";
import { batchDirOf, runAsOf } from "./priv/jobs.js";
import { sessionFileStat } from "./staging/paths.js";
import { cleanJob } from "./states/finished.js";
import { transition } from "./states/transition.js";

const CAS_ATTEMPTS = 8;

/**
 * kill / clean / restart from the REST interface. The gateway put the request on the record
 * before answering 202 (requestCommands); a queue message is only the doorbell, rung again by the
 * recovery pass if it was lost. Each handler reads the job and changes it with a CAS on the state
 * it read, so it is idempotent and safe against the job's own progress; a lost race re-reads.
 * The real work of a kill happens in the state handlers (`killRequested`).
 */
export async function handleCommand(ctx: JemContext, cmd: QueueCatalog["commands"]): Promise<void> {
  if (cmd.action === "kill") return kill(ctx, cmd.jobId);
  if (cmd.action === "clean") return clean(ctx, cmd.jobId);
  return restart(ctx, cmd.jobId);
}

const expectOf = (job: JobRecord) => ({ state: job.state, pending: job.pending ? "1" : "0" });

async function kill(ctx: JemContext, jobId: string): Promise<void> {
  for (let i = 0; i < CAS_ATTEMPTS; i++) {
    const job = await ctx.jobs.get(jobId);
    // Final or already cancelling: nothing to do. A flag already on the record is acted on again
    // (abort + advance are idempotent): the gateway sets it before ringing.
    if (!job || FINAL_INTERNAL_STATES.has(job.state) || job.state === "CANCELING") return;
    if (!job.killRequested && !(await ctx.jobs.update(job, { killRequested: true }, expectOf(job)))) continue;
    jobLog(ctx, job).info({ state: job.state }, "kill requested");
    // Transfers stop now, wherever they run; SUBMIT defers the kill until the local id exists.
    if (job.state === "PREPARING" || job.state === "FINISHING") await ctx.publishAbort(jobId);
    await enqueueAdvance(ctx, jobId, "kill", 0, job.requestId);
    return;
  }
  throw new Error(`kill of ${jobId}: job state kept changing`);
}

async function clean(ctx: JemContext, jobId: string): Promise<void> {
  for (let i = 0; i < CAS_ATTEMPTS; i++) {
    const job = await ctx.jobs.get(jobId);
    if (!job) return;
    if (FINAL_INTERNAL_STATES.has(job.state)) {
      await withJobLease(ctx, jobId, async () => {
        const fresh = await ctx.jobs.get(jobId);
        if (fresh && FINAL_INTERNAL_STATES.has(fresh.state)) await cleanJob(ctx, fresh);
      });
      return;
    }
    // Active job: not a kill; it is wiped as soon as it reaches FINISHED (docs/architecture.md, Job flow: Clean).
    if (job.cleanRequested) return;
    if (await ctx.jobs.update(job, { cleanRequested: true }, expectOf(job))) {
      jobLog(ctx, job).info({ state: job.state }, "clean deferred until the job finishes");
      return;
    }
  }
  throw new Error(`clean of ${jobId}: job state kept changing`);
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

async function restart(ctx: JemContext, jobId: string): Promise<void> {
  await withJobLease(ctx, jobId, async () => {
    const job = await ctx.jobs.get(jobId);
    if (!job) return;
    // Nothing to restart (or done already): the request is answered, its flag goes.
    if (job.state !== "FINISHED" || !job.failure) {
      if (job.restartRequested) await ctx.jobs.update(job, { restartRequested: undefined });
      return;
    }
    const log = jobLog(ctx, job);
    const target = job.rerun > 0 ? await restartTarget(ctx, job) : undefined;
    if (!target) {
      await ctx.jobs.update(job, { restartRequested: undefined });
      await logErrors(
        ctx,
        jobId,
        job.rerun > 0 ? "Restart refused: job did not fail in a restartable state" : "Restart refused: no more restarts allowed",
      );
      log.info({ failedState: job.failedState, rerun: job.rerun }, "restart refused");
      return;
    }
    // The old batch job must be over before its id is dropped: else the job could run twice.
    const old = await oldBatchJob(ctx, job);
    if (old) throw new Error(`restart of ${jobId}: the old batch job ${old} is still there; cancelled, restart retried`);
    const missing = target === "ACCEPTED" ? await missingDownloads(ctx, job) : [];
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
    const next = await transition(ctx, job, target, {
      pending: true,
      reason: `Job restarted from ${job.failedState} (${job.rerun - 1} restarts left)`,
      change,
    });
    if (!next) return;
    await ctx.jobs.unscheduleExpiry(jobId);
    await ctx.control.remove(jobId, "failed");
    await ctx.control.remove(jobId, "lrms_done");
    await removePrivate(ctx, jobId, "stageout.done", "stagein.failed", "submitting");
    // The old batch id must never be adopted by the new submission: it may still run, or be another job by then.
    await forgetLocalId(ctx, jobId);
    // Appended, never rewritten: a gateway may be appending an upload record right now.
    await forgetInputs(ctx.control, jobId, missing);
    log.info({ target }, "job restarted");
    await enqueueAdvance(ctx, jobId, "restart", 0, job.requestId);
  });
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

/** Runs `fn` holding the job's lease, waiting a little for a busy job; else BullMQ retries. */
async function withJobLease(ctx: JemContext, jobId: string, fn: () => Promise<void>): Promise<void> {
  let lease: Lease | undefined;
  for (let i = 0; i < 50 && !lease; i++) {
    lease = await ctx.locks.tryAcquire(`job:${jobId}`, ctx.jobLockMs);
    if (!lease) await new Promise((r) => setTimeout(r, 200));
  }
  if (!lease) throw new Error(`job ${jobId} is busy`);
  try {
    await fn();
  } finally {
    await lease.release();
  }
}
