import { constants as cryptoConstants } from "node:crypto";
import { readFileSync } from "node:fs";
import { createServer as createHttpServer, type Server as HttpServer } from "node:http";
import { createServer as createHttpsServer } from "node:https";
import { DEFAULT_CIPHERS } from "node:tls";
import type { AddressInfo } from "node:net";
import { getRequestListener } from "@hono/node-server";
import pino, { type Logger } from "pino";
import type { CompiledConfig } from "@ce/config";
import { AdvanceSet, DelegationStore, JobStore, connectRedis, loadSecretBox as loadStoreSecretBox, type SecretBox } from "@ce/store";
import { ControlDir } from "@ce/controldir";
import { KeyPool, TrustStore, VomsDir } from "@ce/x509";
import { configuredVos, createLogger as createOpsLogger, createMetrics } from "@ce/ops";
import { Mapper } from "@ce/mapping";
import { createApp } from "./app.js";
import { outageOf } from "./outage.js";
import { capConnectionsPerAddress } from "./connections.js";
import { authConfigProblems } from "./auth/config-check.js";
import type { Services } from "./context.js";

/**
 * Node flags the gateway should run with (package.json `start`, the bench, deployment units).
 * The live heap stays under ~50 MB, but V8 sizes the heap from the machine's RAM and lets it grow
 * to several times that between full collections; a bound keeps RSS predictable. 256 MB still
 * leaves room for the largest request the limits allow (10,000-id `info`).
 */
export const GATEWAY_NODE_FLAGS = ["--max-old-space-size=256"];

/** Never let credentials reach a log line, whatever gets logged by accident (one list: @ce/ops). */
export { REDACT_PATHS } from "@ce/ops";

/** Log lines are written in blocks of this many bytes (~16 access-log lines) ... */
export const LOG_BLOCK_BYTES = 4096;
/** ... or at the latest this long after they were logged: what a SIGKILL can lose. */
export const LOG_FLUSH_MS = 100;

/**
 * At the default level every request writes an access-log line. Lines are written asynchronously
 * and in blocks: a write starts once LOG_BLOCK_BYTES are waiting (lines written while a write is
 * in progress go out with the next one), and an unref'd timer writes whatever waits every
 * LOG_FLUSH_MS, so a quiet gateway's lines still appear within that time. One write per line cost
 * ~0.05 ms of CPU per request under load (a thread-pool write each). pino writes what waits
 * synchronously on exit, also after an uncaught exception; only a kill (SIGKILL, OOM) loses lines:
 * at most the last LOG_FLUSH_MS worth (or LOG_BLOCK_BYTES). A destination that stops taking lines
 * costs at most 16 MiB before lines are dropped, rather than stalling every request.
 * `fd`: where the lines go (tests); stdout by default.
 */
export function createLogger(config: CompiledConfig, fd = 1): Logger {
  const dest = pino.destination({
    dest: fd,
    sync: false,
    minLength: LOG_BLOCK_BYTES,
    periodicFlush: LOG_FLUSH_MS,
    maxLength: 16 * 2 ** 20,
  });
  return createOpsLogger("gateway", config.logging.level, {}, dest);
}

/**
 * Requests the Node adapter refuses before the app runs (a backslash in the path, a bad Host
 * header or absolute URL) still get a reason and an error code; anything else is a logged 500.
 */
function adaptorErrors(logger: Logger) {
  return (err: unknown): Response => {
    const e = err as Error;
    if (e?.name === "RequestError") {
      const body = JSON.stringify({ "status-code": "400", reason: `Bad request: ${e.message}` });
      return new Response(body, { status: 400, headers: { "content-type": "application/json", "X-Error-Code": "BAD_REQUEST_TARGET" } });
    }
    logger.error({ err: e }, "request failed outside the app");
    return new Response(JSON.stringify({ "status-code": "500", reason: "Internal server error" }), {
      status: 500,
      headers: { "content-type": "application/json" },
    });
  };
}

export interface GatewayHandle {
  /** `https://host:port` (or http:// in plain-HTTP mode) — the origin, without the mount path. */
  url: string;
  port: number;
  services: Services;
  server: HttpServer;
  close(): Promise<void>;
}

