import type { Redis } from "ioredis";
import { SubmissionHolds, WITHDRAWN_REASON, type JobRecord } from "@ce/store";
import { jobLog, type JemContext } from "../context.js";
import { moved, waitUntil, type Step } from "./step.js";
import { failToFinishing } from "./transition.js";

/**
 * A job in a creation state whose record still carries its submission's hold (@ce/store
 * holds.ts) is never advanced: its request's answer may not have reached the client. Held jobs
 * are due at the hold deadline (lua/create.lua), so this look is also the sweep: past the
 * deadline, the request is withdrawn (atomically, one JEM wins) and each of its jobs fails here
 * without having run, with a reason the client can read. Withdrawn by the gateway (an answer
 * other than 201): the same failure, at once.
 */
const HELD_RECHECK_MS = 1_000;
const holdsOf = new WeakMap<Redis, SubmissionHolds>();

/** `{ step }`: stop here with it; `{ job }`: not held (any more), go on with this record. */
export async function checkHold(ctx: JemContext, job: JobRecord): Promise<{ step: Step } | { job: JobRecord }> {
  if (!job.hold || (job.state !== "ACCEPTED" && job.state !== "PREPARING")) return { job };
  let holds = holdsOf.get(ctx.redis);
  if (!holds) holdsOf.set(ctx.redis, (holds = new SubmissionHolds(ctx.redis, ctx.config.redis.prefix)));
  const v = await holds.expire(job.hold);
  if (v.verdict === "held") {
    // The release rings an ACCEPTED job. A job admitted at creation was rung early by an upload
    // (or a recovery ring): looked at again shortly, at a time other than the deadline itself, so
    // that the release keeps that earlier ring instead of moving it to the upload deadline.
    if (job.state === "ACCEPTED") return { step: waitUntil(v.until) };
    const soon = Date.now() + HELD_RECHECK_MS;
    return { step: waitUntil(soon < v.until ? soon : v.until + 1) };
  }
  if (v.verdict === "ended") {
    // Released (the field is gone) or withdrawn earlier (it stays): the record says which.
    const fresh = await ctx.jobs.get(job.id);
    if (!fresh) return { step: { again: false } };
    if (fresh.hold !== job.hold) return { job: fresh };
    job = fresh;
  }
  jobLog(ctx, job).warn({ hold: job.hold }, "submission not confirmed to the client: job withdrawn without running");
  // Not restartable (no failedState): the client never learnt of the job, or learnt it failed.
  return { step: moved(await failToFinishing(ctx, job, WITHDRAWN_REASON, { cause: "internal" })) };
}
