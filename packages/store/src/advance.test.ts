import { Redis } from "ioredis";
import { afterAll, beforeAll, beforeEach, describe, expect, inject, it } from "vitest";
import { AdvanceSet } from "./advance.js";
import { quietPeriod, waitFor } from "@ce/testing";

// lua/advance-ring.lua and lua/advance-claim.lua against the real Redis, under a prefix of their own.
let redis: Redis;
let sub: Redis;
let adv: AdvanceSet;
const prefix = `{adv-test-${process.pid}}`;

beforeAll(async () => {
  redis = new Redis(inject("redisUrl"));
  sub = new Redis(inject("redisUrl"));
  adv = new AdvanceSet(redis, prefix);
});
beforeEach(async () => {
  await redis.del(adv.keys.advanceDue(), adv.keys.advanceInflight());
});
afterAll(async () => {
  await redis.del(adv.keys.advanceDue(), adv.keys.advanceInflight());
  redis.disconnect();
  sub.disconnect();
});

describe("advance set", () => {
  it("rings collapse per job and the earlier due time wins", async () => {
    const now = Date.now();
    await adv.ring(["a"], now + 60_000);
    await adv.ring(["a"], now + 120_000);
    expect((await adv.scoreOf("a")).due).toBe(now + 60_000);
    await adv.ring(["a", "a", "b"]);
    expect((await adv.scoreOf("a")).due).toBeLessThanOrEqual(Date.now());
    expect(await adv.counts()).toMatchObject({ due: 2, timers: 0, inflight: 0 });
  });

  it("claims only due jobs, at most `max`, each to one claimer; timers stay until their time", async () => {
    const ids = Array.from({ length: 30 }, (_, i) => `j${i}`);
    await adv.ring(ids);
    await adv.ring(["later"], Date.now() + 60_000);
    const [x, y] = await Promise.all([adv.claim(20, 10_000), adv.claim(20, 10_000)]);
    expect(x.length + y.length).toBe(30);
    expect(new Set([...x, ...y]).size).toBe(30);
    expect(x.length).toBeLessThanOrEqual(20);
    expect(await adv.claim(20, 10_000)).toEqual([]);
    expect(await adv.counts()).toMatchObject({ due: 0, timers: 1, inflight: 30 });
  });

  it("a turn releases ended looks, claims due jobs and tells when to look next, in one call", async () => {
    const now = Date.now();
    await adv.ring(["t1", "t2"]);
    await adv.ring(["later"], now + 60_000);
    expect(await adv.turn([], 1, 10_000, now)).toEqual({ ids: ["t1"], nextDueAt: expect.any(Number), nextLeaseEnd: now + 10_000 });
    await adv.ring(["t1"], now); // rung while in flight: stays due until released
    const t = await adv.turn(["t1"], 5, 20_000, now + 1);
    expect(t.ids.sort()).toEqual(["t1", "t2"]);
    expect(t).toMatchObject({ nextDueAt: now + 60_000, nextLeaseEnd: now + 20_001 });
    expect(await adv.turn(["t1", "t2"], 0, 20_000, now + 2)).toEqual({ ids: [], nextDueAt: now + 60_000 });
    await redis.del(adv.keys.advanceDue());
    expect(await adv.turn([], 5, 20_000)).toEqual({ ids: [] });
  });

  it("a job rung while in flight stays due until released, then is claimed again", async () => {
    await adv.ring(["r"]);
    expect(await adv.claim(5, 10_000)).toEqual(["r"]);
    await adv.ring(["r"]);
    expect(await adv.claim(5, 10_000)).toEqual([]);
    await adv.release(["r"]);
    expect(await adv.claim(5, 10_000)).toEqual(["r"]);
  });

  it("an expired lease (a dead JEM) makes the job due again; extend keeps a live one", async () => {
    await adv.ring(["dead", "alive"]);
    const now = Date.now();
    expect((await adv.claim(5, 1_000, now)).sort()).toEqual(["alive", "dead"]);
    await adv.extend(["alive"], 60_000);
    expect(await adv.claim(5, 1_000, now + 5_000)).toEqual(["dead"]);
    // extend never resurrects a released lease
    await adv.release(["dead"]);
    await adv.extend(["dead"], 60_000);
    expect((await adv.scoreOf("dead")).inflight).toBeUndefined();
  });

  it("rings the bell only for work due now; 25,000 ids in one call", async () => {
    const got: string[] = [];
    await sub.subscribe(adv.keys.advanceBell());
    sub.on("message", (ch) => got.push(ch));
    await adv.ring(["t"], Date.now() + 60_000);
    await quietPeriod(100, "work due later must not ring the bell");
    expect(got).toEqual([]);
    await adv.ring(Array.from({ length: 25_000 }, (_, i) => `m${i}`));
    await waitFor("the bell", () => got.length >= 1, 5_000, { everyMs: 10 });
    expect(await adv.counts()).toMatchObject({ due: 25_000, timers: 1 });
  });
});