export interface StartOptions {
  logger?: Logger;
  /** Milliseconds in-flight requests get on close before connections are cut. */
  drainMs?: number;
}

/** The delegation encryption key (one loader: @ce/store); the gateway logs a generated dev key. */
export function loadSecretBox(config: CompiledConfig, log: Logger): SecretBox {
  return loadStoreSecretBox(config, (file) => log.warn({ file }, "generated a delegation encryption key (development default)"));
}

export async function createServices(config: CompiledConfig, logger: Logger): Promise<Services> {
  // ACL user `gateway`; the password file is read here, at boot (refused when group/other-readable).
  // Standalone, Sentinel or Cluster as `redis.mode` says.
  const clients = connectRedis(config.redis, "gateway");
  const redis = clients.redis;
  // Connection errors repeat on every reconnect attempt: logged once per outage episode (outage.ts).
  redis.on("error", (err) => {
    if (!outageOf({ redis, config, logger }).report(err)) logger.warn({ err: err.message }, "redis connection error");
  });
  redis.on("ready", () => outageOf({ redis, config, logger }).nudge());
  // The connection has no offline queue (a request meeting a down Redis fails fast): wait for it
  // once here, bounded — a gateway booting while Redis is away answers 503 until it is back.
  await redisReady(redis, 10_000);
  const prefix = config.redis.prefix;
  const control = new ControlDir(config.paths.controlDir, config.paths.sessionRoot, config.paths.batchRoot);
  await control.ensureRoots();
  let trust: TrustStore;
  try {
    const { crlExpired, crlUnparsable, namespaces, crlRequired } = config.auth.x509;
    trust = await TrustStore.load(config.auth.caDir, { crlExpired, crlUnparsable, namespaces, crlRequired });
  } catch (e) {
    throw new Error(`cannot load the CA directory ${config.auth.caDir}: ${(e as Error).message}`);
  }
  for (const w of trust.warnings) logger.warn({ warning: w }, "CA directory");
  const voms = await VomsDir.load(config.auth.voms.dir);
  for (const w of voms.warnings) logger.warn({ warning: w }, "vomsdir");
  // Bad rules, forbidden or missing accounts and unreadable grid-mapfiles stop the boot here.
  const onWarning = (warning: string) => logger.warn({ warning }, "identity mapping");
  const mapper = config.mapping
    ? await Mapper.create(config.mapping, { redis, prefix, onWarning }).catch(async (e: unknown) => {
        await clients.close();
        throw e;
      })
    : undefined;
  if (!mapper) logger.warn("no `mapping` section: jobs are not mapped to local accounts");
  return {
    config,
    redis,
    jobs: new JobStore(redis, prefix),
    advance: new AdvanceSet(redis, prefix),
    delegations: new DelegationStore(redis, prefix, loadSecretBox(config, logger)),
    control,
    trust,
    voms,
    keyPool: new KeyPool({ size: config.delegations.keyPoolSize }),
    logger,
    mapper,
    metrics: createMetrics({ role: "gateway", redis, prefix, vos: configuredVos(config) }),
    closeRedis: clients.close,
  };
}

/**
 * Node's default suites with TLS_AES_128_GCM_SHA256 first, chosen by the server's order: clients
 * (OpenSSL's curl, Node) list AES-256-GCM first, which costs ~12% more AES per byte on both ends
 * (openssl speed here: 3.2 vs 2.8 GB/s; a 1 GiB upload: ~0.08 CPU s less on the gateway). Both
 * are in every TLS 1.3 profile; nothing is added to the default list, only reordered.
 */
export const GATEWAY_CIPHERS = ["TLS_AES_128_GCM_SHA256", ...DEFAULT_CIPHERS.split(":").filter((c) => c !== "TLS_AES_128_GCM_SHA256")].join(
  ":",
);

/**
 * HTTPS with client certificates requested but verified by the application (Node cannot verify
 * RFC 3820 proxy chains). Session tickets are off: a resumed TLS session no longer carries the
 * client's intermediate certificates (see middleware/identity/x509.ts).
 */
