import { randomUUID } from "node:crypto";
import { Queue, type ConnectionOptions, type JobsOptions } from "bullmq";

/**
 * Typed catalog of the BullMQ queues between gateways and JEMs. A payload type mismatch is a
 * compile error at both ends. Queue names live under the CE hash-tag prefix (Redis Cluster safe).
 */
export interface QueueCatalog {
  /** Doorbell of kill / clean / restart: the request itself is on the job record (commands.ts, requestCommands). */
  commands: { action: "kill" | "clean" | "restart"; jobId: string; requestId?: string | undefined };
  /** "look at this job now": new submissions, completed uploads, batch completions, timers. */
  advance: { jobId: string; reason: string; requestId?: string | undefined };
  /** Data transfers of one job in PREPARING (downloads) or FINISHING (uploads). */
  staging: { jobId: string; direction: "in" | "out"; requestId?: string | undefined };
}
export type QueueName = keyof QueueCatalog;
export const QUEUE_NAMES: readonly QueueName[] = ["commands", "advance", "staging"];

export const QUEUE_DEFAULTS: Record<QueueName, JobsOptions> = {
  commands: { attempts: 5, backoff: { type: "exponential", delay: 500 }, removeOnComplete: 1000, removeOnFail: 5000 },
  advance: { attempts: 10, backoff: { type: "exponential", delay: 500 }, removeOnComplete: true, removeOnFail: 5000 },
  staging: { attempts: 1, removeOnComplete: 1000, removeOnFail: 5000 },
};

/** One typed BullMQ queue per catalog name: the producers below take these. */
export type Queues = { [N in QueueName]: Queue<QueueCatalog[N]> };

/** THE way to open a queue (gateway, JEM, ops): CE prefix, catalog defaults, the process's connection. */
export function openQueue<N extends QueueName>(name: N, connection: ConnectionOptions, prefix: string): Queue<QueueCatalog[N]> {
  return new Queue<QueueCatalog[N]>(name, { connection, prefix, defaultJobOptions: QUEUE_DEFAULTS[name] });
}

// Job-id rules. No `:` in any id — BullMQ reserves it in custom ids.
const safe = (s: string) => s.replace(/[^A-Za-z0-9-]/g, "-");

/**
 * `advance` ids are unique per call: a request is never swallowed by one that is waiting or
 * already running (the state may have changed since it read the job). Handlers are idempotent,
 * so duplicates only cost a look.
 */
export function advanceJobId(jobId: string, reason: string): string {
  return `${jobId}_${safe(reason)}_${Date.now()}_${randomUUID().slice(0, 8)}`;
}

type AdvanceQueue = Queue<QueueCatalog["advance"]>;

/** "Look at this job" now (or after `delayMs`); `urgent` jumps the queue (completions). */
export async function enqueueAdvance(
  queue: AdvanceQueue,
  jobId: string,
  reason: string,
  opts: { requestId?: string | undefined; delayMs?: number; urgent?: boolean } = {},
): Promise<void> {
  const delay = Math.ceil(opts.delayMs ?? 0);
  await queue.add("advance", opts.requestId ? { jobId, reason, requestId: opts.requestId } : { jobId, reason }, {
    ...QUEUE_DEFAULTS.advance,
    jobId: advanceJobId(jobId, reason),
    ...(delay > 0 ? { delay } : {}),
    ...(opts.urgent ? { lifo: true } : {}),
  });
}

/** Many "look at this job" at once (new submissions, uploads); same id rule as enqueueAdvance. */
export async function enqueueAdvances(queue: AdvanceQueue, jobs: readonly { jobId: string; reason: string; requestId?: string | undefined }[]): Promise<void> {
  if (jobs.length === 0) return;
  await queue.addBulk(jobs.map((data) => ({ name: "advance", data, opts: { ...QUEUE_DEFAULTS.advance, jobId: advanceJobId(data.jobId, data.reason) } })));
}

/** Timer wake-up. The id is the deadline's, on purpose: repeated waits for one deadline collapse. */
export async function enqueueAdvanceAt(queue: AdvanceQueue, jobId: string, at: number): Promise<void> {
  const delay = Math.max(0, Math.ceil(at - Date.now()));
  await queue.add("advance", { jobId, reason: "timer" }, { ...QUEUE_DEFAULTS.advance, jobId: `${jobId}_timer_${Math.ceil(at)}`, delay });
}

/** Recovery pass: at most one recovery look per job per `ttlMs` (BullMQ deduplication), however many JEMs run it. */
export async function enqueueRecovery(queue: AdvanceQueue, ids: readonly string[], ttlMs: number): Promise<void> {
  if (ids.length === 0) return;
  await queue.addBulk(ids.map((id) => ({
    name: "advance",
    data: { jobId: id, reason: "recover" },
    opts: { ...QUEUE_DEFAULTS.advance, jobId: advanceJobId(id, "recover"), deduplication: { id: `rec-${id}`, ttl: ttlMs } },
  })));
}

/**
 * The doorbell of kill/clean/restart requests whose truth is already on the job record
 * (JobStore.request). One waiting/active command per job and action (deduplication until it
 * completes), so the recovery pass may ring again freely.
 */
export async function enqueueCommands(queue: Queue<QueueCatalog["commands"]>, cmds: readonly QueueCatalog["commands"][]): Promise<void> {
  if (cmds.length === 0) return;
  await queue.addBulk(cmds.map((data) => ({
    name: data.action,
    data,
    opts: { ...QUEUE_DEFAULTS.commands, jobId: `${data.jobId}_${data.action}_${randomUUID().slice(0, 8)}`, deduplication: { id: `cmd-${data.action}-${data.jobId}` } },
  })));
}

/** Transfers of one job: one waiting/active staging job per job and direction (deduplication until it completes). */
export async function enqueueStaging(queue: Queue<QueueCatalog["staging"]>, jobId: string, direction: "in" | "out", requestId?: string): Promise<void> {
  await queue.add("staging", requestId ? { jobId, direction, requestId } : { jobId, direction }, { ...QUEUE_DEFAULTS.staging, deduplication: { id: `${direction}-${jobId}` } });
}
