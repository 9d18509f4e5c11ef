import { FINAL_INTERNAL_STATES, type InternalState } from "@ce/model";
import { enqueueCommands, enqueueRecovery, type JobRecord, type QueueCatalog } from "@ce/store";
import type { JemContext } from "./context.js";

/** States whose jobs need the JEM; INLRMS is only listed at start (afterwards watch + poll cover it). */
const ACTIVE: readonly InternalState[] = ["ACCEPTED", "PREPARING", "SUBMIT", "FINISHING", "CANCELING"];

/**
 * Rebuilds in-flight work from Redis, the only state the JEM trusts: every job in a non-final
 * state gets an `advance`. Deduplicated per job for `ttlMs`, so the periodic pass is cheap and
 * several JEMs starting together do not multiply work. A JEM killed at any moment therefore loses
 * nothing: its half-done steps are redone (each is idempotent) by whichever JEM comes next.
 */
export async function recover(ctx: JemContext, opts: { includeInlrms: boolean; ttlMs: number }): Promise<number> {
  const ids = new Set<string>();
  for (const s of ACTIVE) for (const id of await ctx.jobs.idsInState(s)) ids.add(id);
  if (opts.includeInlrms) for (const id of await ctx.jobs.idsInState("INLRMS")) ids.add(id);
  // EXECUTED (PENDING:INLRMS) waits for a staging slot, not for the batch system.
  else for (const id of await ctx.jobs.idsInRest(["EXECUTED"])) ids.add(id);
  const list = [...ids];
  for (let i = 0; i < list.length; i += 500) {
    await enqueueRecovery(ctx.queues.advance, list.slice(i, i + 500), opts.ttlMs);
  }
  if (list.length > 0) ctx.log.info({ jobs: list.length }, "in-flight jobs queued for another look");
  await ringOpenRequests(ctx);
  return list.length;
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