export async function startGateway(config: CompiledConfig, opts: StartOptions = {}): Promise<GatewayHandle> {
  const logger = opts.logger ?? createLogger(config);
  // Settings that would only fail at request time (rules that never match, http:// issuers) stop the boot.
  const problems = authConfigProblems(config);
  if (problems.length > 0) throw new Error(`invalid authentication settings:\n  ${problems.join("\n  ")}`);
  const services = await createServices(config, logger);
  const app = createApp(services);
  const plain = config.gateway.plainHttp.enabled;
  const conn = config.gateway.connections;
  // Node checks header/request deadlines on this interval (default 30 s): check often enough that
  // the configured timeouts are what a slow client actually gets.
  const httpOptions = { maxHeaderSize: conn.maxHeaderBytes, connectionsCheckingInterval: 1_000 };
  // The adapter's listener, with an error handler for requests it refuses before the app runs.
  const listener = getRequestListener(app.fetch, { errorHandler: adaptorErrors(logger) });
  const server = (
    plain
      ? createHttpServer(httpOptions, listener)
      : createHttpsServer(
          {
            ...httpOptions,
            // A TLS handshake that never finishes is cut as a slow request head would be.
            handshakeTimeout: Math.max(1, conn.headersTimeoutSeconds) * 1000,
            cert: readFileSync(required(config.gateway.tls.certFile, "gateway.tls.certFile")),
            key: readFileSync(required(config.gateway.tls.keyFile, "gateway.tls.keyFile")),
            requestCert: true,
            rejectUnauthorized: false,
            minVersion: "TLSv1.2",
            ciphers: GATEWAY_CIPHERS,
            honorCipherOrder: true,
            secureOptions: cryptoConstants.SSL_OP_NO_TICKET,
          },
          listener,
        )
  ) as HttpServer;
  // Slowloris bounds: the head within headersTimeout, the whole request within requestTimeout
  // (long: uploads are big), no silence longer than the idle timeout, and a cap per address.
  server.requestTimeout = conn.requestTimeoutSeconds * 1000;
  server.headersTimeout =
    conn.requestTimeoutSeconds > 0
      ? Math.min(conn.headersTimeoutSeconds, conn.requestTimeoutSeconds) * 1000
      : conn.headersTimeoutSeconds * 1000;
  server.keepAliveTimeout = conn.keepAliveTimeoutSeconds * 1000;
  server.timeout = conn.idleTimeoutSeconds * 1000;
  capConnectionsPerAddress(server, conn.maxPerAddress, plain ? config.gateway.plainHttp.trustedProxies : [], logger);
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(config.gateway.port, config.gateway.host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const { port, address } = server.address() as AddressInfo;
  const host = address.includes(":") ? `[${address}]` : address;
  const url = `${plain ? "http" : "https"}://${host}:${port}`;
  logger.info({ url, mount: config.mountPath, plainHttp: plain }, "gateway listening");

  // CRLs and CA updates (fetch-crl) are picked up without a restart.
  // fetch-crl rewrites CRLs in place; each reload states again what is unusable (expired CRLs, bad files).
  const reloadTrust = async () => {
    await services.trust.reload();
    for (const w of services.trust.warnings) logger.warn({ warning: w }, "CA directory");
    await services.voms.reload();
    for (const w of services.voms.warnings) logger.warn({ warning: w }, "vomsdir");
  };
  const reload = setInterval(() => void reloadTrust().catch((err) => logger.warn({ err }, "CA reload failed")), 10 * 60_000);
  reload.unref();

  let closing: Promise<void> | undefined;
  const close = () =>
    (closing ??= (async () => {
      clearInterval(reload);
      const done = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      const timer = setTimeout(() => server.closeAllConnections(), opts.drainMs ?? 10_000);
      await done;
      clearTimeout(timer);
      await services.keyPool.close();
      await (services.closeRedis ?? (() => services.redis.quit()))().catch(() => undefined);
      logger.info("gateway stopped");
    })());
  return { url, port, services, server, close };
}

function redisReady(redis: { status: string; once(ev: "ready", fn: () => void): unknown }, ms: number): Promise<void> {
  if (redis.status === "ready") return Promise.resolve();
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    t.unref();
    redis.once("ready", () => (clearTimeout(t), resolve()));
  });
}

function required(v: string | undefined, name: string): string {
  if (!v) throw new Error(`${name} is required for HTTPS (or enable gateway.plainHttp behind a TLS proxy)`);
  return v;
}
