import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { bullConnection } from "./connection.js";
import { UnrecoverableError } from "bullmq";
import { enqueueCommands, openQueue, readPayload, type QueueName, type Queues } from "./queues.js";

// The producers' id rules against a real Redis, under a prefix of their own.
const prefix = `{queues-test-${process.pid}}`;
let q: Pick<Queues, "commands">;

beforeAll(() => {
  q = { commands: openQueue("commands", bullConnection(inject("redisUrl")), prefix) };
});
afterAll(async () => {
  await q.commands.obliterate({ force: true });
  await q.commands.close();
});

describe("queue producers", () => {
  it("commands: one waiting command per job and action, however often the doorbell rings; ids carry no `:`", async () => {
    await enqueueCommands(q.commands, [
      { action: "kill", jobId: "c1" },
      { action: "kill", jobId: "c1" },
      { action: "clean", jobId: "c1" },
    ]);
    await enqueueCommands(q.commands, [{ action: "kill", jobId: "c1" }]);
    const jobs = (await q.commands.getJobs(["waiting", "delayed", "prioritized"])).filter((j) => j.data.jobId === "c1");
    expect(jobs.map((j) => j.data.action).sort()).toEqual(["clean", "kill"]);
    for (const j of jobs) expect(j.id).not.toContain(":");
  });
});

describe("queue payloads", () => {
  it("the consumer takes what the schema allows, and refuses anything else with the reason, not to be retried", () => {
    expect(readPayload("commands", { action: "kill", jobId: "a1b2-c3", requestId: "r1" })).toEqual({
      action: "kill",
      jobId: "a1b2-c3",
      requestId: "r1",
    });
    expect(readPayload("staging", { jobId: "j1", direction: "out" })).toEqual({ jobId: "j1", direction: "out" });
    const bad: [QueueName, unknown, RegExp][] = [
      ["commands", { action: "rm -rf", jobId: "j1" }, /action/],
      ["commands", { action: "kill", jobId: "../../etc" }, /jobId: a job id/],
      ["commands", { action: "kill", jobId: "j1", extra: 1 }, /Unrecognized key/],
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
    await expect(enqueueCommands(q.commands, [{ action: "kill", jobId: "a:b" }])).rejects.toThrow(/a job id/);
  });
});
