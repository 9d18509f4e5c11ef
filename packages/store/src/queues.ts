import { Queue, UnrecoverableError, type ConnectionOptions, type JobsOptions } from "bullmq";
import { z } from "zod";

/**
 * The BullMQ queues of the JEMs (staging transfers): one zod schema per queue is the payload's
 * type at both ends, and the consumer parses what it takes off Redis (readPayload), so a payload
 * written by another version or by hand fails with its reason instead of steering a job. Queue
 * names live under the CE hash-tag prefix (Redis Cluster safe).
 */
// A job id names a directory and a BullMQ job: no `/`, no `:` (BullMQ reserves it in custom ids).
const jobId = z
  .string()
  .min(1)
  .max(128)
  .regex(/^[A-Za-z0-9._-]+$/, "a job id: letters, digits, '.', '_' or '-'");
const requestId = z.string().max(256).optional();
export const QUEUE_PAYLOADS = {
  /** Data transfers of one job in PREPARING (downloads) or FINISHING (uploads). */
  staging: z.object({ jobId, direction: z.enum(["in", "out"]), requestId }).strict(),
} as const;
export type QueueCatalog = { [N in keyof typeof QUEUE_PAYLOADS]: z.infer<(typeof QUEUE_PAYLOADS)[N]> };
export type QueueName = keyof QueueCatalog;
export const QUEUE_NAMES: readonly QueueName[] = ["staging"];

export const QUEUE_DEFAULTS: Record<QueueName, JobsOptions> = {
  staging: { attempts: 1, removeOnComplete: 1000, removeOnFail: 5000 },
};

/** One typed BullMQ queue per catalog name: the producers below take these. */
export type Queues = { [N in QueueName]: Queue<QueueCatalog[N]> };

/** THE way to open a queue (JEM, ops): CE prefix, catalog defaults, the process's connection. */
export function openQueue<N extends QueueName>(name: N, connection: ConnectionOptions, prefix: string): Queue<QueueCatalog[N]> {
  return new Queue<QueueCatalog[N]>(name, { connection, prefix, defaultJobOptions: QUEUE_DEFAULTS[name] });
}

/**
 * A queue job's payload as its schema allows, or an UnrecoverableError naming what is wrong (BullMQ
 * fails such a job at once: retrying cannot mend it).
 */
export function readPayload<N extends QueueName>(name: N, data: unknown): QueueCatalog[N] {
  const r = QUEUE_PAYLOADS[name].safeParse(data);
  if (r.success) return r.data as QueueCatalog[N];
  const why = r.error.issues.map((i) => `${i.path.join(".") || "payload"}: ${i.message}`).join("; ");
  throw new UnrecoverableError(`malformed ${name} queue payload (${why})`);
}

/** Transfers of one job: one waiting/active staging job per job and direction (deduplication until it completes). */
export async function enqueueStaging(
  queue: Queue<QueueCatalog["staging"]>,
  jobId: string,
  direction: "in" | "out",
  requestId?: string,
): Promise<void> {
  const data = QUEUE_PAYLOADS.staging.parse(requestId ? { jobId, direction, requestId } : { jobId, direction });
  await queue.add("staging", data, { ...QUEUE_DEFAULTS.staging, deduplication: { id: `${direction}-${jobId}` } });
}
