import { randomUUID } from "node:crypto";
import { Queue, type ConnectionOptions, type JobsOptions } from "bullmq";

/**
 * Typed catalog of the BullMQ queues between gateways and JEMs. A payload type mismatch is a
 * compile error at both ends. Queue names live under the CE hash-tag prefix (Redis Cluster safe).
 */
export interface QueueCatalog {
  /** Doorbell of kill / clean / restart: the request itself is on the job record (commands.ts, requestCommands). */
  commands: { action: "kill" | "clean" | "restart"; jobId: string; requestId?: string | undefined };
  /** Data transfers of one job in PREPARING (downloads) or FINISHING (uploads). */
  staging: { jobId: string; direction: "in" | "out"; requestId?: string | undefined };
}
export type QueueName = keyof QueueCatalog;
export const QUEUE_NAMES: readonly QueueName[] = ["commands", "staging"];

export const QUEUE_DEFAULTS: Record<QueueName, JobsOptions> = {
  commands: { attempts: 5, backoff: { type: "exponential", delay: 500 }, removeOnComplete: 1000, removeOnFail: 5000 },
  staging: { attempts: 1, removeOnComplete: 1000, removeOnFail: 5000 },
};

/** One typed BullMQ queue per catalog name: the producers below take these. */
export type Queues = { [N in QueueName]: Queue<QueueCatalog[N]> };

/** THE way to open a queue (gateway, JEM, ops): CE prefix, catalog defaults, the process's connection. */
export function openQueue<N extends QueueName>(name: N, connection: ConnectionOptions, prefix: string): Queue<QueueCatalog[N]> {
  return new Queue<QueueCatalog[N]>(name, { connection, prefix, defaultJobOptions: QUEUE_DEFAULTS[name] });
}

// Job-id rule: no `:` in any id — BullMQ reserves it in custom ids (job ids are UUIDs).

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
