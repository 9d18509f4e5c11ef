import type { InternalState } from "@ce/model";
import type { JobRecord } from "@ce/store";
import { enqueueAdvance, jobLog, type JemContext } from "../context.js";
import { accepted } from "./accepted.js";
import { canceling } from "./canceling.js";
import { deleted, finished } from "./finished.js";
import { finishing } from "./finishing.js";
import { checkHold } from "./held.js";
import { inlrms } from "./inlrms.js";
import { preparing } from "./preparing.js";
import { restartStep } from "./restart.js";
import type { StateHandler } from "./step.js";
import { submit } from "./submit.js";
import { repairControlFiles } from "./transition.js";

export const HANDLERS: Record<InternalState, StateHandler> = {
  ACCEPTED: accepted,
  PREPARING: preparing,
  SUBMIT: submit,
  INLRMS: inlrms,
  CANCELING: canceling,
  FINISHING: finishing,
  FINISHED: finished,
  DELETED: deleted,
};

/** A job never needs more passes than it has states; the bound stops a livelock cold. */
const MAX_STEPS = 12;
const LOCKED_RETRY_MS = 150;

/**
 * One look at a job (claimed from the advance set by advance-loop.ts): under the per-job lease (one JEM, one worker slot per job at a
 * time), run the state handler of the job's current state, and again after every move.
 * A job held by someone else is looked at again shortly (its holder may have read it stale).
 */
export async function advanceJob(ctx: JemContext, jobId: string): Promise<void> {
  // The lease and the record in one round trip (the record is read under the lease).
  const taken = await ctx.locks.tryAcquireJob(jobId, ctx.jobLockMs);
  if (!taken) {
    await enqueueAdvance(ctx, jobId, "locked", LOCKED_RETRY_MS);
    return;
  }
  const { lease } = taken;
  let wakeAt: number | undefined;
  let carried: JobRecord | undefined = taken.record;
  try {
    for (let step = 0; step < MAX_STEPS && lease.held; step++) {
      const job = step === 0 ? carried : (carried ?? (await ctx.jobs.get(jobId)));
      carried = undefined;
      if (!job) break;
      if (step === 0) await repairControlFiles(ctx, job);
      // A job of a submission not yet answered is not advanced; past its hold it is withdrawn.
      const held = job.hold ? await checkHold(ctx, job) : { job };
      // A restart request is answered before the state's own work (it may change the state).
      const r =
        "step" in held
          ? held.step
          : held.job.restartRequested
            ? await restartStep(ctx, held.job)
            : await HANDLERS[held.job.state](ctx, held.job);
      if (!r.again) {
        wakeAt = r.at;
        break;
      }
      carried = r.job;
      if (step === MAX_STEPS - 1) {
        jobLog(ctx, job).error(
          { state: job.state, pending: job.pending, steps: MAX_STEPS },
          `job did not settle: still moving after ${MAX_STEPS} steps in one look; will look again`,
        );
        wakeAt = Date.now() + 1_000;
      }
    }
  } catch (e) {
    await lease.release();
    throw e;
  }
  // The timer ring goes with the release: one script call ends the look.
  await lease.release(wakeAt !== undefined ? { id: jobId, at: wakeAt } : undefined);
}
