import { Gauge, type Registry } from "prom-client";
import type { Redis } from "ioredis";
import {
  ACTIVE_INTERNAL_STATES,
  JemHeartbeats,
  readJobAges,
  readPendingByReason,
  type JemBeat,
  type PendingByReason,
  type StateAges,
} from "@ce/store";

/**
 * Health gauges read from Redis at scrape time, so every process's /metrics shows them (a stopped
 * JEM cannot answer its own scrape; a gateway still reports the JEM's last heartbeat): Redis
 * reachability, JEM heartbeats, jobs per VO, the oldest job per state and the soonest delegation
 * expiry. Deploy's alert rules (deploy/monitoring/alerts.yaml) are written against these names.
 */
export const HEALTH_METRIC_CATALOG = {
  redisUp: {
    name: "ce_redis_up",
    help: "1 when this process reached Redis at the last scrape (PING within the timeout), else 0",
    labelNames: [],
  },
  jemHeartbeat: {
    name: "ce_jem_heartbeat_timestamp_seconds",
    help: "Last heartbeat of each JEM instance (host:pid), as stored in Redis",
    labelNames: ["jem"],
  },
  jemHeartbeatInterval: { name: "ce_jem_heartbeat_interval_seconds", help: "The interval each JEM instance beats at", labelNames: ["jem"] },
  jobsByVo: {
    name: "ce_jobs_by_vo",
    help: "Jobs per internal state and VO (the configured VOs, other, none)",
    labelNames: ["state", "vo"],
  },
  oldestJobAge: {
    name: "ce_job_oldest_age_seconds",
    help: "Time the oldest job not parked (pending) has spent in its internal state; 0 when there is none",
    labelNames: ["state"],
  },
  lrmsPending: {
    name: "ce_lrms_pending_jobs",
    help: 'Jobs waiting in the batch system per queue, VO (the configured VOs, other, none) and the batch system\'s reason (Slurm %r, Grid Engine scheduling info; "none" when it gave none)',
    labelNames: ["queue", "vo", "reason"],
  },
  // The label keeps the series absent when no active job has a delegation (a label-less gauge would say 0, i.e. 1970).
  delegationExpiry: {
    name: "ce_delegation_soonest_expiry_timestamp_seconds",
    help: 'Soonest credential expiry among the delegations of active jobs (scope="active_jobs")',
    labelNames: ["scope"],
  },
} as const;

export interface HealthMetricsOptions {
  redis: Redis;
  prefix: string;
  /** VO names that get their own label value; every other VO is `other`, no VO `none`. */
  vos?: readonly string[] | undefined;
  /** The job-ages read walks every active job: cached this long (ms). Default 10,000. */
  agesCacheMs?: number | undefined;
  /** Cache of the cheap reads (ping, heartbeats), ms. Default 2,000. */
  cacheMs?: number | undefined;
  /** A scrape-time Redis read slower than this counts as Redis unavailable (ms). Default 2,000. */
  timeoutMs?: number | undefined;
}

/** Caches an async read for `ms` and shares one in-flight read between concurrent callers; failures are not cached. */
export function cachedRead<T>(ms: number, read: () => Promise<T>): () => Promise<T> {
  let at = 0;
  let value: Promise<T> | undefined;
  return () => {
    const now = Date.now();
    if (!value || now - at > ms) {
      at = now;
      value = read().catch((e: unknown) => {
        at = 0;
        throw e;
      });
    }
    return value;
  };
}

/** A Redis read bounded in time: a JEM's connection queues commands while Redis is away, and a scrape must still answer. */
export function withDeadline<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    p,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what}: no answer from Redis within ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

