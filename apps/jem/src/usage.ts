import type { JobRecord } from "@ce/store";
import { jobLog, type JemContext } from "./context.js";
import { backendFor, type BatchUsage } from "./lrms/index.js";

/** The batch system may write its record of a job a moment after the wrapper ended: asked this often, this far apart. */
const BATCH_TRIES = 3;
const BATCH_RETRY_MS = 1_000;

/**
 * Usage facts a job's record does not hold, appended with its terminal move (lua/update.lua,
 * `u.<name>` in the usage stream): bytes staged from the `statistics` control file (one line per
 * transfer, written by the staging worker) and the queue's partition and benchmark as configured
 * when the job ended, and what the batch system measured of it (`u.batch*`, the back end's `usage`
 * script: Slurm's sacct or job completion log), which the record prefers to the wrapper's figures.
 * Best effort: an unreadable file or a batch system without a record gives fewer facts, never a
 * lost move.
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
  const batch = await batchUsage(ctx, job);
  if (batch) Object.assign(out, batchFacts(batch));
  return out;
}

async function batchUsage(ctx: JemContext, job: JobRecord): Promise<BatchUsage | undefined> {
  const backend = backendFor(ctx.backends, job.backend);
  if (!backend?.usage || !job.localId) return undefined;
  for (let i = 0; i < BATCH_TRIES; i++) {
    if (i > 0) await new Promise((r) => setTimeout(r, BATCH_RETRY_MS));
    const u = (await backend.usage([{ jobId: job.id, localId: job.localId }])).get(job.id);
    if (u) return u;
  }
  jobLog(ctx, job).info({ localId: job.localId }, "batch system has no usage figures for the job; the record keeps the wrapper's");
  return undefined;
}

/** `batchWall`, `batchCpuUser`, ...: the names usageRecord (packages/accounting) reads. */
export function batchFacts(u: BatchUsage): Record<string, string | number> {
  const out: Record<string, string | number> = {};
  for (const [k, v] of Object.entries(u) as Array<[string, string | number | undefined]>) {
    if (v !== undefined) out[`batch${k[0]!.toUpperCase()}${k.slice(1)}`] = v;
  }
  return out;
}

/** Sums of `inputfile:`/`outputfile:` sizes, downloads split by `fromcache`. */
export function stagedBytes(text: string): { bytesIn: number; bytesOut: number; bytesInCache: number } {
  let bytesIn = 0,
    bytesOut = 0,
    bytesInCache = 0;
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
