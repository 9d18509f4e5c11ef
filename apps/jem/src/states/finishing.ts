import { type JobChange, type JobRecord } from "@ce/store";
import { mdsTime, fileq } from "@ce/controldir";
import { enqueueStaging, jobLog, type JemContext } from "../context.js";
import { removeProxyFile } from "../credentials.js";
import { readPrivate, readSpec, removePrivate, updateLocal } from "../files.js";
import { outputPlan, purgeSession } from "../staging/outputs.js";
import { outcomeOf } from "../staging/worker.js";
import { usageFacts } from "../usage.js";
import { moved, WAIT, type Step } from "./step.js";
import { failureChange, KILL_TEXT, transition } from "./transition.js";

/**
 * FINISHING: the session dir is purged to the outputs this outcome delivers and the uploads run
 * in the staging worker; when it reports (`stageout.done`) the job is FINISHED. A failure here
 * still ends in FINISHED (FAILED). A kill aborts the uploads and ends the job KILLED.
 */
export async function finishing(ctx: JemContext, job: JobRecord): Promise<Step> {
  if (job.killRequested && job.failedCause !== "client") {
    await ctx.publishAbort(job.id);
    return finish(ctx, job, failureChange(job, KILL_TEXT, { state: "FINISHING", cause: "client" }), KILL_TEXT);
  }
  // The batch job is over: its proxy file is no longer needed (staging reads the delegation store).
  await removeProxyFile(ctx, job);
  const desc = await readSpec(ctx, job.id);
  if (!desc) return finish(ctx, job, {});
  const session = ctx.control.sessionDir(job.id);
  const plan = await outputPlan(session, desc, outcomeOf(job), job.rerun, ctx.config.staging.maxOutputListLines);
  // A refused `@list` file goes through the stage-out, which reports the refusal as a failure.
  if (plan.uploads.length === 0 && plan.refused.length === 0) {
    // An empty session (a job that wrote nothing) has nothing to purge: one file-thread call.
    if ((await fileq.one(["isEmptyDir", session])) !== true) await purgeSession(session, plan);
    return finish(ctx, job, {}, undefined, { proxyRemoved: true });
  }
  const report = await readPrivate(ctx, job.id, "stageout.done");
  if (report === undefined) {
    await enqueueStaging(ctx, job, "out");
    return WAIT;
  }
  let failures: string[] = [];
  let cause: "user" | "internal" = "internal";
  try {
    const r = JSON.parse(report) as { failures?: string[]; cause?: string };
    failures = r.failures ?? [];
    if (r.cause === "user") cause = "user";
  } catch {
    failures = ["stage-out report unreadable"];
  }
  if (failures.length === 0) return finish(ctx, job, {});
  const text = `Failed in data staging: ${failures.join("; ")}`.slice(0, 1024);
  return finish(ctx, job, failureChange(job, text, { state: "FINISHING", cause }), text);
}

/**
 * Enters FINISHED: outcome, end time, and the session-dir expiry (the description's lifetime, capped by config).
 * `proxyRemoved`: this look removed the proxy files already (no second pair of unlinks).
 */
export async function finish(
  ctx: JemContext,
  job: JobRecord,
  change: JobChange,
  failedLine?: string,
  opts: { proxyRemoved?: boolean } = {},
): Promise<Step> {
  const now = Date.now();
  const merged = { ...job, ...change } as JobRecord;
  const cap = ctx.config.jobs.sessionLifetimeSeconds;
  const lifetime = Number.isFinite(job.lifetime) && job.lifetime >= 0 ? Math.min(job.lifetime, cap) : cap;
  const cleanupAt = now + lifetime * 1000;
  // Scheduled before the CAS: an expiry entry for a job that is not final is simply dropped.
  await ctx.jobs.scheduleExpiry(job.id, cleanupAt);
  const next = await transition(ctx, job, "FINISHED", {
    reason: outcomeOf(merged) === "success" ? "Stage-out finished." : outcomeOf(merged) === "killed" ? "Job was killed" : "Job failed",
    change: { ...change, outcome: outcomeOf(merged), endedAt: now, cleanupAt, lrms: undefined },
    ...(failedLine ? { failedLine } : {}),
    usage: await usageFacts(ctx, job),
  });
  if (next) {
    await updateLocal(ctx, job.id, { cleanuptime: mdsTime(new Date(cleanupAt)) }).catch((e: unknown) =>
      jobLog(ctx, job).warn({ err: e }, "local not updated"),
    );
    await removePrivate(ctx, job.id, "stageout.done", "stagein.failed", "submitting");
    if (!opts.proxyRemoved) await removeProxyFile(ctx, job);
  }
  // The FINISHED handler only acts on a clean request (the expiry is scheduled above, before the
  // CAS): without one, the look ends here. A clean arriving after the CAS rings the job anew.
  return next?.cleanRequested ? moved(next) : WAIT;
}
