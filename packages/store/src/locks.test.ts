import { Redis } from "ioredis";
import { describe, expect, inject, it } from "vitest";
import { AdvanceSet } from "./advance.js";
import { JobStore } from "./jobs.js";
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

  it("a look's lease and record come in one call; its end releases and rings in one", async () => {
    const a = new Locks(t.redis, t.prefix);
    const b = new Locks(t.redis, t.prefix);
    const jobs = new JobStore(t.redis, t.prefix);
    const adv = new AdvanceSet(t.redis, t.prefix);
    const rec = JobStore.newRecord({
      id: "lk1z",
      owner: "alice",
      queue: "q",
      backend: "fork",
      language: "xrsl",
      delegations: [],
      rerun: 0,
      lifetime: 60,
    });
    await jobs.create([rec], 10);
    const taken = await a.tryAcquireJob("lk1z", 30_000);
    expect(taken?.lease.held).toBe(true);
    expect(taken?.record).toEqual(await jobs.get("lk1z"));
    expect(await b.tryAcquireJob("lk1z", 30_000)).toBeUndefined();
    // No record: the lease is taken, the record is undefined.
    const none = await a.tryAcquireJob("nope", 30_000);
    expect(none?.record).toBeUndefined();
    await none!.lease.release();
    // Release with a ring: key gone, job due at the time given, unless due earlier already.
    await adv.ring(["lk1z"], 5_000);
    await taken!.lease.release({ id: "lk1z", at: 9_000 });
    expect(await t.redis.exists(a.key("job:lk1z"))).toBe(0);
    expect((await adv.scoreOf("lk1z")).due).toBe(5_000);
    // A lease lost meanwhile (another holder now): its key stays, the ring still happens.
    const again = await a.tryAcquireJob("lk1z", 150);
    await t.redis.set(a.key("job:lk1z"), "other:1", "PX", 30_000);
    await again!.lease.release({ id: "lk1z", at: 1_000 });
    expect(await t.redis.get(a.key("job:lk1z"))).toBe("other:1");
    expect((await adv.scoreOf("lk1z")).due).toBe(1_000);
  });
});
