import { Redis } from "ioredis";
import { describe, expect, inject, it } from "vitest";
import { Locks } from "./locks.js";
import { useTestRedis } from "./test-redis.js";

// Against the test redis-server: leases as the JEM takes them per job, and what a failover leaves.
const t = useTestRedis();

describe("Locks", () => {
  it("one holder at a time, in one process and across processes; a release frees the key", async () => {
    const a = new Locks(t.redis, t.prefix);
    const b = new Locks(t.redis, t.prefix);
    const lease = await a.tryAcquire("job:1", 30_000);
    expect(lease?.held).toBe(true);
    expect(await a.tryAcquire("job:1", 30_000)).toBeUndefined();
    expect(await b.tryAcquire("job:1", 30_000)).toBeUndefined();
    // Two takes racing in one process: one wins.
    await lease!.release();
    const race = await Promise.all([a.tryAcquire("job:1", 30_000), a.tryAcquire("job:1", 30_000)]);
    expect(race.filter(Boolean)).toHaveLength(1);
    await race.find(Boolean)!.release();
    expect(await t.redis.exists(a.key("job:1"))).toBe(0);
  });

  it("a release that never reached Redis (connection dropped) does not hold the job for the ttl", async () => {
    // A connection that fails its commands while down, as the JEM's does when a Sentinel
    // connect is cut short by the failover (ioredis flushes its queue with "Connection is closed.").
    const flaky = new Redis(inject("redisUrl"), { enableOfflineQueue: false });
    const a = new Locks(flaky, t.prefix);
    const other = new Locks(t.redis, t.prefix);
    try {
      await new Promise((r) => flaky.once("ready", r));
      const lease = await a.tryAcquire("job:2", 30_000);
      expect(lease).toBeDefined();
      flaky.disconnect();
      if (flaky.status !== "end") await new Promise((r) => flaky.once("end", r));
      await lease!.release(); // fails quietly: the key still holds a's token for 30 s
      expect(await t.redis.pttl(a.key("job:2"))).toBeGreaterThan(25_000);
      await flaky.connect();
      // Another owner still waits for the ttl; this owner, who holds nothing, takes its leftover.
      expect(await other.tryAcquire("job:2", 30_000)).toBeUndefined();
      const again = await a.tryAcquire("job:2", 30_000);
      expect(again?.held).toBe(true);
      await again!.release();
      expect(await t.redis.exists(a.key("job:2"))).toBe(0);
    } finally {
      flaky.disconnect();
    }
  });
});
