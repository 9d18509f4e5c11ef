import { ADMISSION_REASON } from "@ce/model";
import type { JobRecord } from "@ce/store";
import type { JemContext } from "../context.js";
import { readPrivate, readSpec, writePrivate } from "../files.js";
import { activeOfOwner, underLimit } from "../limits.js";
import { moved, WAIT, waitUntil, type Step } from "./step.js";
import { failToFinishing, KILL_TEXT, transition } from "./transition.js";

/** ACCEPTED / PENDING:ACCEPTED (REST ACCEPTING / ACCEPTED): admission into processing. */
export async function accepted(ctx: JemContext, job: JobRecord): Promise<Step> {
  if (job.killRequested) return moved(await failToFinishing(ctx, job, KILL_TEXT, { state: "ACCEPTED", cause: "client" }));
  const desc = await readSpec(ctx, job.id);
  // Description problems and dry runs are not restartable: no failedState (docs/architecture.md, Job flow).
  if (!desc) return moved(await failToFinishing(ctx, job, "Could not process job description", { cause: "internal" }));
  if (desc.dryRun) return moved(await failToFinishing(ctx, job, "Job has dryrun requested. Job skipped.", { cause: "internal" }));

  // The site's admission hook, once per job (its pass is recorded): it may refuse the job.
  if (ctx.hooks?.has("ACCEPTED") && !(await readPrivate(ctx, job.id, "hook.accepted"))) {
    const hooks = ctx.hooks;
    const outcome = ctx.outsideSlot
      ? await ctx.outsideSlot(job.id, () => hooks.check("ACCEPTED", job))
      : await hooks.check("ACCEPTED", job);
    if (outcome.kind === "refuse") {
      return moved(await failToFinishing(ctx, job, `Job refused by the site at ACCEPTED: ${outcome.reason}`, { cause: "user" }));
    }
    await writePrivate(ctx, job.id, "hook.accepted", "pass\n");
  }

  const startAt = desc.startTime?.getTime();
  if (startAt !== undefined && Number.isFinite(startAt) && startAt > Date.now()) return waitUntil(startAt);
  return underLimit(
    ctx,
    `owner:${job.ownerKey}`,
    ctx.config.jobs.maxActivePerOwner,
    () => activeOfOwner(ctx, job.owner),
    async (free) => {
      if (!free) {
        if (!job.pending) await transition(ctx, job, "ACCEPTED", { pending: true, reason: "Jobs per DN limit is reached" });
        return WAIT;
      }
      return moved(await transition(ctx, job, "PREPARING", { reason: ADMISSION_REASON }));
    },
  );
}
