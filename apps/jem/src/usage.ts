import type { JobRecord } from "@ce/store";
import type { JemContext } from "./context.js";

/**
 * Usage facts a job's record does not hold, appended with its terminal move (lua/update.lua,
 * `u.<name>` in the usage stream): bytes staged from the `statistics` control file (one line per
 * transfer, written by the staging worker) and the queue's partition and benchmark as configured
 * when the job ended. Best effort: an unreadable file gives no byte counts, never a lost move.
 */
export async function usageFacts(ctx: JemContext, job: JobRecord): Promise<Record<string, string | number>> {
  const out: Record<string, string | number> = {};
  const q = ctx.config.jobs.queues.find((x) => x.name === job.queue);
  if (q?.partition) out.partition = q.partition;
  if (q?.benchmark) {
    out.benchmarkType = q.benchmark.type;
    out.benchmarkValue = q.benchmark.value;
  }
  const stats = await ctx.control.read(job.id, "statistics").catch(() => undefined);
  if (stats !== undefined) Object.assign(out, stagedBytes(stats));
  return out;
}

/** Sums of `inputfile:`/`outputfile:` sizes, downloads split by `fromcache`. */
export function stagedBytes(text: string): { bytesIn: number; bytesOut: number; bytesInCache: number } {
  let bytesIn = 0, bytesOut = 0, bytesInCache = 0;
  for (const line of text.split("\n")) {
    const m = /^(inputfile|outputfile):(.*)$/.exec(line.trim());
    if (!m) continue;
    const size = Number(/(?:^|,)size=(\d+)(?:,|$)/.exec(m[2]!)?.[1] ?? Number.NaN);
    if (!Number.isSafeInteger(size)) continue;
    if (m[1] === "outputfile") bytesOut += size;
    else if (/(?:^|,)fromcache=yes(?:,|$)/.test(m[2]!)) bytesInCache += size;
    else bytesIn += size;
  }
  return { bytesIn, bytesOut, bytesInCache };
}
