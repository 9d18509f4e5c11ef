import type { AccountScrub, JobRecord } from "@ce/store";
import type { JemContext } from "../context.js";
import { accountScrubber } from "../contain/scrub.js";
import type { RunAsJob } from "../lrms/types.js";
import { collectBatchFiles } from "./collect.js";

/**
 * The state handlers' view of the privileged component: with mapping on (`ctx.priv`) a job's
 * scripts run as its account, which owns its batch dir; with mapping off (developer mode)
 * everything runs as the CE. Either way the batch dir is `<session>.lrms` (ControlDir.batchDir),
 * and what the batch job writes there reaches the job dir only through collect.ts.
 */

/** Where the back end writes and reads the job's batch files (job.sh, comment, diag, lrms_done). */
export function batchDirOf(ctx: JemContext, jobId: string): string {
  return ctx.control.batchDir(jobId);
}

/** The job's account for the back end; undefined with mapping off. Throws PrivRefused with the reason. */
export async function runAsOf(ctx: JemContext, job: Pick<JobRecord, "id" | "localUser">): Promise<RunAsJob | undefined> {
  if (!ctx.priv) return undefined;
  return ctx.priv.forJob(job.id, await ctx.priv.accountFor(job.id, job.localUser));
}

/** Copies lrms_done/diag/comment the batch job wrote into the job dir. */
export async function collectBatch(ctx: JemContext, jobId: string): Promise<void> {
  await batchResult(ctx, jobId);
}

/**
 * collectBatch, then the job dir's `lrms_done` and `diag` as they now are (undefined done: the
 * batch job has not ended): what the INLRMS and CANCELING handlers read, without reading twice.
 */
export async function batchResult(ctx: JemContext, jobId: string): Promise<{ done: string | undefined; diag: string | undefined }> {
  const { done, diag, refused } = await collectBatchFiles(ctx.control, jobId);
  if (refused.length > 0) ctx.log.warn({ jobId, refused }, "batch files the job left were not read");
  return { done, diag };
}

const scrubbers = new WeakMap<JemContext, AccountScrub | undefined>();

/**
 * What a pool lease release runs on each account first (src/contain/scrub.ts): with mapping on
 * (a privileged JEM), leftover processes, crontab/at entries and shared temp files of the account
 * are removed, and a lease whose account cannot be made clean is kept.
 */
export function leaseScrub(ctx: JemContext): AccountScrub | undefined {
  if (!ctx.priv) return undefined;
  if (!scrubbers.has(ctx)) scrubbers.set(ctx, accountScrubber({ config: ctx.config, log: ctx.log }));
  return scrubbers.get(ctx);
}
