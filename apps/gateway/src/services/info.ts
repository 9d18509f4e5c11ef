import { availableParallelism, totalmem } from "node:os";
import { type El, type InfoInput, type JobCounts, type QueueInput, buildInfoDocument } from "@ce/glue2";
import { REST_STATES, type RestState } from "@ce/model";
import { CeFlags, enabledRtesCached, type ShareCount, normalVo } from "@ce/store";
import type { Services } from "../context.js";
import { outageOf } from "../outage.js";
import { type ClusterSlots, type LrmsSlots, SgeSlots, SlurmSlots } from "./lrms-slots.js";
import { queueVos } from "./queue-vos.js";

export const IMPLEMENTATION_VERSION = "0.1.0";

/** Is the CE refusing new jobs? Configuration (`jobs.allowNew: false`) or the Redis drain flag. */
export async function isDraining(s: Services): Promise<boolean> {
  if (!s.config.jobs.allowNew) return true;
  return new CeFlags(s.redis, s.jobs.keys.prefix).draining();
}

/** GLUE2 counters from the live per-REST-state sets (decisions #16: batch sub-states included). */
export function countsFrom(by: Record<string, number>): JobCounts {
  const n = (...states: RestState[]) => states.reduce((a, s) => a + (by[s] ?? 0), 0);
  return {
    total: REST_STATES.filter((s) => s !== "WIPED").reduce((a, s) => a + (by[s] ?? 0), 0),
    running: n("RUNNING", "EXITINGLRMS", "OTHER"),
    waiting: n("QUEUING"),
    suspended: n("HELD"),
    staging: n("PREPARING", "FINISHING"),
    prelrms: n("ACCEPTING", "ACCEPTED", "PREPARED", "SUBMITTING"),
  };
}

let cache: { at: number; key: Services; doc: El } | undefined;
const CACHE_MS = 1000;

/** One cached sinfo / qhost per gateway (per Services: test harnesses run several in one process). */
const lrmsSlots = new WeakMap<Services, LrmsSlots>();

async function clusterSlots(s: Services): Promise<ClusterSlots | undefined> {
  const { lrms } = s.config;
  if (lrms.backend !== "slurm" && lrms.backend !== "sge") return undefined;
  let src = lrmsSlots.get(s);
  if (!src) {
    src =
      lrms.backend === "slurm"
        ? new SlurmSlots({ binPath: lrms.slurm.binPath, log: s.logger, refreshMs: lrms.slurm.infoRefreshSeconds * 1000 })
        : new SgeSlots({ binPath: lrms.sge.binPath, log: s.logger, refreshMs: lrms.sge.infoRefreshSeconds * 1000 });
    lrmsSlots.set(s, src);
  }
  return src.get();
}

/** Sums REST-state counts (of the shares of one queue). */
function addCounts(into: Record<string, number>, by: Partial<Record<RestState, number>>): Record<string, number> {
  for (const [k, n] of Object.entries(by)) into[k] = (into[k] ?? 0) + (n ?? 0);
  return into;
}

/**
 * The information document (E2). Counts and drain state are read live from Redis; queues and
 * runtime environments come from configuration. If Redis does not answer the document is still
 * served, with HealthState critical, so brokers stop sending jobs here.
 */
