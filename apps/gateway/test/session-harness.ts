import { routingPath } from "../src/app.js";
import { randomBytes, randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { request as httpRequest, type IncomingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { serve, type ServerType } from "@hono/node-server";
import { Hono } from "hono";
import { Redis } from "ioredis";
import pino from "pino";
import { compileConfig, type ConfigInput } from "@ce/config";
import { negotiateFormat } from "@ce/glue2";
import { AdvanceSet, JobStore, type DelegationStore, type JobRecord } from "@ce/store";
import { ControlDir } from "@ce/controldir";
import { VomsDir, type KeyPool, type TrustStore } from "@ce/x509";
import type { AppEnv, Identity, Services } from "../src/context.js";
import { CeError, NotFound } from "../src/errors.js";
import { renderError } from "../src/render.js";
import { diagnoseRoutes } from "../src/routes/diagnose.js";
import { sessionRoutes } from "../src/routes/session.js";

/**
 * Minimal in-process harness for the E6/E7 routes: real Redis (own `{t…}` prefix), real
 * JobStore/ControlDir on temp dirs, a real BullMQ queue, and a fake identity taken from test
 * headers (`x-test-subject`, `x-test-scopes` → a token identity with those scopes). Routing
 * mirrors app.ts (slash collapsing, version check) without the other routes.
 */
export const OWNER = "/DC=org/DC=test/CN=Session Owner";
export const OTHER = "/DC=org/DC=test/CN=Someone Else";

export interface Harness {
  services: Services;
  app: Hono<AppEnv>;
  base: string;
  port: number;
  sessionRoot: string;
  newJob(init?: Partial<JobRecord>, owner?: string): Promise<string>;
  raw(method: string, path: string, opts?: RawOptions): Promise<RawResponse>;
  close(): Promise<void>;
}

export interface RawOptions {
  headers?: Record<string, string>;
  body?: string | Buffer | Buffer[];
  subject?: string;
}

export interface RawResponse {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
  text: string;
}

export async function startHarness(redisUrl: string, overrides: ConfigInput = {}): Promise<Harness> {
  const dir = await mkdtemp(join(tmpdir(), "ce-session-"));
  const prefix = `{t${randomBytes(6).toString("hex")}}`;
  const config = compileConfig({
    ...overrides,
    paths: { stateDir: dir, ...overrides.paths },
    redis: { url: redisUrl, prefix },
    endpoint: { url: "https://localhost:8443/arex" },
  });
  const redis = new Redis(redisUrl, { maxRetriesPerRequest: null });
  const control = new ControlDir(config.paths.controlDir, config.paths.sessionRoot);
  await control.ensureRoots();
  const services: Services = {
    config,
    redis,
    jobs: new JobStore(redis, prefix),
    delegations: {} as DelegationStore,
    control,
    advance: new AdvanceSet(redis, prefix),
    trust: {} as TrustStore,
    voms: VomsDir.fromFiles({}),
    keyPool: {} as KeyPool,
    logger: pino({ level: "silent" }),
  };

  // Same routing as app.ts.
  const app = new Hono<AppEnv>({ getPath: routingPath });
  app.use("*", async (c, next) => {
    c.set("services", services);
    c.set("log", services.logger);
    c.set("requestId", randomUUID());
    c.set("format", negotiateFormat(c.req.header("accept")));
    const scopes = c.req.header("x-test-scopes");
    const id: Identity =
      scopes === undefined
        ? { subject: c.req.header("x-test-subject") ?? OWNER, kind: "x509", issuer: "/CN=Test CA" }
        : {
            subject: c.req.header("x-test-subject") ?? OWNER,
            kind: "token",
            issuer: "https://issuer",
            scopes: new Set(scopes.split(/\s+/).filter(Boolean)),
          };
    c.set("identity", id);
    await next();
  });
  const r = new Hono<AppEnv>({ strict: false });
  r.use("/:version/*", async (c, next) => {
    const v = c.req.param("version");
    if (v !== "1.0" && v !== "1.1") throw new NotFound("Version Not Supported", "VERSION_NOT_SUPPORTED");
    c.set("version", v);
    await next();
  });
  sessionRoutes(r);
  diagnoseRoutes(r);
  app.route(`${config.mountPath}/rest`, r);
  app.onError((err, c) => {
    if (err instanceof CeError) return renderError(c, err);
    console.error(err);
    return renderError(c, new CeError(500, "INTERNAL", "Internal server error"));
  });

  const server: ServerType = await new Promise((resolve) => {
    const s = serve({ fetch: app.fetch, hostname: "127.0.0.1", port: 0 }, () => resolve(s));
  });
  const port = (server.address() as AddressInfo).port;

  async function newJob(init: Partial<JobRecord> = {}, owner = OWNER): Promise<string> {
    const id = randomUUID();
    const rec = {
      ...JobStore.newRecord({ id, owner, queue: "main", backend: "fork", language: "adl", delegations: [], rerun: 0, lifetime: 3600 }),
      ...init,
    };
    const n = await services.jobs.create([rec], 1e6);
    if (n !== 1) throw new Error("job not created");
    await control.createJobDirs(id);
    return id;
  }

  function raw(method: string, path: string, opts: RawOptions = {}): Promise<RawResponse> {
    return new Promise((resolve, reject) => {
      const req = httpRequest(
        { host: "127.0.0.1", port, method, path, headers: { "x-test-subject": opts.subject ?? OWNER, ...opts.headers } },
        (res) => {
          const chunks: Buffer[] = [];
          res.on("data", (d: Buffer) => chunks.push(d));
          res.on("end", () => {
            const body = Buffer.concat(chunks);
            resolve({ status: res.statusCode ?? 0, headers: res.headers, body, text: body.toString("utf8") });
          });
          res.on("error", reject);
        },
      );
      req.on("error", reject);
      const parts = opts.body === undefined ? [] : Array.isArray(opts.body) ? opts.body : [opts.body];
      for (const p of parts) req.write(p);
      req.end();
    });
  }

  return {
    services,
    app,
    base: `${config.mountPath}/rest/1.0/jobs`,
    port,
    sessionRoot: config.paths.sessionRoot,
    newJob,
    raw,
    async close() {
      await new Promise<void>((res) => {
        server.close(() => res());
        (server as import("node:http").Server).closeAllConnections?.();
      });
      const keys = await redis.keys(`${prefix}*`);
      if (keys.length) await redis.del(...keys);
      await redis.quit();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
