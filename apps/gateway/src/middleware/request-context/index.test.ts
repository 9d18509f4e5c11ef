import { randomBytes } from "node:crypto";
import { Hono } from "hono";
import { Redis } from "ioredis";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { compileConfig } from "@ce/config";
import { JobStore } from "@ce/store";
import type { AppEnv, Identity, Services } from "../../context.js";
import { CeError } from "../../errors.js";
import { renderError } from "../../render.js";
import { rateLimit, requestContext } from "./index.js";

let redis: Redis;
beforeAll(() => {
  redis = new Redis(inject("redisUrl"));
});
afterAll(async () => redis.quit());

function makeApp(limits: { requestsPerSecond: number; requestBurst: number }, prefix: string, r: Redis = redis) {
  const config = compileConfig({ redis: { prefix }, gateway: { limits } });
  const services = { config, redis: r, jobs: new JobStore(r, prefix), logger: pino({ level: "silent" }) } as unknown as Services;
  const app = new Hono<AppEnv>();
  app.use("*", requestContext(services));
  app.use("*", async (c, next) => {
    const who = c.req.header("x-who");
    if (who) c.set("identity", { subject: who, kind: "x509", issuer: "/CN=CA" } satisfies Identity);
    await next();
  });
  app.use("*", rateLimit());
  app.get("/x", (c) => c.json({ id: c.get("requestId"), format: c.get("format") }));
  app.onError((err, c) => (err instanceof CeError ? renderError(c, err) : c.text("boom", 500)));
  return app;
}

describe("request context", () => {
  it("generates a request id, or propagates a valid incoming one", async () => {
    const app = makeApp({ requestsPerSecond: 0, requestBurst: 1 }, `{t${randomBytes(4).toString("hex")}}`);
    const a = await app.request("/x");
    expect(((await a.json()) as { id: string; format: string; "status-code": string }).id).toMatch(/^[0-9a-f-]{36}$/);
    expect(a.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
    const b = await app.request("/x", { headers: { "x-request-id": "trace-42" } });
    expect(((await b.json()) as { id: string; format: string; "status-code": string }).id).toBe("trace-42");
    const c = await app.request("/x", { headers: { "x-request-id": "x".repeat(300) } });
    expect(((await c.json()) as { id: string; format: string; "status-code": string }).id).not.toBe("x".repeat(300));
  });
  it("negotiates the format from Accept", async () => {
    const app = makeApp({ requestsPerSecond: 0, requestBurst: 1 }, `{t${randomBytes(4).toString("hex")}}`);
    const fmt = async (accept?: string) => ((await (await app.request("/x", accept ? { headers: { accept } } : {})).json()) as { id: string; format: string; "status-code": string }).format;
    expect(await fmt()).toBe("html");
    expect(await fmt("text/xml")).toBe("xml");
    expect(await fmt("application/json;q=0.5, text/xml")).toBe("json");
    expect(await fmt("*/*")).toBe("html");
  });
});

describe("rate limit", () => {
  it("token bucket per identity in Redis, shared by two gateways; 429 with Retry-After", async () => {
    const prefix = `{t${randomBytes(4).toString("hex")}}`;
    const g1 = makeApp({ requestsPerSecond: 1, requestBurst: 3 }, prefix);
    const g2 = makeApp({ requestsPerSecond: 1, requestBurst: 3 }, prefix);
    const hdr = { "x-who": "/CN=Alice", accept: "application/json" };
    expect((await g1.request("/x", { headers: hdr })).status).toBe(200);
    expect((await g2.request("/x", { headers: hdr })).status).toBe(200);
    expect((await g1.request("/x", { headers: hdr })).status).toBe(200);
    const limited = await g2.request("/x", { headers: hdr });
    expect(limited.status).toBe(429);
    expect(Number(limited.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    expect(((await limited.json()) as { id: string; format: string; "status-code": string })["status-code"]).toBe("429");
    // Another identity has its own bucket.
    expect((await g1.request("/x", { headers: { "x-who": "/CN=Bob" } })).status).toBe(200);
  });
  it("disabled with requestsPerSecond 0; fails open when Redis is unavailable", async () => {
    const off = makeApp({ requestsPerSecond: 0, requestBurst: 1 }, `{t${randomBytes(4).toString("hex")}}`);
    for (let i = 0; i < 5; i++) expect((await off.request("/x")).status).toBe(200);
    const dead = new Redis({ port: 1, lazyConnect: true, maxRetriesPerRequest: 0, enableOfflineQueue: false, retryStrategy: () => null });
    dead.on("error", () => undefined);
    const open = makeApp({ requestsPerSecond: 1, requestBurst: 1 }, `{t${randomBytes(4).toString("hex")}}`, dead);
    for (let i = 0; i < 3; i++) expect((await open.request("/x")).status).toBe(200);
    dead.disconnect();
  });
});
