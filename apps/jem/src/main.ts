import { announceReady, failStartup, loadConfig } from "@ce/config";
import { onFdStolen } from "@ce/sessionfs";
import { connectRedis, type RedisOutage } from "@ce/store";
import { configuredVos, createAdminApp, createLogger, createMetrics, openQueues, startAdminServer, startupChecks } from "@ce/ops";
import { startJem } from "./daemon.js";

/**
 * `pnpm --filter @ce/jem start`: config from CE_CONFIG + CE__* overrides. The admin listener
 * (loopback, admin token) shows the BullMQ queues at /queues, Prometheus /metrics, /healthz,
 * /readyz. SIGTERM/SIGINT stop gracefully.
 */
// Any failure before the JEM runs is one line on stderr naming the problem (a bad setting, a back
// end without scripts, a port in use) and exit status 1, never a stack trace.
const config = (() => {
  try {
    return loadConfig();
  } catch (e) {
    return failStartup("jem", e);
  }
})();
if (process.argv.includes("--check-config")) {
  // Deployment check (deploy/validate.sh, `docker run ... --check-config`): settings only.
  console.error(`configuration ok: back end ${config.lrms.backend}, control dir ${config.paths.controlDir}`);
  process.exit(0);
}
const log = createLogger("jem", config.logging.level, { pid: process.pid });
// A descriptor closed by a non-owner is a bug that may have misdirected I/O: always a log line.
onFdStolen((err) => log.error({ err, fd: err.num, what: err.what }, "descriptor closed by someone else (EBADF on close)"));
// `ceadm doctor`'s checks: a fatal problem stops the start with its one line, the rest are warnings.
await startupChecks("jem", config, log).catch((e: unknown) => failStartup("jem", e, config));
const { clients, queues, jem, admin } = await (async () => {
  // The admin listener's and metrics' own connection (the daemon opens its own in startJem).
  const clients = connectRedis(config.redis, "jem");
  const redis = clients.redis;
  const queues = openQueues(config, undefined, clients.bull);
  const metrics = createMetrics({ role: "jem", redis, prefix: config.redis.prefix, queues, vos: configuredVos(config) });
  // Its connection errors belong to the daemon's outage episode (one line per outage, outage.ts).
  const episode: { outage?: RedisOutage } = {};
  redis.on("error", (e: unknown) => void episode.outage?.report(e));
  for (const q of queues) q.on("error", (e: unknown) => void episode.outage?.report(e));
  const jem = await startJem(config, { logger: log, metrics });
  episode.outage = jem.ctx.outage;
  const admin = config.admin.enabled
    ? await startAdminServer(
        createAdminApp({ config, redis, queues, registry: metrics.registry, role: "jem", ready: async () => true, logger: log }),
        { host: config.admin.host, port: config.admin.jemPort, logger: log },
      )
    : undefined;
  return { clients, queues, jem, admin };
})().catch((e: unknown) => failStartup("jem", e, config));
announceReady({ backend: config.lrms.backend, admin: admin?.url });

let signals = 0;
for (const sig of ["SIGTERM", "SIGINT"] as const) {
  process.on(sig, () => {
    if (++signals > 1) process.exit(1); // a second signal: stop waiting
    log.info({ signal: sig }, "shutting down");
    Promise.all([admin?.close(), jem.stop()])
      .then(() => Promise.all([...queues.map((q) => q.close())]).then(() => clients.close()))
      .then(
        () => process.exit(0),
        (e: unknown) => {
          log.error({ err: e }, "shutdown failed");
          process.exit(1);
        },
      );
  });
}
