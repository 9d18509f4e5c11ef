import type { Redis } from "ioredis";
import type { Logger } from "pino";
import type { CompiledConfig } from "@ce/config";
import {
  enqueueStaging as storeEnqueueStaging,
  type AdvanceSet,
  type DelegationStore,
  type JobRecord,
  type JobStore,
  type Queues,
} from "@ce/store";
import { type ControlDir } from "@ce/controldir";
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
  /** BullMQ queues the JEM works on (staging transfers). */
  queues: Pick<Queues, "staging">;
  /** The work list: which jobs need a look and when (advance.ts in @ce/store; advance-loop.ts). */
  advance: AdvanceSet;
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
  /** The Redis outage episode (outage.ts): loops report Redis trouble here and wait for its end. */
  outage: import("@ce/store").RedisOutage;
  /** Runs a wait on the batch system for a job without its look holding an advance-loop slot (advance-loop.ts); absent: just runs it. */
  outsideSlot?: (<T>(jobId: string, work: () => Promise<T>) => Promise<T>) | undefined;
  /** Site scripts per state (jobs.hooks); absent when none are configured. */
  hooks?: import("./hooks.js").StateHooks | undefined;
}

export function jobLog(ctx: JemContext, job: Pick<JobRecord, "id" | "requestId">) {
  return ctx.log.child(jobFields(job));
}

/** jobLog's bindings, for a hot line logged once: the same line without building a child logger. */
export function jobFields(job: Pick<JobRecord, "id" | "requestId">): { jobId: string; requestId?: string } {
  return job.requestId ? { jobId: job.id, requestId: job.requestId } : { jobId: job.id };
}

/**
 * "Look at this job" (now, after `delayMs`, or first of all when `urgent`: completions overtake a
 * burst of new submissions). Rings collapse per job; the advance set owns the rule (@ce/store).
 */
export async function enqueueAdvance(
  ctx: JemContext,
  jobId: string,
  _reason: string,
  delayMs = 0,
  _requestId?: string,
  opts: { urgent?: boolean } = {},
): Promise<void> {
  await ctx.advance.ring([jobId], opts.urgent ? 1 : Date.now() + delayMs);
}

/** Timer: look at the job at `at` (unless it is due earlier anyway). */
export async function enqueueAdvanceAt(ctx: JemContext, jobId: string, at: number): Promise<void> {
  await ctx.advance.ring([jobId], at);
}

export async function enqueueStaging(ctx: JemContext, job: JobRecord, direction: "in" | "out"): Promise<void> {
  await storeEnqueueStaging(ctx.queues.staging, job.id, direction, job.requestId);
}
