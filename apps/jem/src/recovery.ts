import { FINAL_INTERNAL_STATES, type InternalState } from "@ce/model";
import { dropOrphanLeases, type JobRecord } from "@ce/store";
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
 * kill/clean/restart requests live on the job records (the gateway wrote them, and rang the job,
 * before its 202); this rings every job whose request still waits for a look, so a ring lost with
 * a Redis failover delays a request but never loses it. Rings collapse on the work list (one
 * member per job), so ringing often is cheap.
 */
async function ringOpenRequests(ctx: JemContext): Promise<void> {
  const ids = await ctx.jobs.openRequests();
  if (ids.length === 0) return;
  const records = await ctx.jobs.getMany(ids);
  const ring: string[] = [];
  const closed: { id: string; record: JobRecord | undefined }[] = [];
  ids.forEach((id, i) => {
    const { open, look } = openRequests(records[i]);
    if (!open) closed.push({ id, record: records[i] });
    if (look) ring.push(id);
  });
  await ctx.advance.ring(ring);
  await ctx.jobs.closeRequests(closed);
  if (ring.length > 0) ctx.log.info({ jobs: ring.length }, "jobs with open requests rung again");
}

/**
 * The requests on a record: `open` until answered (job gone, kill/clean carried out, restart done
 * or refused), `look` when a look must act on one now. A kill of a CANCELING job and a clean of an
 * active job stay open without a look: the state handlers act on those flags as the job moves.
 */
export function openRequests(job: JobRecord | undefined): { open: boolean; look: boolean } {
  if (!job) return { open: false, look: false };
  const final = FINAL_INTERNAL_STATES.has(job.state);
  const look =
    (job.killRequested === true && !final && job.state !== "CANCELING") ||
    job.restartRequested === true ||
    (job.cleanRequested === true && final);
  const open = look || (!final && (job.killRequested === true || job.cleanRequested === true));
  return { open, look };
}
