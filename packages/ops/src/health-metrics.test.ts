import { randomBytes } from "node:crypto";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { JemHeartbeats, JobStore } from "@ce/store";
import { createMetrics } from "./metrics.js";
import { configuredVos } from "./vos.js";

const prefix = `{ops-h-${randomBytes(4).toString("hex")}}`;
let redis: Redis;

beforeAll(() => {
  redis = new Redis(inject("redisUrl"));
});
afterAll(async () => {
  await redis.quit();
});

/** The value of one series in a Prometheus text exposition, or undefined. */
function sample(text: string, series: string): number | undefined {
  const line = text.split("\n").find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

describe("health metrics", () => {
  it("labels jobs by configured VO (others as `other`), and shows the oldest job per state and the soonest delegation expiry", async () => {
    const store = new JobStore(redis, prefix);
    const rec = (id: string, fqans?: string[]) => ({
      ...JobStore.newRecord({
        id,
        owner: "/CN=alice",
        queue: "main",
        backend: "fork",
        language: "xrsl",
        delegations: [],
        rerun: 0,
        lifetime: 60,
      }),
      ...(fqans ? { fqans } : {}),
    });
    // A user-chosen VO name must not become a series of its own.
    await store.create([rec("h1", ["/atlas/Role=production"]), rec("h2", ["/made.up.by.a.user"]), rec("h3")], 100);
    const since = Date.now() - 600_000;
    await store.update((await store.get("h1"))!, { stateSince: since, delegationExpires: since + 3_600_000 });
    const m = createMetrics({ redis, prefix, defaultMetrics: false, vos: ["atlas", "dteam"] });
    const text = await m.registry.metrics();
    expect(sample(text, 'ce_jobs_by_vo{state="ACCEPTED",vo="atlas"}')).toBe(1);
    expect(sample(text, 'ce_jobs_by_vo{state="ACCEPTED",vo="dteam"}')).toBe(0);
    expect(sample(text, 'ce_jobs_by_vo{state="ACCEPTED",vo="other"}')).toBe(1);
    expect(sample(text, 'ce_jobs_by_vo{state="ACCEPTED",vo="none"}')).toBe(1);
    expect(text).not.toContain("made.up");
    expect(sample(text, 'ce_job_oldest_age_seconds{state="ACCEPTED"}')).toBeGreaterThanOrEqual(600);
    expect(sample(text, 'ce_job_oldest_age_seconds{state="INLRMS"}')).toBe(0);
    expect(sample(text, 'ce_delegation_soonest_expiry_timestamp_seconds{scope="active_jobs"}')).toBe((since + 3_600_000) / 1000);
    expect(sample(text, "ce_redis_up")).toBe(1);
  });

  it("shows every JEM's heartbeat as stored in Redis", async () => {
    const at = Date.now() - 1234;
    await new JemHeartbeats(redis, prefix).beat("node1:42", 1000, at);
    const text = await createMetrics({ redis, prefix, defaultMetrics: false }).registry.metrics();
    expect(sample(text, 'ce_jem_heartbeat_timestamp_seconds{jem="node1:42"}')).toBe(at / 1000);
    expect(sample(text, 'ce_jem_heartbeat_interval_seconds{jem="node1:42"}')).toBe(1);
  });

  it("still answers the scrape when Redis is unreachable, with ce_redis_up 0 and no stale Redis series", async () => {
    // A port nobody listens on; the JEM's kind of connection (retries forever, queues commands).
    const gone = new Redis({ port: 1, host: "127.0.0.1", maxRetriesPerRequest: null, lazyConnect: true });
    gone.on("error", () => undefined);
    void gone.connect().catch(() => undefined);
    try {
      const m = createMetrics({ redis: gone, prefix, defaultMetrics: false, role: "jem" });
      const t0 = Date.now();
      const text = await m.registry.metrics();
      expect(Date.now() - t0).toBeLessThan(5_000);
      expect(sample(text, 'ce_redis_up{role="jem"}')).toBe(0);
      expect(text).not.toMatch(/^ce_jem_heartbeat_timestamp_seconds\{/m);
      expect(text).not.toMatch(/^ce_jobs\{/m);
      expect(text).not.toMatch(/^ce_delegation_soonest_expiry_timestamp_seconds/m);
    } finally {
      gone.disconnect();
    }
  });

  it("takes VO label values from the configuration only", () => {
    expect(
      configuredVos({
        auth: { allow: ["vo:atlas", "dn:/CN=x", "vo:*"] },
        jobs: { queues: [{ allow: ["fqan:/dteam/Role=*"] }, {}] },
        mapping: { rules: [{ match: ["vo:cms", "fqan:/atlas/*"] }, { match: "*" }] },
      }),
    ).toEqual(["atlas", "cms", "dteam"]);
  });
});
