import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from "prom-client";
import type { MiddlewareHandler } from "hono";
import { matchedRoutes } from "hono/route";
import type { Queue } from "bullmq";
import type { Redis } from "ioredis";
import { REST_STATES } from "@ce/model";
import { AdvanceSet, JobStore } from "@ce/store";
import { cachedRead as cached, registerHealthMetrics, withDeadline } from "./health-metrics.js";

/**
 * The CE's metric catalog. Names and label sets are fixed here so dashboards and alerts have one
 * reference; label values are typed where the set is closed, to keep cardinality bounded.
 */
export const METRIC_CATALOG = {
  jobs: {
    name: "ce_jobs",
    help: 'Jobs per REST state (queue is "*" until the store keeps a per-queue index)',
    labelNames: ["state", "queue"],
  },
  submissions: { name: "ce_submissions_total", help: "Job submissions by result", labelNames: ["result"] },
  httpDuration: {
    name: "ce_http_request_duration_seconds",
    help: "REST request duration by route template",
    labelNames: ["route", "method", "status"],
  },
  batchCalls: {
    name: "ce_batch_calls_total",
    help: "Calls into the batch system (submit/cancel/poll scripts)",
    labelNames: ["backend", "op", "result"],
  },
  batchCallDuration: {
    name: "ce_batch_call_duration_seconds",
    help: "Duration of calls into the batch system",
    labelNames: ["backend", "op"],
  },
  stagingBytes: {
    name: "ce_staging_bytes_total",
    help: "Bytes transferred by data staging, by URL scheme",
    labelNames: ["direction", "protocol"],
  },
  stagingFiles: {
    name: "ce_staging_files_total",
    help: 'Files staged (protocol "cache": an input served from the input cache)',
    labelNames: ["direction", "protocol"],
  },
  stagingFailures: {
    name: "ce_staging_failures_total",
    help: "Failed data staging transfer attempts, by URL scheme",
    labelNames: ["direction", "protocol"],
  },
  cacheLookups: {
    name: "ce_cache_lookups_total",
    help: "Cached inputs: hit (served from the cache), miss (downloaded into it), refused (the origin refused the user)",
    labelNames: ["result"],
  },
  cacheSavedBytes: { name: "ce_cache_saved_bytes_total", help: "Bytes served from the input cache instead of the origin", labelNames: [] },
  queueDepth: { name: "ce_queue_depth", help: "BullMQ jobs per internal queue and state", labelNames: ["queue", "state"] },
} as const;

type Labels<K extends keyof typeof METRIC_CATALOG> = (typeof METRIC_CATALOG)[K]["labelNames"][number];

export type SubmissionResult = "accepted" | "rejected" | "error";
export type BatchOp = "submit" | "cancel" | "poll" | "usage";
export type BatchResult = "ok" | "error" | "timeout";
export type Direction = "in" | "out";
/** Staging label values: the URL schemes the stager speaks, `cache` for the input cache, `other` for the rest. */
export const STAGING_PROTOCOLS = ["http", "https", "dav", "davs", "root", "roots", "rucio", "file", "cache", "other"] as const;
export type StagingProtocol = (typeof STAGING_PROTOCOLS)[number];
export type Role = "gateway" | "jem";

/** BullMQ states reported by `ce_queue_depth` (completed is excluded: it only grows to removeOnComplete). */
export const QUEUE_DEPTH_STATES = ["waiting", "active", "delayed", "failed"] as const;

export interface MetricsOptions {
  /** Added to every series (`role="gateway"`), so one dashboard covers both processes. */
  role?: Role | undefined;
  /** With redis + prefix, `ce_jobs` is collected from Redis at scrape time. */
  redis?: Redis | undefined;
  prefix?: string | undefined;
  /** Queues whose depth `ce_queue_depth` reports at scrape time. */
  queues?: readonly Queue[] | undefined;
  /** Scrape-time Redis reads are cached this long, so several scrapers cost one round trip. Default 2000. */
  cacheMs?: number | undefined;
  /** VO names that get their own `vo` label value (the configured VOs: `configuredVos`); others are `other`. */
  vos?: readonly string[] | undefined;
  /** The per-VO and job-age read walks every active job: cached this long (ms). Default 10,000. */
  agesCacheMs?: number | undefined;
  /** Node process metrics (CPU, RSS, event loop lag, GC). Default true. */
  defaultMetrics?: boolean | undefined;
}

