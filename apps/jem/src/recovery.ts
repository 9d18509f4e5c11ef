import type { InternalState } from "@ce/model";
import { enqueueRecovery } from "@ce/store";
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
  return list.length;
}
