import { createLogger, type CeMetrics } from "@ce/ops";
import { instrumentBackend } from "./lrms/instrumented.js";
import { StateHooks } from "./hooks.js";
import { Worker, type Job } from "bullmq";
import type { Logger } from "pino";
import type { CompiledConfig } from "@ce/config";
import {
  AdvanceSet,
  DelegationStore,
  JobStore,
  Keys,
  connectRedis,
  openQueue,
  readPayload,
  type QueueCatalog,
  type SecretBox,
} from "@ce/store";
import { ControlDir, fileq } from "@ce/controldir";
import { startAccounting } from "./accounting.js";
import { startAdvanceLoop, type AdvanceLoop } from "./advance-loop.js";
import { startHeartbeat } from "./heartbeat.js";
import type { JemContext } from "./context.js";
import { loadSecretBox } from "./credentials.js";
import { migrateOwnersOnce, OWNER_PASS_MS } from "./owner-migration.js";
import { expiryPass } from "./expiry.js";
import { readSpec } from "./files.js";
import { Locks } from "./locks.js";
import { createBackend } from "./lrms/index.js";
import type { Backend } from "./lrms/types.js";
import { createOutage, warnUnlessOutage } from "./outage.js";
import { every } from "./periodic.js";
import { startPoller } from "./poller.js";
import { Privileged } from "./priv/priv.js";
import { periodicRecovery, recover } from "./recovery.js";
import { startCacheCleaner } from "./staging/cache/cleaner.js";
import { createStagingProcessor } from "./staging/worker.js";
import { startWatcher } from "./watcher.js";

export interface JemOptions {
  logger?: Logger;
  /** Back ends to use instead of the configured one (tests, benchmarks). */
  backends?: Backend[];
  /** Per-job lease (ms); a crashed JEM's jobs are free again after this. Default 30 s. */
  jobLockMs?: number;
  /** BullMQ stalled-job check (ms); a crashed JEM's active jobs are retried after this. Default 30 s. */
  stalledIntervalMs?: number;
  /**
   * Lock of a staging queue job (ms), renewed at half of it while the transfer runs; a crashed
   * JEM's transfers are redone once it lapses. Default 60 s: transfers are long, and a lock that
   * lapses during a stall in renewals would run the same transfer twice.
   */
  stagingLockMs?: number;
  /** Periodic recovery pass (ms). Default 30 s. */
  recoveryIntervalMs?: number;
  /** File events for `lrms_done` (default on); the periodic scan always runs. */
  watch?: boolean;
  /**
   * `false`: no privileged component even with a mapping section (jobs run as the CE). Only for
   * in-process tests of other concerns (pool leases) whose jobs carry no mapped account; main.ts never sets it.
   */
  privileged?: false;
  /** Prometheus metrics: batch calls, staging bytes, queue depths (main.ts passes them). */
  metrics?: CeMetrics;
}

export interface Jem {
  ctx: JemContext;
  stop(): Promise<void>;
}

/**
 * Boots one JEM: stores, the work-list loop, the staging queue's workers, the batch poll loop,
 * the `lrms_done` watcher + fallback scan, the expiry loop and recovery. Any number may run
 * against one Redis and one control dir.
 */
