import type { JobChange, JobRecord } from "@ce/store";
import { jobLog, type JemContext } from "../context.js";
import { logErrors, parseDiag, parseLrmsDone, readSpec } from "../files.js";
import { inStageOut, underLimit } from "../limits.js";
import { batchDirOf, batchResult, runAsOf } from "../priv/jobs.js";
import { moved, WAIT, type Step } from "./step.js";
import { failToFinishing, failureChange, KILL_TEXT, transition } from "./transition.js";
import { backendFor } from "../lrms/index.js";

/** Record fields from `lrms_done` + `diag` (as batchResult read them) once the batch job ended. */
export function completion(files: { done: string | undefined; diag: string | undefined }): { code: number; message: string; change: JobChange } {
  const { code, message } = parseLrmsDone(files.done);
  const diag = parseDiag(files.diag);
  const change: JobChange = { exitCode: diag.exitCode ?? code, lrms: undefined };
  if (diag.nodes) change.nodes = diag.nodes;
  if (diag.usedWallSeconds !== undefined) change.usedWallSeconds = diag.usedWallSeconds;
  if (diag.usedCpuSeconds !== undefined) change.usedCpuSeconds = diag.usedCpuSeconds;
  if (diag.usedMemoryMB !== undefined) change.usedMemoryMB = diag.usedMemoryMB;
  if (diag.startedAt !== undefined) change.startedAt = diag.startedAt;
  return { code, message, change };
}

/**
 * INLRMS (REST QUEUING/RUNNING/HELD/EXITINGLRMS/OTHER, sub-state from the poller) and
 * PENDING:INLRMS (REST EXECUTED: done, waiting for a stage-out slot). Completion is the
 * appearance of `lrms_done` (job wrapper, or the poller when the batch system ended the job).
 */
export async function inlrms(ctx: JemContext, job: JobRecord): Promise<Step> {
  if (job.pending) return toFinishing(ctx, job, {}, undefined);
  const files = await batchResult(ctx, job.id);
  if (files.done === undefined) return job.killRequested ? cancel(ctx, job) : WAIT;
  await endBatchJob(ctx, job);

  const { code, message, change } = completion(files);
  const success = (await readSpec(ctx, job.id))?.successExitCode ?? 0;
  const failure = job.killRequested ? KILL_TEXT : code !== success ? `LRMS error: (${code}) ${message}`.trim() : undefined;
  return toFinishing(ctx, job, change, failure);
}

async function toFinishing(ctx: JemContext, job: JobRecord, change: JobChange, failure: string | undefined): Promise<Step> {
  const killed = job.killRequested && job.failedCause !== "client";
  const text = killed ? KILL_TEXT : failure;
  const all: JobChange = text ? { ...change, ...failureChange(job, text, { state: "INLRMS", cause: killed ? "client" : "internal" }) } : change;
  const failedLine = text;
  return underLimit(ctx, "staging", ctx.config.jobs.maxStaging, () => inStageOut(ctx), async (free) => {
    if (!free) {
      // EXECUTED: keep the facts now, leave for FINISHING when a stage-out slot frees.
      if (!job.pending) await transition(ctx, job, "INLRMS", { pending: true, reason: "Limit of staging jobs is reached", change: all, ...(failedLine ? { failedLine } : {}) });
      else if (killed) await transition(ctx, job, "INLRMS", { pending: true, reason: KILL_TEXT, change: all, failedLine: KILL_TEXT });
      return WAIT;
    }
    return moved(await transition(ctx, job, "FINISHING", { reason: "Job finished executing in LRMS", change: all, ...(failedLine ? { failedLine } : {}) }));
  });
}

/** Nothing of an ended batch job runs on (fork: its cgroup is emptied); a failure is logged, the job goes on. */
export async function endBatchJob(ctx: JemContext, job: JobRecord): Promise<void> {
  await backendFor(ctx.backends, job.backend)
    ?.ended?.(job.id, job.localId)
    .catch((e: unknown) => jobLog(ctx, job).warn({ err: e }, "what the batch job left could not be ended"));
}

/** Kill of a job in the batch system: cancel there, then wait in CANCELING for its end. */
async function cancel(ctx: JemContext, job: JobRecord): Promise<Step> {
  const where = { state: "INLRMS" as const, cause: "client" as const };
  const backend = backendFor(ctx.backends, job.backend);
  if (!job.localId || !backend) return moved(await failToFinishing(ctx, job, KILL_TEXT, where));
  try {
    await backend.cancel(job.localId, { jobId: job.id, jobDir: batchDirOf(ctx, job.id), runAs: await runAsOf(ctx, job) });
  } catch (e) {
    // The CANCELING handler asks again; the batch job may also end by itself.
    jobLog(ctx, job).warn({ err: e }, "batch cancel failed");
    await logErrors(ctx, job.id, `Cancel of batch job ${job.localId} failed: ${(e as Error).message}`);
  }
  return moved(await transition(ctx, job, "CANCELING", { reason: "Request to cancel job", change: failureChange(job, KILL_TEXT, where), failedLine: KILL_TEXT }));
}
