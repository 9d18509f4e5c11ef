import { FINAL_INTERNAL_STATES, type InternalState } from "@ce/model";
import { dropOrphanLeases, enqueueCommands, type JobRecord, type QueueCatalog } from "@ce/store";
import type { JemContext } from "./context.js";
import { wakeParked } from "./limits.js";

/** States whose jobs need the JEM (INLRMS too: its batch job may have ended while no JEM ran). */
const ACTIVE: readonly InternalState[] = ["ACCEPTED", "PREPARING", "SUBMIT", "INLRMS", "FINISHING", "CANCELING"];

/**
 * Boot, and after a Redis outage episode or a reconnect (daemon.ts): every job in a non-final
 * state is rung once, so whatever this (or a dead) JEM left half done, or a failover lost, is looked
 * at again — each step is idempotent. O(active jobs), at those times only. Otherwise,
 * lost work comes back through expired leases of the advance set (advance-loop.ts), not by
 * re-ringing everything: see `periodicRecovery`.
 */
export async function recover(ctx: JemContext): Promise<number> {
  // Leases no look holds (a release lost with the old primary) would keep the rings below from
  // being claimed until they expire.
  const orphans = await dropOrphanLeases(ctx.redis, ctx.config.redis.prefix);
  if (orphans.length > 0) ctx.log.info({ jobs: orphans.length }, "work-list leases without a look ended");
  let n = 0;
  for (const s of ACTIVE) {
    const ids = await ctx.jobs.idsInState(s);
    await ctx.advance.ring(ids);
    n += ids.length;
  }
  if (n > 0) ctx.log.info({ jobs: n }, "active jobs rung (each looked at again)");
  await ringOpenRequests(ctx);
  return n;
}

/**
 * The periodic pass, independent of the number of jobs: open kill/clean/restart requests are rung
 * again (O(open requests)), and parked jobs get a bounded wake-up when a limit has room (a wake
 * lost with a dead JEM must not park them forever).
 */
export async function periodicRecovery(ctx: JemContext): Promise<void> {
  await ringOpenRequests(ctx);
  await wakeParked(ctx);
}

/**
 * kill/clean/restart requests live on the job records (the gateway wrote them before its 202);
 * this rings the command queue again for every request still open, so a dropped queue message
 * (5 failed attempts, lost Redis write, flushed queue) delays a request but never loses it.
 * The command queue deduplicates per job and action, so ringing often is cheap.
 */
async function ringOpenRequests(ctx: JemContext): Promise<void> {
  const ids = await ctx.jobs.openRequests();
  if (ids.length === 0) return;
  const records = await ctx.jobs.getMany(ids);
  const ring: QueueCatalog["commands"][] = [];
  const closed: { id: string; record: JobRecord | undefined }[] = [];
  ids.forEach((id, i) => {
    const { open, ring: actions } = openRequests(records[i]);
    if (!open) closed.push({ id, record: records[i] });
    for (const action of actions) ring.push({ action, jobId: id });
  });
  await enqueueCommands(ctx.queues.commands, ring);
  await ctx.jobs.closeRequests(closed);
  if (ring.length > 0) ctx.log.info({ commands: ring.length }, "open job requests rung again");
}

type Action = QueueCatalog["commands"]["action"];

/**
 * The requests on a record: `open` until answered (job gone, kill/clean carried out, restart done
 * or refused), `ring` the commands that must run for them. A kill of a CANCELING job and a clean
 * of an active job stay open without a command: the state handlers act on those flags.
 */
export function openRequests(job: JobRecord | undefined): { open: boolean; ring: Action[] } {
  if (!job) return { open: false, ring: [] };
  const final = FINAL_INTERNAL_STATES.has(job.state);
  const ring: Action[] = [];
  if (job.killRequested && !final && job.state !== "CANCELING") ring.push("kill");
  if (job.restartRequested) ring.push("restart");
  if (job.cleanRequested && final) ring.push("clean");
  const open = ring.length > 0 || (!final && (job.killRequested === true || job.cleanRequested === true));
  return { open, ring };
}
