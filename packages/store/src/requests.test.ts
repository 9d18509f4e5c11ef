import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { JobStore } from "./jobs.js";
import { Keys } from "./keys.js";
import { recordRequests } from "./requests.js";

// lua/request.lua and recordRequests against a real Redis: the flag, the open-request set and the
// work-list ring in one step, then the bell.
const prefix = `{requests-test-${process.pid}}`;
const keys = new Keys(prefix);
let redis: Redis;
let sub: Redis;
let jobs: JobStore;
const bells: string[] = [];

beforeAll(async () => {
  redis = new Redis(inject("redisUrl"));
  sub = new Redis(inject("redisUrl"));
  await sub.subscribe(keys.advanceBell());
  sub.on("message", (_ch: string, m: string) => bells.push(m));
  jobs = new JobStore(redis, prefix);
});
afterAll(async () => {
  const found = await redis.keys(`${prefix}*`);
  if (found.length) await redis.del(...found);
  await redis.quit();
  sub.disconnect();
});

async function job(id: string, state?: "FINISHED"): Promise<void> {
  const rec = JobStore.newRecord({
    id,
    owner: "o",
    queue: "main",
    backend: "fork",
    language: "emies:adl",
    delegations: [],
    rerun: 1,
    lifetime: 60,
  });
  await jobs.create([rec], 1e6);
  if (state) await jobs.update({ ...(await jobs.get(id))!, state: "FINISHING" }, { state, outcome: "failed", failedState: "INLRMS" });
}

describe("recordRequests", () => {
  it("records each request on its record and in the open set, and makes only those jobs due now", async () => {
    await job("r-active");
    await job("r-done", "FINISHED");
    await job("r-later");
    // Not due now (a timer far ahead): a request must bring the look forward.
    await redis.del(keys.advanceDue());
    await redis.zadd(keys.advanceDue(), Date.now() + 3_600_000, "r-active");
    const bellsBefore = bells.length;
    const before = Date.now();
    const rung = await recordRequests(jobs, [
      { action: "kill", jobId: "r-active" },
      { action: "kill", jobId: "r-done" }, // ended already: no-op
      { action: "restart", jobId: "r-done" },
      { action: "clean", jobId: "r-missing" }, // no record: nothing
    ]);
    expect(rung.map((c) => `${c.action}:${c.jobId}`)).toEqual(["kill:r-active", "restart:r-done"]);
    expect((await jobs.get("r-active"))?.killRequested).toBe(true);
    expect((await jobs.get("r-done"))?.killRequested).toBeFalsy();
    expect((await jobs.get("r-done"))?.restartRequested).toBe(true);
    expect((await jobs.openRequests()).sort()).toEqual(["r-active", "r-done"]);
    expect((await redis.zrange(keys.advanceDue(), 0, -1)).sort()).toEqual(["r-active", "r-done"]);
    for (const id of ["r-active", "r-done"]) {
      const at = Number(await redis.zscore(keys.advanceDue(), id));
      expect(at).toBeGreaterThanOrEqual(before);
      expect(at).toBeLessThanOrEqual(Date.now());
    }
    await expect.poll(() => bells.length - bellsBefore).toBe(1);
    // Closing what was seen before a new request landed keeps the id: the new request stays open.
    const stale = { ...(await jobs.get("r-active"))!, killRequested: false };
    await jobs.closeRequests([{ id: "r-active", record: stale }]);
    expect((await jobs.openRequests()).sort()).toEqual(["r-active", "r-done"]);
    await jobs.closeRequests([{ id: "r-active", record: await jobs.get("r-active") }]);
    expect(await jobs.openRequests()).toEqual(["r-done"]);
  });

  it("a ring never postpones a look already due earlier", async () => {
    await redis.zadd(keys.advanceDue(), 1_000, "r-later");
    await recordRequests(jobs, [{ action: "kill", jobId: "r-later" }]);
    expect(await redis.zscore(keys.advanceDue(), "r-later")).toBe("1000");
  });

  it("nothing is rung when the record cannot be written", async () => {
    const broken = new JobStore(
      new Redis(inject("redisUrl"), { lazyConnect: true, maxRetriesPerRequest: 0, enableOfflineQueue: false }),
      prefix,
    );
    await job("r-broken");
    await redis.zrem(keys.advanceDue(), "r-broken");
    await expect(recordRequests(broken, [{ action: "kill", jobId: "r-broken" }])).rejects.toThrow();
    expect(await redis.zscore(keys.advanceDue(), "r-broken")).toBeNull();
    expect((await jobs.get("r-broken"))?.killRequested).toBeFalsy();
  });
});
