import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { bullConnection } from "./connection.js";
import { UnrecoverableError } from "bullmq";
import { enqueueStaging, openQueue, readPayload, type QueueName, type Queues } from "./queues.js";

// The producers' id rules against a real Redis, under a prefix of their own.
const prefix = `{queues-test-${process.pid}}`;
let q: Pick<Queues, "staging">;

beforeAll(() => {
  q = { staging: openQueue("staging", bullConnection(inject("redisUrl")), prefix) };
});
afterAll(async () => {
  await q.staging.obliterate({ force: true });
  await q.staging.close();
});

describe("queue producers", () => {
  it("staging: one waiting transfer job per job and direction, however often it is enqueued; ids carry no `:`", async () => {
    await enqueueStaging(q.staging, "c1", "in");
    await enqueueStaging(q.staging, "c1", "in");
    await enqueueStaging(q.staging, "c1", "out");
    const jobs = (await q.staging.getJobs(["waiting", "delayed", "prioritized"])).filter((j) => j.data.jobId === "c1");
    expect(jobs.map((j) => j.data.direction).sort()).toEqual(["in", "out"]);
    for (const j of jobs) expect(j.id).not.toContain(":");
  });
});

describe("queue payloads", () => {
  it("the consumer takes what the schema allows, and refuses anything else with the reason, not to be retried", () => {
    expect(readPayload("staging", { jobId: "a1b2-c3", direction: "in", requestId: "r1" })).toEqual({
      jobId: "a1b2-c3",
      direction: "in",
      requestId: "r1",
    });
    expect(readPayload("staging", { jobId: "j1", direction: "out" })).toEqual({ jobId: "j1", direction: "out" });
    const bad: [QueueName, unknown, RegExp][] = [
      ["staging", { jobId: "../../etc", direction: "in" }, /jobId: a job id/],
      ["staging", { jobId: "j1", direction: "in", extra: 1 }, /Unrecognized key/],
      ["staging", { jobId: "j1", direction: "sideways" }, /direction/],
      ["staging", "j1", /payload: Expected object/],
    ];
    for (const [name, data, why] of bad) {
      let err: unknown;
      try {
        readPayload(name, data);
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(UnrecoverableError);
      expect((err as Error).message).toMatch(new RegExp(`^malformed ${name} queue payload \\(`));
      expect((err as Error).message).toMatch(why);
    }
  });

  it("the producers refuse a payload their schema does not allow before it reaches Redis", async () => {
    await expect(enqueueStaging(q.staging, "a:b", "in")).rejects.toThrow(/a job id/);
  });
});
