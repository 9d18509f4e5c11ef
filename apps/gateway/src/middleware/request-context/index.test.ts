import { randomBytes } from "node:crypto";
import { Hono } from "hono";
import { Redis } from "ioredis";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { compileConfig } from "@ce/config";
import { JobStore, ownerKey as ownerKeyOf } from "@ce/store";
import type { AppEnv, Identity, Services } from "../../context.js";
import { CeError } from "../../errors.js";
import { renderError } from "../../render.js";
import { rateLimit, requestContext } from "./index.js";

let redis: Redis;
beforeAll(() => {
  redis = new Redis(inject("redisUrl"));
});
afterAll(async () => redis.quit());

function makeApp(
  limits: { requestsPerSecond: number; requestBurst: number; requestsInFlight?: number },
  prefix: string,
  r: Redis = redis,
  hold?: Promise<void>,
) {
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
  app.get("/slow", async (c) => {
    await hold;
    return c.text("done");
  });
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
    const fmt = async (accept?: string) =>
      (
        (await (await app.request("/x", accept ? { headers: { accept } } : {})).json()) as {
          id: string;
          format: string;
          "status-code": string;
        }
      ).format;
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
    expect(limited.headers.get("x-error-code")).toBe("RATE_LIMITED");
    expect(((await limited.json()) as { id: string; format: string; "status-code": string })["status-code"]).toBe("429");
    // The refusal is remembered until a token is due: the next one is refused without asking Redis.
    await redis.del(`${prefix}:rl:i:${ownerKeyOf("/CN=Alice")}`);
    expect((await g2.request("/x", { headers: hdr })).status).toBe(429);
    // Another identity has its own bucket.
    expect((await g1.request("/x", { headers: { "x-who": "/CN=Bob" } })).status).toBe(200);
  });
  it("leases tokens in blocks: a fast limit costs one Redis call per block, and still bites", async () => {
    const prefix = `{t${randomBytes(4).toString("hex")}}`;
    // 200/s, burst 30: blocks of 10 tokens (50 ms of refill).
    const g = makeApp({ requestsPerSecond: 200, requestBurst: 30 }, prefix);
    const hdr = { "x-who": "/CN=Carol", accept: "application/json" };
    expect((await g.request("/x", { headers: hdr })).status).toBe(200);
    const key = `${prefix}:rl:i:${ownerKeyOf("/CN=Carol")}`;
    const raw = await redis.hget(key, "tokens");
    const left = Number(raw);
    expect(left).toBeGreaterThanOrEqual(20);
    expect(left).toBeLessThan(21);
    // Nine more come from the local lease: the shared bucket is not touched.
    for (let i = 0; i < 9; i++) expect((await g.request("/x", { headers: hdr })).status).toBe(200);
    expect(await redis.hget(key, "tokens")).toBe(raw);
    // Past burst + refill the limit answers 429 (concurrent requests share one lease call).
    const codes = await Promise.all(Array.from({ length: 80 }, async () => (await g.request("/x", { headers: hdr })).status));
    expect(codes.filter((s) => s === 429).length).toBeGreaterThan(0);
  });
  it("caps the requests one identity has in progress at once: 429 TOO_MANY_IN_FLIGHT naming the limit", async () => {
    let release!: () => void;
    const hold = new Promise<void>((r) => (release = r));
    const g = makeApp({ requestsPerSecond: 0, requestBurst: 1, requestsInFlight: 2 }, `{t${randomBytes(4).toString("hex")}}`, redis, hold);
    const hdr = { "x-who": "/CN=Dave", accept: "application/json" };
    const slow = [g.request("/slow", { headers: hdr }), g.request("/slow", { headers: hdr })];
    const over = await g.request("/x", { headers: hdr });
    expect(over.status).toBe(429);
    expect(over.headers.get("x-error-code")).toBe("TOO_MANY_IN_FLIGHT");
    expect(over.headers.get("retry-after")).toBe("1");
    expect(((await over.json()) as { reason: string }).reason).toMatch(
      /2 of this client in progress \(gateway\.limits\.requestsInFlight 2\)/,
    );
    // Another identity is not affected.
    expect((await g.request("/x", { headers: { "x-who": "/CN=Erin" } })).status).toBe(200);
    release();
    for (const r of await Promise.all(slow)) expect(r.status).toBe(200);
    // The slots are given back when the handlers are done.
    expect((await g.request("/x", { headers: hdr })).status).toBe(200);
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