export interface CeMetrics {
  readonly registry: Registry;
  readonly jobs: Gauge<Labels<"jobs">>;
  readonly submissions: Counter<Labels<"submissions">>;
  readonly httpDuration: Histogram<Labels<"httpDuration">>;
  readonly batchCalls: Counter<Labels<"batchCalls">>;
  readonly batchCallDuration: Histogram<Labels<"batchCallDuration">>;
  readonly stagingBytes: Counter<Labels<"stagingBytes">>;
  readonly stagingFiles: Counter<Labels<"stagingFiles">>;
  readonly stagingFailures: Counter<Labels<"stagingFailures">>;
  readonly cacheLookups: Counter<Labels<"cacheLookups">>;
  readonly cacheSavedBytes: Counter;
  readonly queueDepth: Gauge<Labels<"queueDepth">>;
  observeRequest(route: string, method: string, status: number, seconds: number): void;
  countSubmission(result: SubmissionResult, n?: number): void;
  countBatchCall(backend: string, op: BatchOp, result: BatchResult, seconds?: number): void;
  /** Runs `fn`, counting and timing it as a batch call; a thrown error counts as `error`. */
  timeBatchCall<T>(backend: string, op: BatchOp, fn: () => Promise<T>): Promise<T>;
  addStagingBytes(direction: Direction, bytes: number, protocol: StagingProtocol): void;
  /** One file staged (after its last attempt succeeded). */
  countStagingFile(direction: Direction, protocol: StagingProtocol): void;
  /** One failed attempt (a retried transfer counts each failure). */
  countStagingFailure(direction: Direction, protocol: StagingProtocol): void;
  /** One cached input's outcome; a hit adds its bytes to the bytes saved. */
  countCache(result: "hit" | "miss" | "refused", bytes?: number): void;
}

/** A scrape-time Redis read slower than this gives up (the scrape still answers, without those series). */
const READ_TIMEOUT_MS = 2_000;

export function createMetrics(opts: MetricsOptions = {}): CeMetrics {
  const registry = new Registry();
  if (opts.role) registry.setDefaultLabels({ role: opts.role });
  if (opts.defaultMetrics !== false) collectDefaultMetrics({ register: registry });
  const cacheMs = opts.cacheMs ?? 2_000;
  const reg = { registers: [registry] };

  const { redis, prefix } = opts;
  const readJobs =
    redis && prefix ? cached(cacheMs, () => withDeadline(readJobCounts(redis, prefix), READ_TIMEOUT_MS, "job counts")) : undefined;
  const jobs = new Gauge({
    ...METRIC_CATALOG.jobs,
    labelNames: [...METRIC_CATALOG.jobs.labelNames],
    ...reg,
    async collect() {
      if (!readJobs) return;
      // Redis away: the series go (ce_redis_up says why) rather than fail the whole scrape.
      const counts = await readJobs().catch(() => undefined);
      this.reset();
      if (!counts) return;
      for (const s of REST_STATES) this.set({ state: s, queue: "*" }, counts[s] ?? 0);
    },
  });

  const queues = opts.queues ?? [];
  const advance = redis && prefix ? new AdvanceSet(redis, prefix) : undefined;
  const readDepth = cached(cacheMs, () =>
    withDeadline(
      (async () => ({ ...(await readQueueDepth(queues)), ...(advance ? { advance: await readAdvanceDepth(advance) } : {}) }))(),
      READ_TIMEOUT_MS,
      "queue depths",
    ),
  );
  const queueDepth = new Gauge({
    ...METRIC_CATALOG.queueDepth,
    labelNames: [...METRIC_CATALOG.queueDepth.labelNames],
    ...reg,
    async collect() {
      if (queues.length === 0 && !advance) return;
      const depth = await readDepth().catch(() => undefined);
      this.reset();
      for (const [queue, counts] of Object.entries(depth ?? {})) {
        for (const state of QUEUE_DEPTH_STATES) this.set({ queue, state }, counts[state] ?? 0);
      }
    },
  });

  if (redis && prefix)
    registerHealthMetrics(registry, { redis, prefix, vos: opts.vos, cacheMs, agesCacheMs: opts.agesCacheMs, timeoutMs: READ_TIMEOUT_MS });

  const submissions = new Counter({ ...METRIC_CATALOG.submissions, labelNames: [...METRIC_CATALOG.submissions.labelNames], ...reg });
  const httpDuration = new Histogram({
    ...METRIC_CATALOG.httpDuration,
    labelNames: [...METRIC_CATALOG.httpDuration.labelNames],
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    ...reg,
  });
  const batchCalls = new Counter({ ...METRIC_CATALOG.batchCalls, labelNames: [...METRIC_CATALOG.batchCalls.labelNames], ...reg });
  const batchCallDuration = new Histogram({
    ...METRIC_CATALOG.batchCallDuration,
    labelNames: [...METRIC_CATALOG.batchCallDuration.labelNames],
    // Batch commands are slow (sbatch under load takes seconds), hence the long tail.
    buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
    ...reg,
  });
  const stagingBytes = new Counter({ ...METRIC_CATALOG.stagingBytes, labelNames: [...METRIC_CATALOG.stagingBytes.labelNames], ...reg });
  const stagingFiles = new Counter({ ...METRIC_CATALOG.stagingFiles, labelNames: [...METRIC_CATALOG.stagingFiles.labelNames], ...reg });
  const stagingFailures = new Counter({
    ...METRIC_CATALOG.stagingFailures,
    labelNames: [...METRIC_CATALOG.stagingFailures.labelNames],
    ...reg,
  });
  const cacheLookups = new Counter({ ...METRIC_CATALOG.cacheLookups, labelNames: [...METRIC_CATALOG.cacheLookups.labelNames], ...reg });
  const cacheSavedBytes = new Counter({ ...METRIC_CATALOG.cacheSavedBytes, labelNames: [], ...reg });

  const countBatchCall = (backend: string, op: BatchOp, result: BatchResult, seconds?: number) => {
    batchCalls.inc({ backend, op, result });
    if (seconds !== undefined) batchCallDuration.observe({ backend, op }, seconds);
  };

  return {
    registry,
    jobs,
    submissions,
    httpDuration,
    batchCalls,
    batchCallDuration,
    stagingBytes,
    stagingFiles,
    stagingFailures,
    cacheLookups,
    cacheSavedBytes,
    queueDepth,
    observeRequest: (route, method, status, seconds) => httpDuration.observe({ route, method, status: String(status) }, seconds),
    countSubmission: (result, n = 1) => submissions.inc({ result }, n),
    countBatchCall,
    async timeBatchCall(backend, op, fn) {
      const t0 = performance.now();
      try {
        const out = await fn();
        countBatchCall(backend, op, "ok", (performance.now() - t0) / 1000);
        return out;
      } catch (e) {
        const timedOut = (e as { timedOut?: unknown }).timedOut === true; // execa's flag
        countBatchCall(backend, op, timedOut ? "timeout" : "error", (performance.now() - t0) / 1000);
        throw e;
      }
    },
    addStagingBytes: (direction, bytes, protocol) => stagingBytes.inc({ direction, protocol }, bytes),
    countStagingFile: (direction, protocol) => stagingFiles.inc({ direction, protocol }),
    countStagingFailure: (direction, protocol) => stagingFailures.inc({ direction, protocol }),
    countCache: (result, bytes) => {
      cacheLookups.inc({ result });
      if (result === "hit" && bytes) cacheSavedBytes.inc(bytes);
    },
  };
}

