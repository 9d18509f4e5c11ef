import { randomBytes } from "node:crypto";
import type { Queue } from "bullmq";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { AdvanceSet, JobStore, Keys } from "@ce/store";
import { createAdminApp, startAdminServer } from "./admin-app.js";
import { ADMIN_COOKIE } from "./auth.js";
import { createMetrics } from "./metrics.js";
import { openQueues } from "./ops.js";

const prefix = `{ops-a-${randomBytes(4).toString("hex")}}`;
const token = randomBytes(24).toString("base64url");
const auth = { authorization: `Bearer ${token}` };
let redis: Redis;
let queues: Queue[];
let app: ReturnType<typeof createAdminApp>;

beforeAll(async () => {
  const url = inject("redisUrl");
  redis = new Redis(url);
  const config = { admin: { token }, redis: { url, prefix } };
  queues = openQueues(config);
  const metrics = createMetrics({ role: "jem", redis, prefix, queues, defaultMetrics: false });
  app = createAdminApp({ config, redis, queues, registry: metrics.registry, role: "jem", ready: async () => true });
  const store = new JobStore(redis, prefix);
  const rec = (id: string, owner: string) =>
    JobStore.newRecord({ id, owner, queue: "main", backend: "fork", language: "xrsl", delegations: [], rerun: 0, lifetime: 60 });
  await store.create([rec("a1", "/CN=alice"), rec("a2", "/CN=alice"), rec("b1", "/CN=bob")], 100);
});
afterAll(async () => {
  await Promise.all(queues.map((q) => q.close()));
  await redis.quit();
});