export function registerHealthMetrics(registry: Registry, o: HealthMetricsOptions): void {
  const reg = { registers: [registry] };
  const timeout = o.timeoutMs ?? 2_000;
  const vos = [...new Set(o.vos ?? [])];
  const beats = new JemHeartbeats(o.redis, o.prefix);
  const readPing = cachedRead(o.cacheMs ?? 2_000, () => withDeadline(o.redis.ping(), timeout, "ping"));
  const readBeats = cachedRead(o.cacheMs ?? 2_000, () => withDeadline(beats.read(), timeout, "heartbeats"));
  const readAges = cachedRead(o.agesCacheMs ?? 10_000, () => withDeadline(readJobAges(o.redis, o.prefix, vos), timeout, "job ages"));

  new Gauge({
    ...HEALTH_METRIC_CATALOG.redisUp,
    labelNames: [],
    ...reg,
    async collect() {
      this.set(
        (await readPing().then(
          (r) => r === "PONG",
          () => false,
        ))
          ? 1
          : 0,
      );
    },
  });

  // Each gauge collects itself (prom-client may serialize one before another's collect ran), all
  // from the same cached reads. Redis away: no series (ce_redis_up says why), never a stale one.
  const beatsOrNone = () => readBeats().catch((): JemBeat[] => []);
  new Gauge({
    ...HEALTH_METRIC_CATALOG.jemHeartbeat,
    labelNames: ["jem"],
    ...reg,
    async collect() {
      const all = await beatsOrNone();
      this.reset();
      for (const b of all) this.set({ jem: b.jem }, b.at / 1000);
    },
  });
  new Gauge({
    ...HEALTH_METRIC_CATALOG.jemHeartbeatInterval,
    labelNames: ["jem"],
    ...reg,
    async collect() {
      const all = await beatsOrNone();
      this.reset();
      for (const b of all) this.set({ jem: b.jem }, b.everyMs / 1000);
    },
  });

  // Same walk cost as the ages (one HMGET per INLRMS job), same cache period.
  const readPending = cachedRead(o.agesCacheMs ?? 10_000, () =>
    withDeadline(readPendingByReason(o.redis, o.prefix, vos), timeout, "pending reasons"),
  );
  new Gauge({
    ...HEALTH_METRIC_CATALOG.lrmsPending,
    labelNames: ["queue", "vo", "reason"],
    ...reg,
    async collect() {
      const rows = await readPending().catch((): PendingByReason[] => []);
      this.reset();
      for (const r of rows) this.set({ queue: r.queue, vo: r.vo || "none", reason: r.reason }, r.jobs);
    },
  });

  const agesOrNone = () => readAges().catch((): Record<string, StateAges> => ({}));
  new Gauge({
    ...HEALTH_METRIC_CATALOG.jobsByVo,
    labelNames: ["state", "vo"],
    ...reg,
    async collect() {
      const ages = await agesOrNone();
      this.reset();
      for (const state of ACTIVE_INTERNAL_STATES) {
        const a = ages[state];
        // Every label value is set, zeros included, so a series never vanishes when a state empties.
        if (a) for (const vo of [...vos, "other", "none"]) this.set({ state, vo }, a.byVo[vo] ?? 0);
      }
    },
  });
  new Gauge({
    ...HEALTH_METRIC_CATALOG.oldestJobAge,
    labelNames: ["state"],
    ...reg,
    async collect() {
      const ages = await agesOrNone();
      const now = Date.now();
      this.reset();
      for (const state of ACTIVE_INTERNAL_STATES) {
        const a = ages[state];
        if (a) this.set({ state }, a.oldestSince !== undefined ? Math.max(0, (now - a.oldestSince) / 1000) : 0);
      }
    },
  });
  new Gauge({
    ...HEALTH_METRIC_CATALOG.delegationExpiry,
    labelNames: ["scope"],
    ...reg,
    async collect() {
      const soonest = Object.values(await agesOrNone())
        .map((a) => a.soonestDelegationExpiry)
        .filter((x): x is number => x !== undefined)
        .sort((a, b) => a - b)[0];
      this.reset();
      if (soonest !== undefined) this.set({ scope: "active_jobs" }, soonest / 1000);
    },
  });
}
