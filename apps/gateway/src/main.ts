/**
 * Gateway process entry: `node --import tsx apps/gateway/src/main.ts` (config from CE_CONFIG and
 * CE__* variables). SIGTERM/SIGINT stop accepting, let in-flight requests finish, then exit.
 */
// Bulk submissions create many small files; libuv's default pool of 4 threads would be the bottleneck.
process.env.UV_THREADPOOL_SIZE ??= "16";

const { loadConfig } = await import("@ce/config");
const { createLogger, startGateway } = await import("./server.js");

const config = loadConfig();
const logger = createLogger(config);
const gw = await startGateway(config, { logger });

let stopping = false;
for (const sig of ["SIGTERM", "SIGINT"] as const) {
  process.on(sig, () => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal: sig }, "shutting down");
    gw.close().then(
      () => process.exit(0),
      (err: unknown) => {
        logger.error({ err }, "shutdown failed");
        process.exit(1);
      },
    );
  });
}
