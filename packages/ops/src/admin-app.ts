import { randomUUID } from "node:crypto";
import { existsSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { serve } from "@hono/node-server";
import { serveStatic } from "@hono/node-server/serve-static";
import { createBullBoard } from "@bull-board/api";
import { BullMQAdapter } from "@bull-board/api/bullMQAdapter";
import { HonoAdapter } from "@bull-board/hono";
import type { Queue } from "bullmq";
import { Hono } from "hono";
import type { Redis } from "ioredis";
import type { Logger } from "pino";
import type { Registry } from "prom-client";
import type { CompiledConfig } from "@ce/config";
import { AdvanceBoardAdapter } from "./advance-board.js";
import { ADMIN_PAGE_HEADERS, adminIndexPage, tokenHelpPage } from "./admin-index.js";
import { adminAuth, resolveAdminToken } from "./auth.js";
import { AdminOps, OpsError } from "./ops.js";
import type { Role } from "./metrics.js";

export interface AdminAppOptions {
  /** Only the token and the key prefix are read (structural, so tests need no full config). */
  config: {
    admin: Pick<CompiledConfig["admin"], "token" | "tokenFile"> & Partial<Pick<CompiledConfig["admin"], "jemPort" | "docsUrl">>;
    redis: Pick<CompiledConfig["redis"], "prefix">;
    /** For the index page's link to the CE's pages for people. */
    endpoint?: Pick<CompiledConfig["endpoint"], "url"> | undefined;
  };
  redis: Redis;
  /** BullMQ queues (the JEM's staging queue): shown in /queues (JEM), counted in /api/queues. */
  queues?: readonly Queue[] | undefined;
  registry: Registry;
  role: Role;
  /** Role-specific readiness (gateway: listener up; JEM: workers running). */
  ready: () => Promise<boolean>;
  /** Mount the bull-board UI at /queues. Default: role === "jem". */
  board?: boolean | undefined;
  /** Overrides config.admin.token/tokenFile (tests, a token generated at start). */
  token?: string | undefined;
  logger?: Logger | undefined;
}

const BOARD_PATH = "/queues";
const READY_TIMEOUT_MS = 2_000;

const BUNDLED_UI = join(import.meta.dirname, "bull-board-ui");
/**
 * The admin listener's app: health, readiness, metrics, the bull-board UI and a small JSON API.
 * Served on its own (loopback) listener, never on the user-facing port.
 */
export function createAdminApp(opts: AdminAppOptions): Hono {
  const { redis, registry, role, logger } = opts;
  const queues = opts.queues ?? [];
  const ops = new AdminOps(redis, opts.config.redis.prefix, queues);
  const token = opts.token ?? resolveAdminToken(opts.config);
  if (!token) logger?.warn("admin token not configured: the admin listener answers only /healthz");

  const withBoard = opts.board ?? role === "jem";

  const app = new Hono();
  app.get("/healthz", (c) => c.json({ status: "ok", role }));
  app.use("*", adminAuth(token, { skip: (p) => p === "/healthz", page: (wrong) => tokenHelpPage(role, wrong) }));

  // What is here, for a person (JSON clients never ask for `/`).
  app.get("/", (c) =>
    c.body(
      adminIndexPage({
        role,
        board: withBoard,
        jemPort: opts.config.admin.jemPort,
        endpointUrl: opts.config.endpoint?.url,
        docsUrl: opts.config.admin.docsUrl,
      }),
      200,
      ADMIN_PAGE_HEADERS,
    ),
  );

  app.get("/readyz", async (c) => {
    const [redisOk, roleOk] = await Promise.all([withTimeout(redis.ping().then((r) => r === "PONG")), withTimeout(opts.ready())]);
    const ok = redisOk && roleOk;
    return c.json({ status: ok ? "ready" : "not ready", redis: redisOk, [role]: roleOk }, ok ? 200 : 503);
  });

  app.get("/metrics", async (c) => {
    c.header("Content-Type", registry.contentType);
    return c.body(await registry.metrics());
  });

  if (withBoard) {
    const board = new HonoAdapter(serveStatic);
    board.setBasePath(BOARD_PATH);
    createBullBoard({
      // The JEM's work list (a sorted set, not a BullMQ queue) next to the BullMQ queues, read-only.
      queues: [new AdvanceBoardAdapter(redis, opts.config.redis.prefix), ...queues.map((q) => new BullMQAdapter(q))],
      serverAdapter: board,
      // In a bundle (scripts/build-app.ts) the UI's files are beside it: bull-board's own lookup
      // (require.resolve of @bull-board/ui) needs a node_modules tree.
      options: { uiConfig: { boardTitle: "CE queues" }, ...(existsSync(BUNDLED_UI) ? { uiBasePath: BUNDLED_UI } : {}) },
    });
    app.route(BOARD_PATH, board.registerPlugin());
  }

  const api = new Hono();
  api.get("/jobs", async (c) => {
    const limit = c.req.query("limit");
    const states = ops.parseStates(c.req.query("state"));
    return c.json(await ops.listJobs({ owner: c.req.query("owner") || undefined, states, limit: limit ? Number(limit) : undefined }));
  });
  api.get("/jobs/:id", async (c) => c.json(await ops.getJob(c.req.param("id"))));
  for (const action of ["kill", "clean"] as const) {
    api.post(`/jobs/:id/${action}`, async (c) => {
      const requestId = c.req.header("x-request-id") ?? randomUUID();
      const res = await ops.command(action, c.req.param("id"), requestId);
      logger?.info({ jobId: res.jobId, action, requestId, via: "admin" }, "admin job command queued");
      return c.json(res, 202);
    });
  }
  api.get("/drain", async (c) => c.json(await ops.drainStatus()));
  api.post("/drain", async (c) => {
    logger?.warn({ via: "admin" }, "drain on: new jobs are refused");
    return c.json(await ops.setDrain(true));
  });
  api.delete("/drain", async (c) => {
    logger?.warn({ via: "admin" }, "drain off: new jobs are accepted");
    return c.json(await ops.setDrain(false));
  });
  api.get("/queues", async (c) => c.json(await ops.queueCounts()));
  api.get("/stats", async (c) => c.json(await ops.stats()));
  app.route("/api", api);

  app.onError((err, c) => {
    if (err instanceof OpsError) return c.json({ error: err.message }, err.code === "NOT_FOUND" ? 404 : 400);
    logger?.error({ err }, "admin request failed");
    return c.json({ error: "internal error" }, 500);
  });
  app.notFound((c) => c.json({ error: "not found" }, 404));
  return app;
}

async function withTimeout(p: Promise<boolean>, ms = READY_TIMEOUT_MS): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
  });
  try {
    return await Promise.race([p.catch(() => false), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

export interface AdminServer {
  url: string;
  close(): Promise<void>;
}

const LOOPBACK = new Set(["127.0.0.1", "::1", "localhost"]);

/**
 * Starts the admin listener: plain HTTP, loopback by default. Remote access goes through an SSH
 * tunnel or a TLS-terminating proxy (deploy/README.md), never by binding a public address in clear.
 */
export async function startAdminServer(
  app: Hono,
  opts: { host?: string | undefined; port?: number | undefined; logger?: Logger | undefined } = {},
): Promise<AdminServer> {
  const host = opts.host ?? "127.0.0.1";
  if (!LOOPBACK.has(host)) opts.logger?.warn({ host }, "admin listener bound to a non-loopback address (plain HTTP)");
  const server = await new Promise<ReturnType<typeof serve>>((resolve, reject) => {
    const s = serve({ fetch: app.fetch, hostname: host, port: opts.port ?? 8444 }, () => resolve(s));
    s.once("error", reject);
  });
  const addr = server.address() as AddressInfo;
  const shown = addr.family === "IPv6" ? `[${addr.address}]` : addr.address;
  const url = `http://${shown}:${addr.port}`;
  opts.logger?.info({ url }, "admin listener up");
  return {
    url,
    close: () =>
      new Promise<void>((resolve, reject) => {
        // Keep-alive sockets (browsers, Prometheus) would otherwise hold close() open.
        if ("closeAllConnections" in server) (server as { closeAllConnections(): void }).closeAllConnections();
        server.close((err) => (err ? reject(err) : resolve()));
      }),
  };
}
