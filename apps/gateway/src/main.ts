/**
 * Gateway process entry: `node --import tsx apps/gateway/src/main.ts` (config from CE_CONFIG and
 * CE__* variables). Serves the REST interface and, on a separate loopback listener, the admin
 * endpoints (metrics, health). SIGTERM/SIGINT stop accepting, let in-flight requests finish, exit.
 */
// Bulk submissions create many small files; libuv's default pool of 4 threads would be the bottleneck.
process.env.UV_THREADPOOL_SIZE ??= "16";
const { announceReady, failStartup, loadConfig } = await import("@ce/config");
const { createAdminApp, startAdminServer, startupChecks } = await import("@ce/ops");
const { createLogger, startGateway } = await import("./server.js");
const { onFdStolen } = await import("@ce/sessionfs");

// Any failure before the listeners are up is one line on stderr naming the problem (a missing
// certificate file, a port in use, a bad setting) and exit status 1, never a stack trace.
const config = (() => {
  try {
    return loadConfig();
  } catch (e) {
    return failStartup("gateway", e);
  }
})();
// Before anything is uploaded: runtime-internals.ts, "v8-array-buffer-sweeping".
await (await import("./runtime-internals.js")).applyV8Flags(config.gateway.internals);
if (process.argv.includes("--check-config")) {
  // Deployment check (deploy/validate.sh, `docker run ... --check-config`): settings only, no listeners.
  const { authConfigProblems } = await import("./auth/config-check.js");
  const problems = authConfigProblems(config);
  if (problems.length > 0) {
    console.error(`invalid authentication settings:\n  ${problems.join("\n  ")}`);
    process.exit(1);
  }
  console.error(`configuration ok: ${config.endpoint.url}, redis ${config.redis.prefix}`);
  process.exit(0);
}
const logger = createLogger(config);
// A descriptor closed by a non-owner is a bug that may have misdirected I/O: always a log line.
onFdStolen((err) => logger.error({ err, fd: err.num, what: err.what }, "descriptor closed by someone else (EBADF on close)"));
// `ceadm doctor`'s checks: a fatal problem stops the start with its one line, the rest are warnings.
await startupChecks("gateway", config, logger).catch((e: unknown) => failStartup("gateway", e, config));
const booted = await (async () => {
  const gw = await startGateway(config, { logger });
  const { services } = gw;
  const admin =
    config.admin.enabled && services.metrics
      ? await startAdminServer(
          createAdminApp({
            config,
            redis: services.redis,
            registry: services.metrics.registry,
            role: "gateway",
            ready: async () => gw.server.listening,
            logger,
          }),
          { host: config.admin.host, port: config.admin.port, logger },
        )
      : undefined;
  return { gw, admin };
})().catch((e: unknown) => failStartup("gateway", e, config));
const { gw, admin } = booted;
announceReady({ url: gw.url, mount: config.mountPath, admin: admin?.url });

let stopping = false;
for (const sig of ["SIGTERM", "SIGINT"] as const) {
  process.on(sig, () => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal: sig }, "shutting down");
    Promise.all([admin?.close(), gw.close()]).then(
      () => process.exit(0),
      (err: unknown) => {
        logger.error({ err }, "shutdown failed");
        process.exit(1);
      },
    );
  });
}