export async function infoDocument(s: Services, now = new Date()): Promise<El> {
  // Brokered arcsub fetches /info once per job: a one-second cache absorbs such bursts.
  if (cache && cache.key === s && now.getTime() - cache.at < CACHE_MS) return cache.doc;
  const { config } = s;
  let health: InfoInput["health"] = "ok";
  let by: Record<string, number> = {};
  let shares: ShareCount[] = [];
  let draining = !config.jobs.allowNew;
  try {
    [by, draining, shares] = await Promise.all([s.jobs.countByRest(REST_STATES), isDraining(s), s.jobs.shareCounts()]);
  } catch (err) {
    if (!outageOf(s).report(err)) s.logger.warn({ err }, "info: redis unavailable");
    health = { state: "critical", info: "job database unavailable" };
  }
  const counts = countsFrom(by);
  const serving = draining ? "draining" : "production";
  const cluster = await clusterSlots(s);
  const cpus = availableParallelism();
  // Slurm: the cluster's CPUs from sinfo; Grid Engine: its slots from qhost; fork: the configured
  // slots of this host. Until the batch system has answered, the host's CPU count stands in.
  const slots = cluster?.total ?? (config.lrms.backend === "fork" ? (config.lrms.fork.slots ?? cpus) : cpus);
  const queues: QueueInput[] = config.jobs.queues.map((q) => {
    const mine = shares.filter((c) => c.queue === q.name);
    const queueCounts = countsFrom(mine.reduce((a, c) => addCounts(a, c.byRest), {}));
    // A partition (cluster queue) the batch system does not list has no slot this CE can use.
    const part = cluster ? (cluster.partitions.get(q.partition ?? q.name) ?? { total: 0, allocated: 0, idle: 0 }) : undefined;
    const slotFields = part
      ? { totalSlots: part.total, usedSlots: part.allocated, freeSlots: part.idle }
      : // Fork (and a batch system before it answered): the queues share this host's slots.
        { totalSlots: slots, usedSlots: queueCounts.running, freeSlots: Math.max(0, slots - counts.running) };
    return {
      name: q.name,
      ...(q.maxWallTimeSeconds !== undefined ? { maxWallTime: q.maxWallTimeSeconds } : {}),
      ...(q.defaultWallTimeSeconds !== undefined ? { defaultWallTime: q.defaultWallTimeSeconds } : {}),
      ...(q.maxCpuTimeSeconds !== undefined ? { maxCpuTime: q.maxCpuTimeSeconds } : {}),
      ...(q.maxMainMemoryMB !== undefined ? { maxMainMemory: q.maxMainMemoryMB } : {}),
      ...(q.maxSlotsPerJob !== undefined ? { maxSlotsPerJob: q.maxSlotsPerJob } : {}),
      ...(q.maxGpusPerJob !== undefined ? { maxGpusPerJob: q.maxGpusPerJob } : {}),
      counts: queueCounts,
      ...slotFields,
      ...vosField(q.allow),
      voShares: queueVos(q, config).map((vo) => ({
        vo,
        counts: countsFrom(mine.find((c) => c.vo === normalVo(vo))?.byRest ?? {}),
      })),
      benchmarks: q.benchmarks,
    };
  });
  const url = new URL(config.endpoint.url);
  const doc = buildInfoDocument({
    endpointUrl: config.endpoint.url,
    hostname: url.hostname,
    adminDomain: config.endpoint.adminDomain,
    implementationVersion: IMPLEMENTATION_VERSION,
    health,
    serving,
    lrms: config.lrms.backend === "slurm" ? "SLURM" : config.lrms.backend === "sge" ? "SGE" : config.lrms.backend,
    queues,
    counts,
    totalSlots: slots,
    totalLogicalCpus: slots,
    usedSlots: counts.running,
    workingAreaLifeTime: config.jobs.sessionLifetimeSeconds,
    // Configured plus `ceadm rte enable|default` (the control dir's rte/), as A-REX publishes rte/enabled.
    runtimeEnvironments: enabledRtesCached(config),
    executionEnvironment: { logicalCpus: cpus, mainMemorySize: Math.floor(totalmem() / 2 ** 20) },
    ...vosField(config.auth.allow),
    now,
  });
  cache = { at: now.getTime(), key: s, doc };
  return doc;
}

/**
 * The VOs a rule list admits, for GLUE2 `vo:<name>` policy rules (endpoint AccessPolicy from
 * auth.allow, share MappingPolicy from a queue's allow), so brokers such as arcsub's pick queues
 * that accept the user. Published only when every rule names a VO (`vo:atlas`, `fqan:/atlas/…`):
 * a list that also admits by DN or token cannot be said in `vo:` rules without misleading brokers.
 */
export function vosOfRules(rules: readonly string[]): string[] | undefined {
  if (rules.length === 0) return undefined;
  const vos = rules.map((r) => /^vo:([^*?/]+)$/.exec(r)?.[1] ?? /^fqan:\/([^/*?]+)/.exec(r)?.[1]);
  return vos.every((v): v is string => !!v) ? [...new Set(vos)] : undefined;
}

const vosField = (rules: readonly string[] | undefined) => {
  const vos = rules ? vosOfRules(rules) : undefined;
  return vos ? { vos } : {};
};
