import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { requestCommands } from "./commands.js";
import { JobStore } from "./jobs.js";
import { bullConnection } from "./connection.js";
import { openQueue, type Queues } from "./queues.js";

// lua/request.lua and requestCommands against a real Redis: the record first, then the doorbell.
const prefix = `{commands-test-${process.pid}}`;
let redis: Redis;
let jobs: JobStore;
let commands: Queues["commands"];

beforeAll(() => {
  redis = new Redis(inject("redisUrl"));
  jobs = new JobStore(redis, prefix);
  commands = openQueue("commands", bullConnection(inject("redisUrl")), prefix);
});
afterAll(async () => {
  await commands.obliterate({ force: true });
  await commands.close();
  const found = await redis.keys(`${prefix}*`);
  if (found.length) await redis.del(...found);
  await redis.quit();
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

describe("requestCommands", () => {
  it("records each request on its record and in the open set, then rings only for recorded ones", async () => {
    await job("r-active");
    await job("r-done", "FINISHED");
    const rung = await requestCommands(jobs, commands, [
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
    const queued = (await commands.getJobs(["waiting"])).map((j) => `${j.data.action}:${j.data.jobId}`).sort();
    expect(queued).toEqual(["kill:r-active", "restart:r-done"]);
    // Closing what was seen before a new request landed keeps the id: the new request stays open.
    const stale = { ...(await jobs.get("r-active"))!, killRequested: false };
    await jobs.closeRequests([{ id: "r-active", record: stale }]);
    expect((await jobs.openRequests()).sort()).toEqual(["r-active", "r-done"]);
    await jobs.closeRequests([{ id: "r-active", record: await jobs.get("r-active") }]);
    expect(await jobs.openRequests()).toEqual(["r-done"]);
  });

  it("nothing is rung when the record cannot be written", async () => {
    const broken = new JobStore(
      new Redis(inject("redisUrl"), { lazyConnect: true, maxRetriesPerRequest: 0, enableOfflineQueue: false }),
      prefix,
    );
    const before = await commands.getJobCountByTypes("waiting");
    await expect(requestCommands(broken, commands, [{ action: "kill", jobId: "r-active" }])).rejects.toThrow();
    expect(await commands.getJobCountByTypes("waiting")).toBe(before);
  });
});
