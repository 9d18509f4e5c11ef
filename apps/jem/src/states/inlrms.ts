import type { JobChange, JobRecord } from "@ce/store";
import { jobLog, type JemContext } from "../context.js";
import { logErrors, parseDiag, parseLrmsDone, readSpec } from "../files.js";
import { inStageOut, underLimit } from "../limits.js";
import { batchDirOf, batchResult, runAsOf } from "../priv/jobs.js";
import { moved, WAIT, waitUntil, type Step } from "./step.js";
import { failToFinishing, failureChange, KILL_TEXT, transition } from "./transition.js";
import { backendFor } from "../lrms/index.js";
import { refreshCredentialFiles, renewalPending } from "../credential-files.js";
import { credentialFor } from "../credentials.js";
import { describeEnd, isSignalEnd, type FailureCause } from "../lrms/verdict.js";

/** How long a signal-ended job waits for the batch system to say why (Slurm's completing phase). */
const VERDICT_WAIT_MS = 90_000;
const VERDICT_RETRY_MS = 3_000;
/** First look at a signal-ended job whose batch job is still completing (bounded: one entry per such job). */
const verdictSince = new Map<string, number>();

/** Record fields from `lrms_done` + `diag` (as batchResult read them) once the batch job ended. */
export function completion(files: { done: string | undefined; diag: string | undefined }): {
  code: number;
  message: string;
  change: JobChange;
} {
  const { code, message } = parseLrmsDone(files.done);
  const diag = parseDiag(files.diag);
  const change: JobChange = { exitCode: diag.exitCode ?? code, lrms: undefined };
  if (diag.nodes) change.nodes = diag.nodes;
  if (diag.usedWallSeconds !== undefined) change.usedWallSeconds = diag.usedWallSeconds;
  if (diag.usedCpuSeconds !== undefined) change.usedCpuSeconds = diag.usedCpuSeconds;
  if (diag.usedMemoryMB !== undefined) change.usedMemoryMB = diag.usedMemoryMB;
  if (diag.usedUserSeconds !== undefined) change.usedUserSeconds = diag.usedUserSeconds;
  if (diag.usedSystemSeconds !== undefined) change.usedSystemSeconds = diag.usedSystemSeconds;
  if (diag.processors !== undefined) change.processors = diag.processors;
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
  if (files.done === undefined) {
    if (job.killRequested) return cancel(ctx, job);
    await renewCredentials(ctx, job);
    return WAIT;
  }
  await endBatchJob(ctx, job);

  const done = completion(files);
  let { code, message } = done;
  const spec = await readSpec(ctx, job.id);
  const success = spec?.successExitCode ?? 0;
  if (!job.killRequested && code !== success && isSignalEnd(code, message)) {
    const v = await batchVerdict(ctx, job, message);
    if (v === "wait") return waitUntil(Date.now() + VERDICT_RETRY_MS);
    if (v) ({ code, message } = v);
  }
  verdictSince.delete(job.id);
  if (job.killRequested || code === success) return toFinishing(ctx, job, done.change, job.killRequested ? KILL_TEXT : undefined);
  const verdict = describeEnd(code, message, {
    usedMemoryMB: done.change.usedMemoryMB ?? job.usedMemoryMB,
    requestedMemoryMB: spec?.memoryMB,
  });
  return toFinishing(ctx, job, done.change, verdict.text, verdict.cause);
}

/**
 * The wrapper saw a signal; the batch system knows whether it was the time limit, the memory
 * limit, a node failure, a preemption or an administrator. Its answer replaces the wrapper's when
 * it differs (for an ordinary end the back end's poll repeats the wrapper's own line). While the
 * batch job is still completing the job waits, up to VERDICT_WAIT_MS, then keeps the wrapper's text.
 */
async function batchVerdict(
  ctx: JemContext,
  job: JobRecord,
  wrapperMessage: string,
): Promise<{ code: number; message: string } | "wait" | undefined> {
  const backend = backendFor(ctx.backends, job.backend);
  if (!backend || !job.localId) return undefined;
  const states = await backend.poll([{ jobId: job.id, localId: job.localId, jobDir: batchDirOf(ctx, job.id) }]);
  const s = states.get(job.id);
  if (s?.kind === "done")
    return s.message.trim() !== wrapperMessage.trim() && s.message.trim() !== "" ? { code: s.exitCode, message: s.message } : undefined;
  if (s?.kind !== "active") return undefined;
  const since = verdictSince.get(job.id) ?? Date.now();
  verdictSince.set(job.id, since);
  if (Date.now() - since < VERDICT_WAIT_MS) return "wait";
  jobLog(ctx, job).warn(
    { waitedMs: Date.now() - since },
    "batch system still shows the job after the wrapper ended; keeping the wrapper's reason",
  );
  return undefined;
}

async function toFinishing(
  ctx: JemContext,
  job: JobRecord,
  change: JobChange,
  failure: string | undefined,
  cause: FailureCause = "internal",
): Promise<Step> {
  const killed = job.killRequested && job.failedCause !== "client";
  const text = killed ? KILL_TEXT : failure;
  const all: JobChange = text ? { ...change, ...failureChange(job, text, { state: "INLRMS", cause: killed ? "client" : cause }) } : change;
  const failedLine = text;
  return underLimit(
    ctx,
    "staging",
    ctx.config.jobs.maxStaging,
    () => inStageOut(ctx),
    async (free) => {
      if (!free) {
        // EXECUTED: keep the facts now, leave for FINISHING when a stage-out slot frees.
        if (!job.pending)
          await transition(ctx, job, "INLRMS", {
            pending: true,
            reason: "Limit of staging jobs is reached",
            change: all,
            ...(failedLine ? { failedLine } : {}),
          });
        else if (killed) await transition(ctx, job, "INLRMS", { pending: true, reason: KILL_TEXT, change: all, failedLine: KILL_TEXT });
        return WAIT;
      }
      return moved(
        await transition(ctx, job, "FINISHING", {
          reason: "Job finished executing in LRMS",
          change: all,
          ...(failedLine ? { failedLine } : {}),
        }),
      );
    },
  );
}

/**
 * The client renewed the job's delegation while it runs (the renewal rang it): the job's
 * credential files get the new credential (credential-files.ts), and the record says so.
 */
async function renewCredentials(ctx: JemContext, job: JobRecord): Promise<void> {
  if (!renewalPending(job)) return;
  let runAs;
  try {
    runAs = await runAsOf(ctx, job);
  } catch (e) {
    jobLog(ctx, job).warn({ err: e }, "renewed credential not handed to the job: its account is refused");
    return;
  }
  const change = await refreshCredentialFiles(ctx, job, runAs, await credentialFor(ctx, job));
  if (change)
    await ctx.jobs.update(job, { credWritten: change.credWritten }, { state: "INLRMS", pending: "0", stateSince: String(job.stateSince) });
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
  return moved(
    await transition(ctx, job, "CANCELING", {
      reason: "Request to cancel job",
      change: failureChange(job, KILL_TEXT, where),
      failedLine: KILL_TEXT,
    }),
  );
}
