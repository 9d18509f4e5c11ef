import { hostname } from "node:os";
import { AccountingDb, UsageConsumer, type UsageRecord } from "@ce/accounting";
import type { CompiledConfig } from "@ce/config";
import type { CeMetrics } from "@ce/ops";
import { Counter } from "prom-client";
import type { Redis } from "ioredis";
import type { Logger } from "pino";

const REOPEN_MS = 5_000;

/**
 * The JEM's side of accounting: every JEM runs a consumer of the usage stream (one consumer
 * group, so several JEMs share the entries and take over a dead one's). A database that cannot be
 * opened is retried; meanwhile the records wait in the stream, none is lost.
 */
export function startAccounting(config: CompiledConfig, redis: Redis, log: Logger, metrics?: CeMetrics): { stop(): Promise<void> } {
  const acct = config.accounting;
  if (!acct.enabled) {
    redis.disconnect();
    return { stop: async () => undefined };
  }
  const alog = log.child({ component: "accounting" });
  const onRecorded = metrics ? usageCounters(metrics) : undefined;
  let stopped = false;
  let consumer: UsageConsumer | undefined;
  let db: AccountingDb | undefined;
  const started = (async () => {
    while (!stopped) {
      try {
        db = await AccountingDb.open(acct.database, config.paths.stateDir);
        break;
      } catch (e) {
        alog.error(
          { err: e, code: (e as { code?: string }).code, reason: (e as Error).message },
          "accounting database unavailable; usage records wait in Redis",
        );
        await new Promise((r) => setTimeout(r, REOPEN_MS));
      }
    }
    if (stopped || !db) return;
    alog.info({ database: db.kind }, "accounting consumer started");
    consumer = new UsageConsumer({
      redis,
      prefix: config.redis.prefix,
      db,
      log: alog,
      vomslessVo: acct.apel.vomslessVo,
      consumer: acct.consumer ?? `${hostname()}:${process.pid}`,
      claimIdleMs: acct.claimIdleMs,
      ...(onRecorded ? { onRecorded } : {}),
    });
    consumer.start();
  })();
  return {
    async stop() {
      stopped = true;
      await started;
      await consumer?.stop();
      await db?.close();
      redis.disconnect();
    },
  };
}

/** CPU and wall seconds (and records) by VO and state, counted once per record written. */
function usageCounters(metrics: CeMetrics): (recs: readonly UsageRecord[]) => void {
  const reg = { registers: [metrics.registry] };
  const cpu = new Counter({
    name: "ce_accounting_cpu_seconds_total",
    help: "CPU seconds (user+system) of ended jobs, by VO",
    labelNames: ["vo"],
    ...reg,
  });
  const wall = new Counter({
    name: "ce_accounting_wall_seconds_total",
    help: "Wall seconds of ended jobs, by VO",
    labelNames: ["vo"],
    ...reg,
  });
  const records = new Counter({
    name: "ce_accounting_records_total",
    help: "Usage records written, by VO and terminal state",
    labelNames: ["vo", "state"],
    ...reg,
  });
  return (recs) => {
    for (const r of recs) {
      cpu.inc({ vo: r.vo }, r.cpuSeconds);
      wall.inc({ vo: r.vo }, r.wallSeconds);
      records.inc({ vo: r.vo, state: r.state });
    }
  };
}
