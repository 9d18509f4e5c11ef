import { randomBytes } from "node:crypto";
import { Queue, Worker } from "bullmq";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { RECONNECT_AFTER_END_MS, ReplicaBarrier, connectRedis, describeRedis, keepConnected } from "./connection.js";
import { quietPeriod } from "@ce/testing";

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
    const base = {
      url: "redis://u:secret@10.0.0.1:6379",
      sentinel: { nodes: ["s1:26379", "s2:26379"], masterName: "ce" },
      cluster: { nodes: ["c1:7000"] },
    };
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
    await quietPeriod(RECONNECT_AFTER_END_MS + 200, "past the reconnect delay: a quit connection must stay closed");
    expect(c.status).toBe("end");
  });
});

describe("the JEM's BullMQ connections (connectRedis role jem)", () => {
  // ioredis' own end, as after a Sentinel look-up cut short: not the owner's disconnect(), which stays closed.
  const endByItself = async (c: Redis) => {
    Redis.prototype.disconnect.call(c);
    if (c.status !== "end") await new Promise((r) => c.once("end", r));
  };

  it("a queue's and a worker's connections ended by ioredis come back; closed ones stay closed", async () => {
    const clients = connectRedis(
      {
        mode: "standalone",
        url: inject("redisUrl"),
        sentinel: { nodes: [], masterName: "ce" },
        cluster: { nodes: [] },
        users: { gateway: { username: "gateway" }, jem: { username: "jem" } },
      },
      "jem",
    );
    const prefix = `{t${randomBytes(6).toString("hex")}}`;
    const done: string[] = [];
    const queue = new Queue("commands", { connection: clients.bull, prefix });
    const worker = new Worker("commands", async (j) => void done.push(String(j.data.n)), {
      connection: clients.bull,
      prefix,
      drainDelay: 1,
    });
    try {
      await worker.waitUntilReady();
      const shared = (await queue.client) as unknown as Redis;
      const blocking = (await (worker as unknown as { blockingConnection: { client: Promise<Redis> } }).blockingConnection.client) as Redis;
      expect(blocking).not.toBe(shared);
      await queue.add("kill", { n: 1 });
      await expect.poll(() => done, { timeout: 5_000 }).toEqual(["1"]);
      await Promise.all([endByItself(shared), endByItself(blocking)]);
      // Without the guard the shared one stays "end": every add fails with "Connection is closed."
      // and the worker takes nothing.
      await expect.poll(() => [shared.status, blocking.status], { timeout: 5_000 }).toEqual(["ready", "ready"]);
      await queue.add("kill", { n: 2 });
      await expect.poll(() => done, { timeout: 10_000 }).toEqual(["1", "2"]);
      await worker.close();
      await queue.obliterate({ force: true });
      await queue.close();
      await clients.close();
      await quietPeriod(RECONNECT_AFTER_END_MS + 300, "past the reconnect delay: closed connections must stay closed");
      expect([shared.status, blocking.status, clients.redis.status]).toEqual(["end", "end", "end"]);
    } finally {
      await worker.close();
      await queue.close();
      await clients.close();
    }
  });
});