describe("admin app", () => {
  it("answers /healthz without a token and everything else only with it", async () => {
    expect((await app.request("/healthz")).status).toBe(200);
    for (const path of ["/readyz", "/metrics", "/api/jobs", "/api/queues", "/queues"]) {
      const res = await app.request(path);
      expect(res.status, path).toBe(401);
      expect(res.headers.get("www-authenticate")).toMatch(/^Bearer/);
    }
    expect((await app.request("/metrics", { headers: { authorization: "Bearer wrong" } })).status).toBe(401);
    expect((await app.request("/readyz", { headers: auth })).status).toBe(200);
  });

  it("serves Prometheus text with the CE metrics", async () => {
    const res = await app.request("/metrics", { headers: auth });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("text/plain");
    const text = await res.text();
    expect(text).toContain('ce_jobs{state="ACCEPTING",queue="*",role="jem"} 3');
    expect(text).toContain("# TYPE ce_queue_depth gauge");
  });

  it("reports not ready when the role check fails", async () => {
    const config = { admin: { token }, redis: { url: inject("redisUrl"), prefix } };
    const notReady = createAdminApp({
      config,
      redis,
      registry: createMetrics({ defaultMetrics: false }).registry,
      role: "gateway",
      ready: async () => false,
    });
    const res = await notReady.request("/readyz", { headers: auth });
    expect(res.status).toBe(503);
    expect(await res.json()).toMatchObject({ redis: true, gateway: false });
    // The gateway role has no board.
    expect((await notReady.request("/queues", { headers: auth })).status).toBe(404);
  });

  it("lists jobs by owner and state and shows one", async () => {
    const byOwner = (await (await app.request("/api/jobs?owner=/CN=alice", { headers: auth })).json()) as {
      total: number;
      jobs: { id: string }[];
    };
    expect(byOwner.jobs.map((j) => j.id).sort()).toEqual(["a1", "a2"]);
    const all = (await (await app.request("/api/jobs?state=accepting", { headers: auth })).json()) as { total: number };
    expect(all.total).toBe(3);
    expect((await app.request("/api/jobs?state=BOGUS", { headers: auth })).status).toBe(400);
    const one = await app.request("/api/jobs/b1", { headers: auth });
    expect(await one.json()).toMatchObject({ id: "b1", owner: "/CN=bob", rest: "ACCEPTING" });
    expect((await app.request("/api/jobs/nope", { headers: auth })).status).toBe(404);
  });

  it("records kill and clean on the job records and rings the jobs on the work list", async () => {
    const k = new Keys(prefix);
    await redis.zrem(k.advanceDue(), "a1", "a2");
    const res = await app.request("/api/jobs/a1/kill", { method: "POST", headers: auth });
    expect(res.status).toBe(202);
    await app.request("/api/jobs/a2/clean", { method: "POST", headers: auth });
    expect(await redis.hget(k.job("a1"), "killRequested")).toBe("1");
    expect(await redis.hget(k.job("a2"), "cleanRequested")).toBe("1");
    expect((await redis.zrange(k.advanceDue(), 0, -1)).filter((id) => id.startsWith("a")).sort()).toEqual(["a1", "a2"]);
    expect((await app.request("/api/jobs/nope/kill", { method: "POST", headers: auth })).status).toBe(404);
    const counts = (await (await app.request("/api/queues", { headers: auth })).json()) as Record<string, Record<string, number>>;
    expect(counts.staging).toMatchObject({ waiting: 0, active: 0, failed: 0 });
    expect(Object.keys(counts).sort()).toEqual(["advance", "staging"]);
  });

  it("sets and clears the drain flag", async () => {
    const on = await app.request("/api/drain", { method: "POST", headers: auth });
    expect(await on.json()).toMatchObject({ draining: true });
    expect(await redis.hget(new Keys(prefix).flags(), "drain")).toBe("1");
    const off = await app.request("/api/drain", { method: "DELETE", headers: auth });
    expect(await off.json()).toEqual({ draining: false });
    expect(await redis.hget(new Keys(prefix).flags(), "drain")).toBeNull();
  });

  it("serves bull-board with the token, then through the HttpOnly cookie", async () => {
    expect((await app.request("/queues", { headers: auth })).status).toBe(200);
    const first = await app.request(`/queues?token=${encodeURIComponent(token)}`);
    expect(first.status).toBe(303);
    expect(first.headers.get("location")).toBe("/queues");
    const setCookie = first.headers.get("set-cookie") ?? "";
    expect(setCookie).toMatch(/HttpOnly/);
    expect(setCookie).toMatch(/SameSite=Strict/);
    expect(setCookie).not.toContain(token);
    const cookie = setCookie.split(";")[0]!;
    expect(cookie.startsWith(`${ADMIN_COOKIE}=`)).toBe(true);
    const page = await app.request("/queues", { headers: { cookie } });
    expect(page.status).toBe(200);
    const html = await page.text();
    expect(html).toContain("<html");
    // The UI's own assets are served too (relative to the installed @bull-board/ui).
    const asset = /src="(static\/js\/[^"]+\.js)"/.exec(html)?.[1];
    expect(asset).toBeDefined();
    expect((await app.request(`/queues/${asset}`, { headers: { cookie } })).status).toBe(200);
    const api = await app.request("/queues/api/queues", { headers: { cookie } });
    expect(api.status).toBe(200);
    expect((await app.request(`/queues?token=wrong`)).status).toBe(401);
  });

  it("shows the JEM's work list in bull-board, read-only, with each job's record", async () => {
    const adv = new AdvanceSet(redis, prefix);
    await redis.del(adv.keys.advanceDue(), adv.keys.advanceInflight()); // creation rang every job
    await adv.ring(["a1"]);
    await adv.ring(["b1"], Date.now() + 600_000);
    await adv.claim(10, 30_000, Date.now()); // a1 is now leased (active)
    await adv.ring(["a2"]);
    type BoardQueue = {
      name: string;
      counts: Record<string, number>;
      readOnlyMode: boolean;
      jobs: { id: string; name: string; data: Record<string, unknown> }[];
    };
    const list = async (status: string) =>
      (
        (await (await app.request(`/queues/api/queues?activeQueue=advance&status=${status}`, { headers: auth })).json()) as {
          queues: BoardQueue[];
        }
      ).queues.find((q) => q.name === "advance")!;
    const waiting = await list("waiting");
    expect(waiting.readOnlyMode).toBe(true);
    expect(waiting.counts).toMatchObject({ waiting: 1, delayed: 1, active: 1 });
    expect(waiting.jobs).toMatchObject([{ id: "a2", name: "ACCEPTED", data: { state: "ACCEPTING", owner: "/CN=alice", queue: "main" } }]);
    expect((await list("delayed")).jobs).toMatchObject([{ id: "b1", data: { owner: "/CN=bob", due: expect.any(String) } }]);
    expect((await list("active")).jobs).toMatchObject([{ id: "a1", data: { leaseEnds: expect.any(String), requested: ["kill"] } }]);
    const one = await app.request("/queues/api/queues/advance/b1", { headers: auth });
    expect(await one.json()).toMatchObject({ job: { id: "b1" }, status: "delayed" });
    // Nothing on the work list can be changed from the board.
    expect((await app.request("/queues/api/queues/advance/pause", { method: "PUT", headers: auth })).status).toBeGreaterThanOrEqual(400);
    expect((await app.request("/queues/api/queues/advance/b1/promote", { method: "PUT", headers: auth })).status).toBeGreaterThanOrEqual(
      400,
    );
    expect((await adv.scoreOf("b1")).due).toBeGreaterThan(Date.now());
  });

  it("/ is an index page in the pages' frame linking health, metrics, the queue view, the API and the docs", async () => {
    const html = { accept: "text/html,application/xhtml+xml" };
    const res = await app.request("/", { headers: { ...auth, ...html } });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/html; charset=utf-8");
    expect(res.headers.get("content-security-policy")).toContain("default-src 'none'");
    expect(res.headers.get("x-content-type-options")).toBe("nosniff");
    const page = await res.text();
    for (const href of ["/healthz", "/readyz", "/metrics", "/queues", "/api/stats", "/api/jobs"])
      expect(page, href).toContain(`href="${href}"`);
    expect(page).toContain("docs/operations.md");
    expect(page).toContain('nav class="crumbs"'); // the CE's frame
    // A gateway's index has no board: it says where the queue view is; the docs and the CE's pages are links when configured.
    const config = {
      admin: { token, jemPort: 8445, docsUrl: "https://ce.example.org/docs/" },
      redis: { url: inject("redisUrl"), prefix },
      endpoint: { url: "https://ce.example.org/arex" },
    };
    const gw = createAdminApp({
      config,
      redis,
      registry: createMetrics({ role: "gateway", redis, prefix, defaultMetrics: false }).registry,
      role: "gateway",
      ready: async () => true,
    });
    const gwPage = await (await gw.request("/", { headers: auth })).text();
    expect(gwPage).not.toContain('href="/queues"');
    expect(gwPage).toContain("port <code>8445</code>");
    expect(gwPage).toContain('href="https://ce.example.org/docs/"');
    expect(gwPage).toContain('href="https://ce.example.org/arex/rest/1.1"');
  });

  it("a browser without the token gets a page saying how to give it; programs keep the JSON 401", async () => {
    const html = { accept: "text/html,application/xhtml+xml" };
    const page = await app.request("/", { headers: html });
    expect(page.status).toBe(401);
    expect(page.headers.get("content-type")).toBe("text/html; charset=utf-8");
    expect(page.headers.get("www-authenticate")).toMatch(/^Bearer/);
    expect(await page.text()).toContain("?token=");
    const wrong = await app.request("/?token=wrong", { headers: html });
    expect(wrong.status).toBe(401);
    expect(await wrong.text()).toContain("not this listener");
    const json = await app.request("/");
    expect(json.status).toBe(401);
    expect(await json.json()).toEqual({ error: "unauthorized" });
    // With the token once, the browser is sent to the index without it.
    const first = await app.request(`/?token=${encodeURIComponent(token)}`, { headers: html });
    expect(first.status).toBe(303);
    expect(first.headers.get("location")).toBe("/");
  });

  it("listens on loopback and closes", async () => {
    const server = await startAdminServer(app, { port: 0 });
    try {
      expect(server.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
      expect((await fetch(`${server.url}/api/stats`, { headers: auth })).status).toBe(200);
    } finally {
      await server.close();
    }
  });
});
