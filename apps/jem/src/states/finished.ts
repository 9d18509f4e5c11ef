import { onJobWiped } from "@ce/mapping";
import type { JobRecord } from "@ce/store";
import { jobLog, type JemContext } from "../context.js";
import { leaseScrub } from "../priv/jobs.js";
import { removeJobFiles } from "../priv/rootfs.js";
import { WAIT, type Step } from "./step.js";

/** Removes every trace of a job: session dir, control dir, Redis record and indexes. */
export async function cleanJob(ctx: JemContext, job: JobRecord): Promise<void> {
  await removeJobFiles(ctx.control, job.id); // by descriptor: never through a link the job left
  await ctx.jobs.remove(job.id);
  await onJobWiped(ctx.redis, ctx.config.redis.prefix, job.owner, ctx.config.mapping, leaseScrub(ctx)).catch((e: unknown) =>
    ctx.log.warn({ err: e }, "pool lease not released"),
  );
  jobLog(ctx, job).info("job cleaned");
}

/** FINISHED (REST FINISHED/FAILED/KILLED): a deferred clean acts now; otherwise expiry takes over. */
export async function finished(ctx: JemContext, job: JobRecord): Promise<Step> {
  if (job.cleanRequested) {
    await cleanJob(ctx, job);
    return WAIT;
  }
  // Idempotent: repairs a schedule lost between the CAS and the ZADD.
  if (job.cleanupAt) await ctx.jobs.scheduleExpiry(job.id, job.cleanupAt);
  return WAIT;
}

/** DELETED (REST WIPED): only the expiry loop acts (record removal). */
export async function deleted(ctx: JemContext, job: JobRecord): Promise<Step> {
  if (job.cleanRequested) await cleanJob(ctx, job);
  return WAIT;
}
