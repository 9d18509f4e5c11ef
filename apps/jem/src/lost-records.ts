import type { JemContext } from "./context.js";
import { removeJobFiles } from "./priv/rootfs.js";

/** Files this much older than any record could be are lost, not in the middle of a submission. */
export const LOST_AFTER_MS = 10 * 60_000;
const CHUNK = 1_000;

/**
 * Removes the control and session files of job ids that have no record (the record was lost:
 * a Redis restored from an older AOF, a record removed by hand, a crash between record removal
 * and file removal). Nothing else would ever remove them, and a session may hold a user's data
 * on disk forever. Files younger than LOST_AFTER_MS and ids with a creating mark are left alone
 * (a submission in progress), and a Redis error stops the pass before anything is removed.
 * O(jobs on disk): the JEM runs it rarely (`jem.lostRecordSweepSeconds`).
 */
export async function sweepLostRecords(ctx: JemContext, now = Date.now()): Promise<number> {
  let removed = 0;
  let chunk: string[] = [];
  const flush = async () => {
    const ids = chunk;
    chunk = [];
    const live = await ctx.jobs.existing(ids);
    for (const id of ids) {
      if (live.has(id)) continue;
      try {
        await removeJobFiles(ctx.control, id);
        removed++;
        ctx.log.warn({ jobId: id }, "removed the control and session files of a job without a record (lost record)");
      } catch (e) {
        ctx.log.warn({ err: e, jobId: id }, "files of a job without a record not removed");
      }
    }
  };
  for await (const { id, mtimeMs } of ctx.control.listJobIds()) {
    if (now - mtimeMs < LOST_AFTER_MS) continue;
    chunk.push(id);
    if (chunk.length >= CHUNK) await flush();
  }
  if (chunk.length) await flush();
  return removed;
}
