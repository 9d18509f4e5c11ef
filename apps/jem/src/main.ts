import { Redis } from "ioredis";
import { loadConfig, redisAuth } from "@ce/config";
import { createAdminApp, createLogger, createMetrics, openQueues, startAdminServer } from "@ce/ops";
import { startJem } from "./daemon.js";

/**
 * `pnpm --filter @ce/jem start`: config from CE_CONFIG + CE__* overrides. The admin listener
 * (loopback, admin token) shows the BullMQ queues at /queues, Prometheus /metrics, /healthz,
 * /readyz. SIGTERM/SIGINT stop gracefully.
 */
const config = loadConfig();
if (process.argv.includes("--check-config")) {
  // Deployment check (deploy/validate.sh, `docker run ... --check-config`): settings only.
  console.error(`configuration ok: back end ${config.lrms.backend}, control dir ${config.paths.controlDir}`);
  process.exit(0);
}
const log = createLogger("jem", config.logging.level, { pid: process.pid });
const redisAuthJem = redisAuth(config.redis, "jem");
const redis = new Redis(config.redis.url, { maxRetriesPerRequest: null, ...redisAuthJem });
const queues = openQueues(config, undefined, redisAuthJem);
const metrics = createMetrics({ role: "jem", redis, prefix: config.redis.prefix, queues });
const jem = await startJem(config, { logger: log, metrics });
const admin = config.admin.enabled
  ? await startAdminServer(
      createAdminApp({ config, redis, queues, registry: metrics.registry, role: "jem", ready: async () => true, logger: log }),
      { host: config.admin.host, port: config.admin.jemPort, logger: log },
    )
  : undefined;

let signals = 0;
for (const sig of ["SIGTERM", "SIGINT"] as const) {
  process.on(sig, () => {
    if (++signals > 1) process.exit(1); // a second signal: stop waiting
    log.info({ signal: sig }, "shutting down");
    Promise.all([admin?.close(), jem.stop()])
      .then(() => Promise.all([...queues.map((q) => q.close()), redis.quit()]))
      .then(
        () => process.exit(0),
        (e: unknown) => {
          log.error({ err: e }, "shutdown failed");
          process.exit(1);
        },
      );
  });
}
