import { routingPath } from "../src/app.js";
import { randomBytes, randomUUID } from "node:crypto";
import { Hono } from "hono";
import { Redis } from "ioredis";
import pino from "pino";
import { compileConfig, type ConfigInput } from "@ce/config";
import { negotiateFormat } from "@ce/glue2";
import { DelegationStore, SecretBox, type JobStore } from "@ce/store";
import { type ControlDir } from "@ce/controldir";
import { KeyPool, TrustStore, VomsDir } from "@ce/x509";
import type { AppEnv, Identity, Services } from "../src/context.js";
import { CeError, NotFound } from "../src/errors.js";
import { renderError } from "../src/render.js";
import { delegationRoutes } from "../src/routes/delegations.js";

/**
 * In-process harness for E8/E9: real Redis (own prefix), real DelegationStore, KeyPool and
 * TrustStore; the caller's identity comes from test headers (`x-test-subject`; `x-test-scopes`
 * makes it a token identity with those scopes). Routing mirrors app.ts for these paths.
 */
export interface DelegationHarness {
  services: Services;
  store: DelegationStore;
  call(
    method: string,
    path: string,
    opts?: { subject?: string; scopes?: string; headers?: Record<string, string>; body?: string },
  ): Promise<Response>;
  close(): Promise<void>;
}

export async function startDelegationHarness(redisUrl: string, caPem: string, overrides: ConfigInput = {}): Promise<DelegationHarness> {
  const prefix = `{d${randomBytes(6).toString("hex")}}`;
  const config = compileConfig({ ...overrides, redis: { url: redisUrl, prefix }, endpoint: { url: "https://localhost:8443/arex" } });
  const redis = new Redis(redisUrl);
  const store = new DelegationStore(redis, prefix, new SecretBox(SecretBox.generateKey()));
  const keyPool = new KeyPool({ size: 2 });
  const services: Services = {
    config,
    redis,
    jobs: {} as JobStore,
    delegations: store,
    control: {} as ControlDir,
    advance: {} as Services["advance"],
    trust: TrustStore.fromPem(caPem),
    voms: VomsDir.fromFiles({}),
    keyPool,
    logger: pino({ level: "silent" }),
  };
  // Same routing as app.ts.
  const app = new Hono<AppEnv>({ getPath: routingPath });
  app.use("*", async (c, next) => {
    c.set("services", services);
    c.set("log", services.logger);
    c.set("requestId", randomUUID());
    c.set("format", negotiateFormat(c.req.header("accept")));
    const subject = c.req.header("x-test-subject") ?? "nobody";
    const scopes = c.req.header("x-test-scopes");
    const id: Identity =
      scopes === undefined
        ? { subject, kind: "x509", issuer: "/CN=Test CA" }
        : { subject, kind: "token", issuer: "https://issuer", scopes: new Set(scopes.split(/\s+/).filter(Boolean)) };
    c.set("identity", id);
    await next();
  });
  const r = new Hono<AppEnv>({ strict: false });
  r.use("/:version/*", async (c, next) => {
    const v = c.req.param("version");
    if (v !== "1.0" && v !== "1.1") throw new NotFound("Version Not Supported");
    c.set("version", v);
    await next();
  });
  delegationRoutes(r);
  r.all("/:version/*", () => {
    throw new NotFound("Functionality Not Supported");
  });
  app.route(`${config.mountPath}/rest`, r);
  app.onError((err, c) => {
    if (err instanceof CeError) return renderError(c, err);

    console.error(err);
    return renderError(c, new CeError(500, "INTERNAL", "Internal server error"));
  });

  return {
    services,
    store,
    call(method, path, opts = {}) {
      const headers: Record<string, string> = { ...(opts.headers ?? {}) };
      if (opts.subject) headers["x-test-subject"] = opts.subject;
      if (opts.scopes !== undefined) headers["x-test-scopes"] = opts.scopes;
      // Bytes, not a string: a web Request gives a string body `text/plain;charset=UTF-8`, a type
      // the delegation routes refuse (a form's); the ARC client sends its PEM with no type at all.
      const body = typeof opts.body === "string" ? new TextEncoder().encode(opts.body) : opts.body;
      return Promise.resolve(app.request(`https://localhost:8443${path}`, { method, headers, ...(body !== undefined ? { body } : {}) }));
    },
    async close() {
      await keyPool.close();
      const keys = await redis.keys(`${prefix}*`);
      if (keys.length) await redis.del(...keys);
      redis.disconnect();
    },
  };
}
