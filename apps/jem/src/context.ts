import type { Queue } from "bullmq";
import type { Redis } from "ioredis";
import type { Logger } from "pino";
import type { CompiledConfig } from "@ce/config";
import { QUEUE_DEFAULTS, advanceJobId, type ControlDir, type DelegationStore, type JobRecord, type JobStore, type QueueCatalog } from "@ce/store";
import type { Backend } from "./lrms/types.js";
import type { Locks } from "./locks.js";

/**
 * Everything a JEM component needs, built once by `startJem`. Handlers receive it explicitly
 * (no module state), so several JEMs can run in one process in tests.
 */
export interface JemContext {
  config: CompiledConfig;
  log: Logger;
  redis: Redis;
  jobs: JobStore;
  control: ControlDir;
  delegations: DelegationStore | undefined;
  /** Back ends by name; jobs carry the name they were submitted with (`JobRecord.backend`). */
  backends: Map<string, Backend>;
  queues: { [K in keyof QueueCatalog]: Queue<QueueCatalog[K]> };
  locks: Locks;
  /** Running transfers of this process, per job; aborted on kill (locally and via pub/sub). */
  aborts: Map<string, AbortController>;
  /** Publishes an abort to every JEM (the staging of a job may run in another process). */
  publishAbort(jobId: string): Promise<void>;
  hostname: string;
  /** Prometheus metrics of this JEM (absent in tests that do not need them). */
  metrics?: import("@ce/ops").CeMetrics | undefined;
  /** The privileged component (src/priv): present when mapping is on; jobs then run as their mapped accounts. */
  priv?: import("./priv/priv.js").Privileged | undefined;
  /** Lease of the per-job lock (ms). */
  jobLockMs: number;
}

export function jobLog(ctx: JemContext, job: Pick<JobRecord, "id" | "requestId">) {
  return ctx.log.child(job.requestId ? { jobId: job.id, requestId: job.requestId } : { jobId: job.id });
}

/** Queues "look at this job" (optionally later). Unique ids: an advance is never swallowed. */
export async function enqueueAdvance(ctx: JemContext, jobId: string, reason: string, delayMs = 0, requestId?: string, opts: { urgent?: boolean } = {}): Promise<void> {
  const safeReason = reason.replace(/[^A-Za-z0-9_-]/g, "_");
  await ctx.queues.advance.add(
    "advance",
    requestId ? { jobId, reason, requestId } : { jobId, reason },
    {
      ...QUEUE_DEFAULTS.advance,
      jobId: `${advanceJobId(jobId, safeReason)}${delayMs > 0 ? "d" : ""}`,
      ...(delayMs > 0 ? { delay: Math.ceil(delayMs) } : {}),
      // Completions jump the queue: a burst of submissions must not delay FINISHED (latency target).
      ...(opts.urgent ? { lifo: true } : {}),
    },
  );
}

/** Timer wake-up; the id is derived from the time so repeated waits for one deadline collapse. */
export async function enqueueAdvanceAt(ctx: JemContext, jobId: string, at: number): Promise<void> {
  const delay = Math.max(0, Math.ceil(at - Date.now()));
  await ctx.queues.advance.add("advance", { jobId, reason: "timer" }, { ...QUEUE_DEFAULTS.advance, jobId: `${jobId}:timer:${Math.ceil(at)}`, delay });
}

/**
 * Queues the transfers of a job. BullMQ deduplication keeps one waiting/active staging job per
 * job and direction until it completes, so every handler pass may call this freely.
 */
export async function enqueueStaging(ctx: JemContext, job: JobRecord, direction: "in" | "out"): Promise<void> {
  await ctx.queues.staging.add(
    "staging",
    job.requestId ? { jobId: job.id, direction, requestId: job.requestId } : { jobId: job.id, direction },
    { ...QUEUE_DEFAULTS.staging, deduplication: { id: `${direction}-${job.id}` } },
  );
}
