import { Failure } from "@ce/model";
import { BaseAdapter } from "@bull-board/api/dist/queueAdapters/base.js";
import type { JobCounts, JobStatus, QueueJob, QueueJobJson, Status } from "@bull-board/api/typings/app";
import type { Redis } from "ioredis";
import { AdvanceSet, JobStore, type JobRecord } from "@ce/store";

/**
 * The JEM's work list (the advance set, @ce/store advance.ts) as a read-only bull-board queue, so
 * operators see every job the JEMs will look at next to the BullMQ queues: `waiting` = due now,
 * `delayed` = on a timer (upload deadline, cancel repeat, a limit), `active` = leased to a JEM
 * right now. Each entry shows the job's record at a glance. It is not a BullMQ queue: nothing can
 * be retried, promoted or removed here (a job is rung by `ceadm`/REST commands, not by hand).
 */
export const ADVANCE_QUEUE_NAME = "advance";

const KIND: Partial<Record<JobStatus, "due" | "timers" | "inflight">> = { waiting: "due", delayed: "timers", active: "inflight" };
const FIELDS = [
  "pending",
  "queue",
  "jobName",
  "stateSince",
  "localId",
  "failure",
  "killRequested",
  "cleanRequested",
  "restartRequested",
  "hold",
] as const;
type Row = Pick<JobRecord, (typeof FIELDS)[number] | "id" | "owner" | "state" | "rest">;

class ReadOnlyError extends Failure<"READ_ONLY"> {
  constructor() {
    super("READ_ONLY", "the JEM's work list is read-only here: use ceadm or the REST interface to act on jobs");
  }
}

function entry(status: JobStatus, id: string, at: number, r: Row | undefined, now: number): QueueJob {
  const json: QueueJobJson = {
    id,
    name: r ? `${r.pending ? "PENDING:" : ""}${r.state}${r.jobName ? ` ${r.jobName}` : ""}` : "(no record)",
    progress: 0,
    attemptsMade: 0,
    // The card's time: when the job entered its state.
    timestamp: r?.stateSince ?? at,
    ...(status === "active" ? { processedOn: now } : {}),
    ...(status === "delayed" ? { delay: Math.max(0, at - (r?.stateSince ?? now)) } : {}),
    failedReason: "",
    stacktrace: null,
    data: {
      ...(status === "active" ? { leaseEnds: new Date(at).toISOString() } : { due: new Date(at).toISOString() }),
      ...(r
        ? {
            state: r.rest,
            internal: `${r.pending ? "PENDING:" : ""}${r.state}`,
            owner: r.owner,
            queue: r.queue,
            since: new Date(r.stateSince).toISOString(),
            ...(r.localId ? { batchId: r.localId } : {}),
            ...(r.failure ? { failure: r.failure } : {}),
            ...(r.hold ? { heldBySubmission: r.hold } : {}),
            ...(r.killRequested || r.cleanRequested || r.restartRequested
              ? { requested: [r.killRequested && "kill", r.cleanRequested && "clean", r.restartRequested && "restart"].filter(Boolean) }
              : {}),
          }
        : {}),
    },
    returnvalue: null,
    opts: {},
  };
  return {
    opts: status === "delayed" ? { delay: json.delay } : {},
    toJSON: () => json,
    getState: async () => status,
    promote: async () => Promise.reject(new ReadOnlyError()),
    remove: async () => Promise.reject(new ReadOnlyError()),
    retry: async () => Promise.reject(new ReadOnlyError()),
  };
}

export class AdvanceBoardAdapter extends BaseAdapter {
  private readonly advance: AdvanceSet;
  private readonly store: JobStore;

  constructor(
    private readonly redis: Redis,
    prefix: string,
  ) {
    super("bullmq", {
      readOnlyMode: true,
      allowRetries: false,
      displayName: "advance (the JEM's work list)",
      description: "Jobs the JEMs look at: waiting = due now, delayed = on a timer, active = leased to a JEM now. Read-only.",
    });
    this.advance = new AdvanceSet(redis, prefix);
    this.store = new JobStore(redis, prefix);
  }

  getName(): string {
    return ADVANCE_QUEUE_NAME;
  }

  async getJobCounts(): Promise<JobCounts> {
    const c = await this.advance.counts();
    return {
      latest: 0,
      active: c.inflight,
      waiting: c.due,
      "waiting-children": 0,
      prioritized: 0,
      completed: 0,
      failed: 0,
      delayed: c.timers,
      paused: 0,
    };
  }

  async getJobs(statuses: JobStatus[], start = 0, end = 9): Promise<QueueJob[]> {
    const now = Date.now();
    const out: QueueJob[] = [];
    for (const status of statuses) {
      const kind = KIND[status];
      if (!kind) continue;
      const page = await this.advance.page(kind, start, end - start + 1, now);
      const recs = await this.store.getManyFields(
        page.map((p) => p.id),
        FIELDS,
      );
      page.forEach((p, i) => out.push(entry(status, p.id, p.at, recs[i], now)));
    }
    return out;
  }

  async getJob(id: string): Promise<QueueJob | undefined> {
    const s = await this.advance.scoreOf(id);
    const status: JobStatus | undefined =
      s.inflight !== undefined ? "active" : s.due === undefined ? undefined : s.due <= Date.now() ? "waiting" : "delayed";
    if (!status) return undefined;
    const [r] = await this.store.getManyFields([id], FIELDS);
    return entry(status, id, (status === "active" ? s.inflight : s.due)!, r, Date.now());
  }

  getStatuses(): Status[] {
    return ["latest", "active", "waiting", "delayed"];
  }

  getJobStatuses(): JobStatus[] {
    return ["active", "waiting", "delayed"];
  }

  async getJobLogs(): Promise<string[]> {
    return [];
  }

  async getRedisInfo(): Promise<string> {
    return this.redis.info();
  }

  async isPaused(): Promise<boolean> {
    return false;
  }

  async getGlobalConcurrency(): Promise<number | null> {
    return null;
  }

  // Everything that would change the work list is refused (readOnlyMode hides the buttons).
  clean = async (): Promise<void> => Promise.reject(new ReadOnlyError());
  addJob = async (): Promise<QueueJob> => Promise.reject(new ReadOnlyError());
  pause = async (): Promise<void> => Promise.reject(new ReadOnlyError());
  resume = async (): Promise<void> => Promise.reject(new ReadOnlyError());
  empty = async (): Promise<void> => Promise.reject(new ReadOnlyError());
  obliterate = async (): Promise<void> => Promise.reject(new ReadOnlyError());
  promoteAll = async (): Promise<void> => Promise.reject(new ReadOnlyError());
  removeJobScheduler = async (): Promise<boolean> => Promise.reject(new ReadOnlyError());
  setGlobalConcurrency = async (): Promise<void> => Promise.reject(new ReadOnlyError());
}
