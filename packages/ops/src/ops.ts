import { Queue, type ConnectionOptions } from "bullmq";
import type { Redis } from "ioredis";
import type { CompiledConfig } from "@ce/config";
import { Failure, isRestState, REST_STATES, type RestState } from "@ce/model";
import {
  AdvanceSet,
  bullConnection,
  voOf,
  CeFlags,
  recordRequests,
  JobStore,
  openQueue,
  type DrainStatus,
  QUEUE_NAMES,
  type JobRecord,
  type JobRequest,
  type QueueName,
} from "@ce/store";
import { readAdvanceDepth } from "./metrics.js";

/**
 * Operations shared by the admin HTTP API and `ceadm`: both talk to Redis directly, so the CLI
 * works when no gateway or JEM is up.
 */

/** The drain flag lives in the store (Keys.flags, CeFlags); re-exported for existing callers. */
export { DRAIN_FLAG, type DrainStatus } from "@ce/store";
export const QUEUE_COUNT_STATES = ["waiting", "active", "delayed", "failed", "completed", "paused"] as const;

export type JobCommand = Extract<JobRequest["action"], "kill" | "clean">;

export interface JobRow {
  id: string;
  owner: string;
  rest: RestState;
  state: string;
  queue: string;
  created: number;
  updated: number;
  /** When the job entered its current state (ms). */
  stateSince: number;
  name?: string | undefined;
  /** The mapped local account. */
  account?: string | undefined;
  /** The VO of the job's first FQAN. */
  vo?: string | undefined;
}

/** The list row of one record (ceadm, admin API). */
export function jobRow(
  r: Pick<
    JobRecord,
    "id" | "owner" | "rest" | "state" | "pending" | "queue" | "created" | "updated" | "stateSince" | "jobName" | "localUser" | "fqans"
  >,
): JobRow {
  return {
    id: r.id,
    owner: r.owner,
    rest: r.rest,
    state: r.pending ? `PENDING:${r.state}` : r.state,
    queue: r.queue,
    created: r.created,
    updated: r.updated,
    stateSince: r.stateSince,
    name: r.jobName,
    account: r.localUser?.account,
    vo: voOf(r.fqans),
  };
}

export class OpsError extends Failure<"NOT_FOUND" | "BAD_REQUEST"> {
  constructor(code: "NOT_FOUND" | "BAD_REQUEST", message: string) {
    super(code, message);
  }
}

/** Opens one BullMQ Queue per catalog name under the CE prefix (same options as the producers). */
export function openQueues(
  config: { redis: Pick<CompiledConfig["redis"], "url" | "prefix"> },
  names: readonly QueueName[] = QUEUE_NAMES,
  /** The process's BullMQ connection (`connectRedis(config.redis, role).bull`); default: `redis.url` without ACL user. */
  connection: ConnectionOptions = bullConnection(config.redis.url),
): Queue[] {
  return names.map((name) => openQueue(name, connection, config.redis.prefix) as Queue);
}

export class AdminOps {
  readonly store: JobStore;
  readonly flags: CeFlags;

  constructor(
    readonly redis: Redis,
    readonly prefix: string,
    /** The BullMQ queues to count (the JEM's staging queue). */
    readonly queues: readonly Queue[] = [],
  ) {
    this.store = new JobStore(redis, prefix);
    this.flags = new CeFlags(redis, prefix);
  }

  parseStates(raw: string | undefined): RestState[] | undefined {
    if (!raw) return undefined;
    const states = raw
      .split(",")
      .map((s) => s.trim().toUpperCase())
      .filter(Boolean);
    const bad = states.filter((s) => !isRestState(s));
    if (bad.length) throw new OpsError("BAD_REQUEST", `unknown state ${bad.join(",")}; one of ${REST_STATES.join(" ")}`);
    return states as RestState[];
  }

  /**
   * Jobs of one owner and/or in some REST states, newest first without filters. Uses the store's
   * indexes only; `limit` bounds the record reads (one pipeline).
   */
  async listJobs(
    opts: { owner?: string | undefined; states?: RestState[] | undefined; limit?: number | undefined } = {},
  ): Promise<{ total: number; jobs: JobRow[] }> {
    const limit = Math.max(1, Math.min(opts.limit ?? 100, 10_000));
    let ids: string[];
    if (opts.owner) {
      ids = (await this.store.list(opts.owner, opts.states)).map((j) => j.id);
    } else if (opts.states) {
      ids = await this.store.idsInRest(opts.states);
    } else {
      ids = await this.store.newest(limit);
      return { total: await this.store.total(), jobs: await this.rows(ids) };
    }
    return { total: ids.length, jobs: await this.rows(ids.slice(0, limit)) };
  }

  private async rows(ids: string[]): Promise<JobRow[]> {
    const recs = await this.store.getMany(ids);
    return recs.filter((r): r is JobRecord => r !== undefined).map(jobRow);
  }

  async getJob(id: string): Promise<JobRecord> {
    const r = await this.store.get(id);
    if (!r) throw new OpsError("NOT_FOUND", `job ${id} not found`);
    return r;
  }

  /**
   * A kill/clean exactly as the REST interface does it: the request on the job record and the job
   * due on the JEM's work list. `queued` is false for a kill of a job that already ended.
   */
  async command(action: JobCommand, jobId: string, requestId?: string): Promise<{ jobId: string; action: JobCommand; queued: boolean }> {
    await this.getJob(jobId);
    const rung = await recordRequests(this.store, [{ action, jobId, requestId }]);
    return { jobId, action, queued: rung.length > 0 };
  }

  async drainStatus(): Promise<DrainStatus> {
    return this.flags.drainStatus();
  }

  async setDrain(on: boolean): Promise<DrainStatus> {
    return this.flags.setDrain(on);
  }

  /** BullMQ queues plus the JEM's work list (`advance`: waiting = due now, delayed = timers, active = in flight). */
  async queueCounts(): Promise<Record<string, Record<string, number>>> {
    const counts = await Promise.all(this.queues.map((q) => q.getJobCounts(...QUEUE_COUNT_STATES)));
    const advance = await readAdvanceDepth(new AdvanceSet(this.redis, this.prefix));
    return { ...Object.fromEntries(this.queues.map((q, i) => [q.name, counts[i] ?? {}])), advance };
  }

  /** Jobs per REST state plus the total. */
  async stats(): Promise<{ total: number; states: Record<string, number> }> {
    const [states, total] = await Promise.all([this.store.countByRest(REST_STATES), this.store.total()]);
    return { total, states };
  }
}
