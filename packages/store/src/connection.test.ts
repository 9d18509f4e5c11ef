import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { RECONNECT_AFTER_END_MS, ReplicaBarrier, describeRedis, keepConnected } from "./connection.js";

// ReplicaBarrier against the test redis-server, which has no replica: WAIT answers 0 after its timeout.
let redis: Redis;
beforeAll(() => {
  redis = new Redis(inject("redisUrl"));
});
afterAll(() => redis.disconnect());

describe("ReplicaBarrier (WAIT as a group commit)", () => {
  it("reports the replicas that confirmed: none here, after the timeout", async () => {
    const b = new ReplicaBarrier(redis, 1, 100);
    const t = Date.now();
    expect(await b.confirm()).toBe(0);
    expect(Date.now() - t).toBeGreaterThanOrEqual(90);
  });

  it("shares rounds: 20 concurrent callers cost two WAITs, not twenty", async () => {
    const b = new ReplicaBarrier(redis, 1, 150);
    const t = Date.now();
    const r = await Promise.all(Array.from({ length: 20 }, () => b.confirm()));
    const ms = Date.now() - t;
    expect(r).toEqual(r.map(() => 0));
    // One round in flight + one queued round: about 2 × 150 ms (twenty serial WAITs: 3 s).
    expect(ms).toBeGreaterThanOrEqual(280);
    expect(ms).toBeLessThan(1_000);
  });

  it("a caller after a finished round starts a new one", async () => {
    const b = new ReplicaBarrier(redis, 0, 100);
    expect(await b.confirm()).toBe(0);
    expect(await b.confirm()).toBe(0);
  });
});

describe("describeRedis", () => {
  it("names the mode's endpoints without credentials", () => {
    const base = { url: "redis://u:secret@10.0.0.1:6379", sentinel: { nodes: ["s1:26379", "s2:26379"], masterName: "ce" }, cluster: { nodes: ["c1:7000"] } };
    expect(describeRedis({ ...base, mode: "standalone" })).not.toContain("secret");
    expect(describeRedis({ ...base, mode: "sentinel" })).toBe('Sentinel primary "ce" via s1:26379,s2:26379');
    expect(describeRedis({ ...base, mode: "cluster" })).toBe("Redis Cluster via c1:7000");
  });
});

describe("keepConnected", () => {
  it("connects again a client that ioredis ended by itself, but not one being closed", async () => {
    const c = new Redis(inject("redisUrl"));
    let closing = false;
    keepConnected(c, () => closing);
    await c.ping();
    // What ioredis does after a Sentinel look-up cut short by a failover: status "end", no retry.
    c.disconnect();
    await new Promise((r) => c.once("end", r));
    expect(c.status).toBe("end");
    await new Promise((r) => c.once("ready", r));
    expect(await c.ping()).toBe("PONG");
    closing = true;
    await c.quit();
    await new Promise((r) => setTimeout(r, RECONNECT_AFTER_END_MS + 200));
    expect(c.status).toBe("end");
  });
});
