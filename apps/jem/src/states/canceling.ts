import type { JobRecord } from "@ce/store";
import { jobLog, type JemContext } from "../context.js";
import { batchEnd, logErrors } from "../files.js";
import { batchDirOf, batchResult, runAsOf } from "../priv/jobs.js";
import { completion, endBatchJob } from "./inlrms.js";
import { moved, waitUntil, type Step } from "./step.js";
import { transition } from "./transition.js";
import { backendFor } from "../lrms/index.js";

const RECANCEL_MS = 30_000;
const GIVE_UP_MS = 3_600_000;

/**
 * CANCELING (REST KILLING): the cancel was sent; wait for the batch job's end (`lrms_done`),
 * repeating the cancel every 30 s and giving up after an hour (docs/architecture.md, Job flow).
 */
export async function canceling(ctx: JemContext, job: JobRecord): Promise<Step> {
  const files = await batchResult(ctx, job.id);
  const done = files.done;
  const age = Date.now() - job.stateSince;
  if (done === undefined && age > GIVE_UP_MS) {
    files.done = "-1 Job cancellation timed out\n";
    await batchEnd.replace(ctx, job.id, files.done);
    await logErrors(ctx, job.id, "Batch job did not end within an hour of the cancel request; giving up");
  } else if (done === undefined) {
    if (age > RECANCEL_MS && job.localId) {
      const backend = backendFor(ctx.backends, job.backend);
      await runAsOf(ctx, job)
        .then((runAs) => backend?.cancel(job.localId!, { jobId: job.id, jobDir: batchDirOf(ctx, job.id), runAs }))
        .catch((e: unknown) => jobLog(ctx, job).warn({ err: e }, "batch cancel failed"));
    }
    return waitUntil(Date.now() + RECANCEL_MS);
  }
  await endBatchJob(ctx, job);
  const { change } = completion(files);
  return moved(await transition(ctx, job, "FINISHING", { reason: "Job finished executing in LRMS", change }));
}
