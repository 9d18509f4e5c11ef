import type { ConnectionOptions, JobsOptions } from "bullmq";

/**
 * Typed catalog of the BullMQ queues between gateways and JEMs. A payload type mismatch is a
 * compile error at both ends. Queue names live under the CE hash-tag prefix (Redis Cluster safe).
 */
export interface QueueCatalog {
  /** kill / clean / restart requests from the REST interface (answered 202). */
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

/**
 * BullMQ job ids for `advance`: at most one waiting "advance" per CE job; while one is active a
 * new request must still be queued (the state may have changed), so ids carry a coarse time slot.
 */
export function advanceJobId(jobId: string, reason: string): string {
  // No `:` — BullMQ reserves it in custom ids (tolerated today only in a legacy 3-part form).
  return `${jobId}_${reason.replace(/[^A-Za-z0-9-]/g, "-")}_${Date.now()}`;
}

/**
 * BullMQ connection options from the Redis URL plus the process's ACL credentials (`redisAuth` of
 * @ce/config), which take precedence over any userinfo in the URL.
 */
export function bullConnection(url: string, auth: { username?: string; password?: string } = {}): ConnectionOptions {
  const u = new URL(url);
  const username = auth.username ?? (u.username ? decodeURIComponent(u.username) : undefined);
  const password = auth.password ?? (u.password ? decodeURIComponent(u.password) : undefined);
  return {
    host: u.hostname,
    port: Number(u.port || 6379),
    ...(password ? { password } : {}),
    ...(username ? { username } : {}),
    ...(u.pathname.length > 1 ? { db: Number(u.pathname.slice(1)) } : {}),
    maxRetriesPerRequest: null,
  };
}
