import { Keys, readPendingJobs, type PendingJob } from "@ce/store";
import type { CliContext } from "./jobs.js";
import { table } from "./format.js";

/**
 * `ceadm jobs list --pending`: every job waiting in the batch system with the batch system's own
 * reason (issue 36; Slurm `%r`, Grid Engine scheduling info), as the JEM's bulk poll left it on
 * the record, then the sums per reason. `--owner` and `--limit` narrow the list as for `jobs list`.
 */
export async function pendingList(c: CliContext): Promise<number> {
  let jobs: PendingJob[] = await readPendingJobs(c.ops.redis, c.ops.prefix);
  if (c.values.owner) {
    const keys = new Keys(c.ops.prefix);
    const owners = await c.ops.redis.pipeline(jobs.map((j) => ["hget", keys.job(j.id), "owner"])).exec();
    jobs = jobs.filter((_, i) => owners?.[i]?.[1] === c.values.owner);
  }
  jobs.sort((a, b) => a.reason.localeCompare(b.reason) || a.queue.localeCompare(b.queue) || a.id.localeCompare(b.id));
  const limit = c.values.limit ? Number(c.values.limit) : undefined;
  const shown = limit !== undefined && Number.isSafeInteger(limit) && limit > 0 ? jobs.slice(0, limit) : jobs;
  const byReason = new Map<string, number>();
  for (const j of jobs) byReason.set(j.reason, (byReason.get(j.reason) ?? 0) + 1);
  const sums = [...byReason.entries()].sort((a, b) => b[1] - a[1]).map(([reason, n]) => ({ reason, jobs: n }));
  c.out(
    c.json
      ? JSON.stringify({ jobs: shown, total: jobs.length, byReason: sums }, null, 2)
      : jobs.length === 0
        ? "no job is waiting in the batch system"
        : `${table(
            ["ID", "QUEUE", "VO", "LRMS", "REASON"],
            shown.map((j) => [j.id, j.queue, j.vo || "-", j.lrms, j.reason]),
          )}\n${shown.length} of ${jobs.length} waiting job(s); by reason: ${sums.map((s) => `${s.reason} ${s.jobs}`).join(", ")}`,
  );
  return 0;
}