/** Jobs per REST state in one pipeline of SCARDs over the store's state indexes. */
export async function readJobCounts(redis: Redis, prefix: string): Promise<Record<string, number>> {
  return new JobStore(redis, prefix).countByRest(REST_STATES);
}

export async function readQueueDepth(queues: readonly Queue[]): Promise<Record<string, Record<string, number>>> {
  const counts = await Promise.all(queues.map((q) => q.getJobCounts(...QUEUE_DEPTH_STATES)));
  return Object.fromEntries(queues.map((q, i) => [q.name, counts[i] ?? {}]));
}

/**
 * The JEM's work list (advance set) in queue terms: `waiting` = due now, `delayed` = on a timer,
 * `active` = being looked at by a JEM. It has no failed state: a failing look is retried.
 */
export async function readAdvanceDepth(advance: AdvanceSet): Promise<Record<string, number>> {
  const c = await advance.counts();
  return { waiting: c.due, delayed: c.timers, active: c.inflight, failed: 0 };
}

/** Label for requests no route matched; raw paths would make the series count unbounded. */
export const UNMATCHED_ROUTE = "<unmatched>";

/**
 * Hono middleware observing `ce_http_request_duration_seconds` with the route template
 * (`/rest/:version/jobs/:id`), never the raw path.
 */
export function httpMetrics(metrics: Pick<CeMetrics, "observeRequest">): MiddlewareHandler {
  return async (c, next) => {
    const t0 = performance.now();
    try {
      await next();
    } finally {
      const status = c.res.status;
      const route = routeTemplate(c, status);
      metrics.observeRequest(route, c.req.method, status, (performance.now() - t0) / 1000);
    }
  };
}

function routeTemplate(c: Parameters<MiddlewareHandler>[0], status: number): string {
  const routes = matchedRoutes(c);
  const path = routes[c.req.routeIndex]?.path ?? routes.at(-1)?.path;
  // Only wildcard middleware answered: the request matched no handler.
  if (!path || (status === 404 && (path === "*" || path === "/*"))) return UNMATCHED_ROUTE;
  return path;
}
