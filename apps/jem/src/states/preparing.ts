import { awaitingMessage, awaitingText, type JobDescription } from "@ce/model";
import type { JobRecord } from "@ce/store";
import { enqueueStaging, type JemContext } from "../context.js";
import { logErrors, readInputStatus, readPrivate, readSpec } from "../files.js";
import { inLrms, underLimit } from "../limits.js";
import { parseStageInFailure } from "../staging/blame.js";
import { sessionFileStat } from "../staging/paths.js";
import { moved, WAIT, waitUntil, type Step } from "./step.js";
import { failToFinishing, KILL_TEXT, transition } from "./transition.js";

/**
 * PREPARING / PENDING:PREPARING (REST PREPARING / PREPARED): remote inputs are downloaded by the
 * staging worker, client uploads are awaited (listed in `input_status`, present, size right),
 * then the job waits for a batch slot (maxInLrms) or, data-only, goes straight to FINISHING.
 */
export async function preparing(ctx: JemContext, current: JobRecord): Promise<Step> {
  let job = current;
  if (job.killRequested) {
    await ctx.publishAbort(job.id);
    return moved(await failToFinishing(ctx, job, KILL_TEXT, { state: "PREPARING", cause: "client" }));
  }
  const desc = await readSpec(ctx, job.id);
  if (!desc) return moved(await failToFinishing(ctx, job, "Could not process job description", { cause: "internal" }));
  const fail = async (text: string, cause: "user" | "internal" = "internal") =>
    moved(await failToFinishing(ctx, job, text, { state: "PREPARING", cause }));

  // Nothing to stage in and no free stage-in: `input_status` cannot change the outcome, no read.
  const status =
    desc.inputFiles.length > 0 || desc.freeStageIn ? await readInputStatus(ctx, job.id) : { paths: new Set<string>(), complete: false };
  if (!job.pending) {
    // Only the staging worker writes it, and only for remote inputs: no read for upload-only jobs.
    const stagingError = desc.inputFiles.some((f) => f.source)
      ? parseStageInFailure(await readPrivate(ctx, job.id, "stagein.failed"))
      : undefined;
    if (stagingError) return fail(`Failed in data staging: ${stagingError.text}`, stagingError.cause);
    const missingRemote = desc.inputFiles.filter((f) => f.source && !status.paths.has(f.name));
    if (missingRemote.length > 0) await enqueueStaging(ctx, job, "in");

    const uploads = await checkUploads(ctx, job, desc, status.paths);
    if (uploads.error) return fail(uploads.error, "user");
    const deadline = job.stateSince + ctx.config.jobs.uploadTimeoutSeconds * 1000;
    if (uploads.missing.length > 0) {
      if (Date.now() >= deadline) return fail(`User file: ${uploads.missing[0]} - Timeout waiting for upload`, "user");
      await showAwaiting(ctx, job, uploads.missing, deadline);
      // Upload completions enqueue an advance; the timer only catches the timeout.
      return waitUntil(deadline);
    }
    if (job.awaiting !== undefined)
      job = (await ctx.jobs.update(job, { awaiting: undefined, uploadDeadline: undefined }, { state: "PREPARING" })) ?? job;
    if (missingRemote.length > 0) return WAIT; // the staging worker advances the job when done
    if (desc.freeStageIn && !status.complete) {
      await transition(ctx, job, "PREPARING", { pending: true, reason: "Waiting for confirmation of stage-in complete from client" });
      return WAIT;
    }
  } else if (desc.freeStageIn && !status.complete) {
    return WAIT;
  }

  if (!desc.executable) {
    return moved(await transition(ctx, job, "FINISHING", { reason: "Pre-staging finished, no executable: batch system skipped" }));
  }
  return underLimit(
    ctx,
    "lrms",
    ctx.config.jobs.maxInLrms,
    () => inLrms(ctx),
    async (free) => {
      if (!free) {
        if (!job.pending) await transition(ctx, job, "PREPARING", { pending: true, reason: "Limit of RUNNING jobs is reached" });
        return WAIT;
      }
      return moved(await transition(ctx, job, "SUBMIT", { reason: "Pre-staging finished, passing job to LRMS" }));
    },
  );
}

/**
 * Keeps the record's "waiting for uploads" facts current (the info document shows them): one
 * record write when the list or the deadline changed, and an `errors` line when the deadline is
 * new (a job admitted by the JEM rather than at creation), not one per upload.
 */
async function showAwaiting(ctx: JemContext, job: JobRecord, missing: readonly string[], deadline: number): Promise<void> {
  const text = awaitingText(missing);
  if (job.awaiting === text && job.uploadDeadline === deadline) return;
  if (job.uploadDeadline !== deadline) await logErrors(ctx, job.id, awaitingMessage(text, deadline));
  await ctx.jobs.update(job, { awaiting: text, uploadDeadline: deadline }, { state: "PREPARING" });
}

/** Client uploads still missing (listed, present, not smaller than declared). */
async function checkUploads(
  ctx: JemContext,
  job: JobRecord,
  desc: JobDescription,
  listed: Set<string>,
): Promise<{ missing: string[]; error?: string }> {
  const missing: string[] = [];
  for (const f of desc.inputFiles) {
    if (f.source) continue;
    if (!listed.has(f.name)) {
      missing.push(f.name);
      continue;
    }
    const st = await sessionFileStat(ctx.control.sessionDir(job.id), f.name);
    if (!st) {
      missing.push(f.name);
      continue;
    }
    if (f.size !== undefined && st.size < f.size) missing.push(f.name);
    else if (f.size !== undefined && st.size > f.size)
      return { missing, error: `User file: ${f.name} - Delivered file is bigger than specified.` };
  }
  return { missing };
}
