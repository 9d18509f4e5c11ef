import { onJobWiped, sweepLeases } from "@ce/mapping";
import { sweepDelegations } from "@ce/store";
import type { JemContext } from "./context.js";
import { jobLog } from "./context.js";
import { sweepLostRecords } from "./lost-records.js";
import { leaseScrub } from "./priv/jobs.js";
import { reduceJobDir, removeJobFiles, removeSession } from "./priv/rootfs.js";
import { transition } from "./states/transition.js";

/** Control files that outlive the session dir in WIPED (A-REX job_clean_deleted keeps these). */
const KEEP_WHEN_WIPED = new Set(["local", "failed", "diag", "status", "description", "xml"]);
const BATCH = 500;

/**
 * One expiry pass: FINISHED jobs past `cleanupAt` lose their session dir and most control files
 * and become DELETED (REST WIPED, decisions #18); WIPED records past `removeAt` disappear. Every
 * step holds the job's lease, so any number of JEMs may run it.
 */
export async function expiryPass(ctx: JemContext, now = Date.now()): Promise<number> {
  let handled = 0;
  for (;;) {
    const due = await ctx.jobs.dueExpiries(now, BATCH);
    if (due.length === 0) break;
    for (const id of due) {
      if (await expireOne(ctx, id, now)) handled++;
    }
    if (due.length < BATCH) break;
  }
  await sweepDelegationsOnce(ctx, now);
  await sweepOrphans(ctx, now);
  await sweepLostRecordsWhenDue(ctx, now);
  // Pool leases of identities whose jobs are all gone (paths that did not release them).
  await sweepLeases(ctx.redis, ctx.config.redis.prefix, ctx.config.mapping, leaseScrub(ctx)).catch((e: unknown) =>
    ctx.log.warn({ err: e }, "pool lease sweep failed"),
  );
  return handled;
}

// The first walk comes one full interval after boot, not with the first expiry pass: a JEM that
// restarts often (or a burst of submissions right after boot) must not pay an O(jobs) walk each time.
let lastLostSweep = Date.now();

/** The lost-record walk is O(jobs on disk): at most once per `jem.lostRecordSweepSeconds` per JEM. */
async function sweepLostRecordsWhenDue(ctx: JemContext, now: number): Promise<void> {
  const every = ctx.config.jem.lostRecordSweepSeconds * 1000;
  if (every === 0 || now - lastLostSweep < every) return;
  lastLostSweep = now;
  const t0 = Date.now();
  const removed = await sweepLostRecords(ctx, now).catch((e: unknown) => {
    ctx.log.warn({ err: e }, "lost-record sweep failed");
    return 0;
  });
  ctx.log.info({ removed, ms: Date.now() - t0 }, "lost-record sweep done");
}

/** A submission this old without its record died between writing files and the commit. */
export const ORPHAN_AFTER_MS = 10 * 60_000;

/**
 * Files of submissions that never committed (the gateway died after writing the control files):
 * no record exists, so nothing else would ever remove them.
 */
export async function sweepOrphans(ctx: JemContext, now = Date.now()): Promise<number> {
  let removed = 0;
  for (const id of await ctx.jobs.staleCreating(now - ORPHAN_AFTER_MS)) {
    if (!(await ctx.jobs.get(id))) {
      await removeJobFiles(ctx.control, id).catch((e: unknown) => ctx.log.warn({ err: e, jobId: id }, "orphan files not removed"));
      removed++;
      ctx.log.warn({ jobId: id }, "removed the files of a submission that was never committed");
    }
    await ctx.jobs.doneCreating([id]);
  }
  return removed;
}

async function expireOne(ctx: JemContext, id: string, now: number): Promise<boolean> {
  const lease = await ctx.locks.tryAcquire(`job:${id}`, ctx.jobLockMs);
  if (!lease) return false; // busy: next pass
  try {
    const job = await ctx.jobs.get(id);
    if (!job) {
      await ctx.jobs.unscheduleExpiry(id);
      return false;
    }
    if (job.state === "FINISHED") {
      if ((job.cleanupAt ?? 0) > now) {
        await ctx.jobs.scheduleExpiry(id, job.cleanupAt!);
        return false;
      }
      const removeAt = now + ctx.config.jobs.wipedRecordSeconds * 1000;
      const next = await transition(ctx, job, "DELETED", { reason: "Job stayed unattended too long", change: { removeAt } });
      if (!next) return false;
      await ctx.jobs.scheduleExpiry(id, removeAt);
      await wipe(ctx, id);
      await onJobWiped(ctx.redis, ctx.config.redis.prefix, job.owner, ctx.config.mapping, leaseScrub(ctx)).catch((e: unknown) =>
        ctx.log.warn({ err: e }, "pool lease not released"),
      );
      jobLog(ctx, job).info("session directory expired; job is WIPED");
      return true;
    }
    if (job.state === "DELETED") {
      if ((job.removeAt ?? 0) > now) {
        await ctx.jobs.scheduleExpiry(id, job.removeAt!);
        return false;
      }
      await removeJobFiles(ctx.control, id);
      await ctx.jobs.remove(id);
      jobLog(ctx, job).info("WIPED record expired; job removed");
      return true;
    }
    // Not final (restarted, or scheduled just before a lost CAS): the FINISHED transition re-adds it.
    await ctx.jobs.unscheduleExpiry(id);
    return false;
  } finally {
    await lease.release();
  }
}

/** Session dir and every control file but KEEP_WHEN_WIPED, the batch dir included, by descriptor (priv/rootfs.ts). */
async function wipe(ctx: JemContext, id: string): Promise<void> {
  await removeSession(ctx.control, id);
  await reduceJobDir(ctx.control, id, KEEP_WHEN_WIPED);
}

/** Delegation expiry lives in the store; the JEM's expiry loop is its clock. */
async function sweepDelegationsOnce(ctx: JemContext, now: number): Promise<void> {
  if (!ctx.delegations) return;
  try {
    const r = await sweepDelegations(ctx.delegations, now, { pendingLifetimeSeconds: ctx.config.delegations.pendingLifetimeSeconds });
    if (r.removed.length || r.abandonedRenewals.length)
      ctx.log.info({ removed: r.removed.length, abandonedRenewals: r.abandonedRenewals.length }, "delegations swept");
  } catch (e) {
    ctx.log.warn({ err: e }, "delegation sweep failed");
  }
}