export async function startJem(config: CompiledConfig, opts: JemOptions = {}): Promise<Jem> {
  const log = opts.logger ?? createLogger("jem", config.logging.level, { pid: process.pid });
  const prefix = config.redis.prefix;
  // ACL user `jem` (password file read at boot, refused when group/other-readable); standalone,
  // Sentinel or Cluster as `redis.mode` says.
  const clients = connectRedis(config.redis, "jem");
  const redis = clients.redis;
  // Connected before SUBSCRIBE: ioredis' ready check (INFO) must not run in subscriber mode.
  const sub = clients.subscriber();
  // Redis trouble is an episode (outage.ts): one line when it starts, one when it ends; every loop waits on it.
  // After an episode (a restart from an older AOF, a failover losing the last asynchronously
  // replicated writes) a ring or lease may be gone: every active job is rung once, as at boot.
  const afterOutage: { ring?: () => void } = {};
  const outage = createOutage(redis, prefix, log, { afterEpisode: () => afterOutage.ring?.() });
  for (const conn of [redis, sub])
    conn.on("error", (e: unknown) => warnUnlessOutage(outage, log, e, "redis connection error")).on("ready", () => outage.nudge());
  const control = new ControlDir(config.paths.controlDir, config.paths.sessionRoot, config.paths.batchRoot);
  await control.ensureRoots();
  // The file thread (@ce/controldir files.ts) starts now, not in the first burst of jobs.
  await fileq.one(["exists", control.root]);
  // Mapping on: the privileged component runs every job as its mapped account (refuses to boot unless root).
  const priv = opts.privileged === false ? undefined : await Privileged.create(config, control);
  if (priv)
    log.info({ ceGid: priv.ceGid }, "mapping is on: every job runs as its mapped local account (setpriv), session dirs owned by it");
  else log.warn("mapping is off: jobs run as the CE's own account (developer-only mode; configure `mapping` for a site)");
  let delegations: DelegationStore | undefined;
  let box: SecretBox | undefined;
  try {
    box = loadSecretBox(config);
    delegations = new DelegationStore(redis, prefix, box);
  } catch (e) {
    log.warn({ err: e }, "delegation key unavailable: staging and batch jobs run without credentials");
  }
  const backends = new Map<string, Backend>();
  // A running fork job's limits after a restart come from its description (the control dir's, root's).
  const late: { ctx?: JemContext } = {};
  const description = (id: string) => (late.ctx ? readSpec(late.ctx, id) : Promise.resolve(undefined));
  for (const b of opts.backends ?? [createBackend(config, log, { description })])
    backends.set(b.name, opts.metrics ? instrumentBackend(b, opts.metrics) : b);

  const connection = clients.bull;
  const abortChannel = new Keys(prefix).abortChannel();

  const ctx: JemContext = {
    config,
    log,
    redis,
    jobs: new JobStore(redis, prefix),
    control,
    delegations,
    backends,
    queues: { staging: openQueue("staging", connection, prefix) },
    advance: new AdvanceSet(redis, prefix),
    locks: new Locks(redis, prefix),
    aborts: new Map(),
    async publishAbort(jobId) {
      ctx.aborts.get(jobId)?.abort();
      await redis.publish(abortChannel, jobId);
    },
    hostname: new URL(config.endpoint.url).hostname,
    metrics: opts.metrics,
    jobLockMs: opts.jobLockMs ?? 30_000,
    priv,
    outage,
    ...(config.jobs.hooks.scripts.length > 0 ? { hooks: new StateHooks(config, log) } : {}),
  };
  late.ctx = ctx;
  for (const q of Object.values(ctx.queues)) q.on("error", (e: unknown) => warnUnlessOutage(outage, log, e, "queue error"));

  // A Redis that is away at boot is an outage like any other: SUBSCRIBE and recovery below wait for it.
  await sub.connect().catch((e: unknown) => {
    if (!outage.report(e)) throw e;
  });
  const bellChannel = new Keys(prefix).advanceBell();
  // Set once the boot recovery has rung everything; the bell only kicks it.
  const loop: { current?: AdvanceLoop } = {};
  await sub.subscribe(abortChannel, bellChannel);
  sub.on("message", (ch: string, msg: string) => {
    if (ch === bellChannel) loop.current?.kick();
    else ctx.aborts.get(msg)?.abort();
  });

  const watcher = startWatcher(ctx, { useEvents: opts.watch ?? true });

  const workerOpts = { connection, prefix, stalledInterval: opts.stalledIntervalMs ?? 30_000 };
  const fail = (name: string) => (job: Job | undefined, err: Error) =>
    warnUnlessOutage(outage, log, err, "queue job failed", { queue: name, jobId: job?.data && (job.data as { jobId?: string }).jobId });
  const processStaging = createStagingProcessor(ctx);
  const cacheCleaner = config.staging.cache.dirs.length > 0 ? startCacheCleaner(ctx, config.staging.cache.dirs) : undefined;
  // Redis trouble inside a step does not fail the queue job (no attempt used, no log line per job):
  // the step waits for the episode to end and is redone from the start (every step is idempotent).
  const workers = [
    // Transfers are long: a longer lock keeps BullMQ from declaring them stalled between renewals.
    // Every job admitted to staging gets a worker: the transfer slots (FairSlots, per owner, in
    // turn) are the bound, so one owner's stuck jobs cannot take the queue from everyone else's.
    new Worker<QueueCatalog["staging"]>("staging", (j) => outage.retry(() => processStaging(readPayload("staging", j.data))), {
      ...workerOpts,
      concurrency: Math.max(config.staging.maxConcurrentTransfers, config.jobs.maxStaging),
      lockDuration: opts.stagingLockMs ?? 60_000,
    }),
  ];
  workers.forEach((w) => w.on("failed", fail(w.name)).on("error", (e) => warnUnlessOutage(outage, log, e, "worker error")));

  const poller = startPoller(ctx);
  const recoveryMs = opts.recoveryIntervalMs ?? 30_000;
  await outage.retry(() => recover(ctx));
  const migration = box ? migrateOwnersOnce(ctx, box, true) : Promise.resolve();
  // Jobs are claimed from the advance set in batches; leases of a dead JEM expire into it again.
  loop.current = startAdvanceLoop(ctx, { leaseMs: ctx.jobLockMs });
  ctx.outsideSlot = loop.current.outsideSlot;
  afterOutage.ring = () =>
    void recover(ctx).catch((e: unknown) => warnUnlessOutage(outage, log, e, "recovery after a Redis outage failed"));
  await watcher.scan().catch((e: unknown) => warnUnlessOutage(outage, log, e, "initial control dir scan failed"));
  // Periodic passes skip their turn during an outage (the next turn after it redoes the work).
  const recovery = every(recoveryMs, "recovery pass", () => periodicRecovery(ctx), { outage, log });
  const expiry = every(config.jem.expiryIntervalMs, "expiry pass", () => expiryPass(ctx), { outage, log });
  // Again every hour: an upgrade restarts the JEM before the gateways (docs/operations.md), and
  // what an old gateway wrote in between is moved by the next pass, not the next JEM start.
  const ownerPasses = box
    ? every(OWNER_PASS_MS, "token owner migration", () => migrateOwnersOnce(ctx, box, false), { outage, log })
    : undefined;
  // Usage records: the terminal move appends them to a stream; this writes them to the database.
  const accounting = startAccounting(config, clients.subscriber(), log, opts.metrics);
  const heartbeat = startHeartbeat(ctx);
  log.info(
    { backends: [...backends.keys()], concurrency: config.jem.concurrency, controlDir: config.paths.controlDir, instance: heartbeat.jem },
    "JEM started",
  );

  let stopping: Promise<void> | undefined;
  return {
    ctx,
    stop() {
      stopping ??= (async () => {
        log.info("JEM stopping");
        const passes = Promise.all([expiry.stop(), recovery.stop(), ownerPasses?.stop()]);
        await poller.stop();
        await cacheCleaner?.stop();
        // Transfers are abandoned, not finished: the next JEM's recovery redoes them.
        for (const ac of ctx.aborts.values()) ac.abort();
        // Steps waiting for Redis give up now (their queue jobs are redone by the next JEM).
        outage.stop();
        await Promise.all([...workers.map((w) => w.close()), loop.current?.stop()]);
        await Promise.all([passes, accounting.stop(), migration]);
        await watcher.stop();
        await heartbeat.stop();
        await Promise.all(Object.values(ctx.queues).map((q) => q.close()));
        await sub.unsubscribe().catch(() => undefined);
        sub.disconnect();
        await clients.close();
        log.info("JEM stopped");
      })();
      return stopping;
    },
  };
}
