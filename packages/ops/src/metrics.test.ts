import { randomBytes } from "node:crypto";
import { Hono } from "hono";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { AdvanceSet, JobStore } from "@ce/store";
import { createMetrics, httpMetrics, UNMATCHED_ROUTE } from "./metrics.js";
import { openQueues } from "./ops.js";

const prefix = `{ops-m-${randomBytes(4).toString("hex")}}`;
let redis: Redis;

beforeAll(() => {
  redis = new Redis(inject("redisUrl"));
});
afterAll(async () => {
  await redis.quit();
});

describe("metrics", () => {
  it("exposes the whole catalog and the process metrics", async () => {
    const m = createMetrics({ role: "gateway" });
    m.countSubmission("accepted", 3);
    m.countBatchCall("slurm", "submit", "ok", 0.2);
    m.addStagingBytes("in", 1024, "davs");
    m.countStagingFile("in", "davs");
    m.countStagingFailure("out", "root");
    m.countCache("hit", 2048);
    m.observeRequest("/rest/:version/jobs", "GET", 200, 0.01);
    const text = await m.registry.metrics();
    for (const name of [
      "ce_jobs",
      "ce_submissions_total",
      "ce_http_request_duration_seconds",
      "ce_batch_calls_total",
      "ce_batch_call_duration_seconds",
      "ce_staging_bytes_total",
      "ce_staging_files_total",
      "ce_staging_failures_total",
      "ce_queue_depth",
      "ce_cache_lookups_total",
      "ce_cache_saved_bytes_total",
      "process_cpu_seconds_total",
      "nodejs_eventloop_lag_seconds",
    ]) {
      expect(text).toContain(`# TYPE ${name} `);
    }
    expect(text).toContain('ce_submissions_total{result="accepted",role="gateway"} 3');
    expect(text).toContain('ce_staging_bytes_total{direction="in",protocol="davs",role="gateway"} 1024');
    expect(text).toContain('ce_staging_files_total{direction="in",protocol="davs",role="gateway"} 1');
    expect(text).toContain('ce_staging_failures_total{direction="out",protocol="root",role="gateway"} 1');
    expect(text).toContain('ce_cache_saved_bytes_total{role="gateway"} 2048');
  });

  it("counts jobs per REST state from Redis at scrape time, cached between scrapes", async () => {
    const store = new JobStore(redis, prefix);
    const rec = (id: string) =>
      JobStore.newRecord({
        id,
        owner: "/CN=alice",
        queue: "main",
        backend: "fork",
        language: "xrsl",
        delegations: [],
        rerun: 0,
        lifetime: 60,
      });
    await store.create([rec("m1"), rec("m2")], 100);
    const m = createMetrics({ redis, prefix, defaultMetrics: false, cacheMs: 60_000 });
    expect(await m.registry.metrics()).toContain('ce_jobs{state="ACCEPTING",queue="*"} 2');
    await store.create([rec("m3")], 100);
    // Within the cache window a scrape costs no Redis read.
    expect(await m.registry.metrics()).toContain('ce_jobs{state="ACCEPTING",queue="*"} 2');
    const fresh = createMetrics({ redis, prefix, defaultMetrics: false, cacheMs: 0 });
    expect(await fresh.registry.metrics()).toContain('ce_jobs{state="ACCEPTING",queue="*"} 3');
  });

  it("reports BullMQ queue depth", async () => {
    const queues = openQueues({ redis: { url: inject("redisUrl"), prefix } });
    try {
      await queues.find((q) => q.name === "staging")!.add("staging", { jobId: "m1", direction: "in" });
      const adv = new AdvanceSet(redis, prefix);
      const before = await adv.counts();
      await adv.ring(["q1", "q2"]);
      await adv.ring(["q3"], Date.now() + 60_000);
      const m = createMetrics({ queues, redis, prefix, defaultMetrics: false });
      const text = await m.registry.metrics();
      expect(text).toContain('ce_queue_depth{queue="staging",state="waiting"} 1');
      expect(text).toContain(`ce_queue_depth{queue="advance",state="waiting"} ${before.due + 2}`);
      expect(text).toContain(`ce_queue_depth{queue="advance",state="delayed"} ${before.timers + 1}`);
      expect(text).toContain('ce_queue_depth{queue="staging",state="failed"} 0');
    } finally {
      await Promise.all(queues.map((q) => q.close()));
    }
  });

  it("times batch calls and classifies execa timeouts", async () => {
    const m = createMetrics({ defaultMetrics: false });
    await m.timeBatchCall("fork", "poll", async () => 1);
    await expect(
      m.timeBatchCall("fork", "submit", async () => Promise.reject(Object.assign(new Error("t"), { timedOut: true }))),
    ).rejects.toThrow();
    const text = await m.registry.metrics();
    expect(text).toContain('ce_batch_calls_total{backend="fork",op="poll",result="ok"} 1');
    expect(text).toContain('ce_batch_calls_total{backend="fork",op="submit",result="timeout"} 1');
    expect(text).toContain('ce_batch_call_duration_seconds_count{backend="fork",op="poll"} 1');
  });

  it("labels HTTP requests with the route template, never the raw path", async () => {
    const m = createMetrics({ defaultMetrics: false });
    const app = new Hono();
    app.use("*", httpMetrics(m));
    app.get("/rest/:version/jobs/:id", (c) => c.text(c.req.param("id")));
    await app.request("/rest/1.0/jobs/abc");
    await app.request("/rest/1.0/jobs/def");
    await app.request("/no/such/path/123");
    const text = await m.registry.metrics();
    expect(text).toContain('ce_http_request_duration_seconds_count{route="/rest/:version/jobs/:id",method="GET",status="200"} 2');
    expect(text).toContain(`ce_http_request_duration_seconds_count{route="${UNMATCHED_ROUTE}",method="GET",status="404"} 1`);
    expect(text).not.toContain("abc");
  });
});
