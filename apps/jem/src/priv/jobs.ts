import type { AccountScrub, JobRecord } from "@ce/store";
import { fileq } from "@ce/controldir";
import type { JemContext } from "../context.js";
import { accountScrubber } from "../contain/scrub.js";
import type { RunAsJob } from "../lrms/types.js";

/**
 * The state handlers' view of the privileged component: with mapping on (`ctx.priv`), a job's
 * batch files live in its account's batch dir and its scripts run as the account; with mapping
 * off (developer mode) everything stays in the job dir and runs as the CE.
 */

/** Where the back end writes and reads the job's batch files (job.sh, comment, diag, lrms_done). */
export function batchDirOf(ctx: JemContext, jobId: string): string {
  return ctx.priv ? ctx.priv.batchDir(jobId) : ctx.control.jobDir(jobId);
}

/** The job's account for the back end; undefined with mapping off. Throws PrivRefused with the reason. */
export async function runAsOf(ctx: JemContext, job: Pick<JobRecord, "id" | "localUser">): Promise<RunAsJob | undefined> {
  if (!ctx.priv) return undefined;
  return ctx.priv.forJob(job.id, await ctx.priv.accountFor(job.id, job.localUser));
}

/** Copies lrms_done/diag/comment the batch job wrote into the job dir (no-op with mapping off). */
export async function collectBatch(ctx: JemContext, jobId: string): Promise<void> {
  await ctx.priv?.collect(jobId);
}

/**
 * collectBatch, then the job dir's `lrms_done` and `diag` as they now are (undefined done: the
 * batch job has not ended): what the INLRMS and CANCELING handlers read, without reading twice.
 */
export async function batchResult(ctx: JemContext, jobId: string): Promise<{ done: string | undefined; diag: string | undefined }> {
  if (ctx.priv) {
    // Not ended in the batch dir: `done` is the job dir's marker if the poller wrote one.
    const { done, diag } = await ctx.priv.collectFiles(jobId);
    return { done, diag };
  }
  const [done, diag] = (await fileq.run([
    ["read", ctx.control.file(jobId, "lrms_done")],
    ["read", ctx.control.file(jobId, "diag")],
  ])) as Array<string | null>;
  return { done: done ?? undefined, diag: diag ?? undefined };
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
