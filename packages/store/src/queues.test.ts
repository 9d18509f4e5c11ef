import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { bullConnection } from "./connection.js";
import { enqueueAdvance, enqueueAdvanceAt, enqueueAdvances, enqueueCommands, openQueue, type Queues } from "./queues.js";

// The producers' id rules against a real Redis, each queue under a prefix of its own.
const prefix = `{queues-test-${process.pid}}`;
let q: Pick<Queues, "advance" | "commands">;

beforeAll(() => {
  const connection = bullConnection(inject("redisUrl"));
  q = { advance: openQueue("advance", connection, prefix), commands: openQueue("commands", connection, prefix) };
});
afterAll(async () => {
  for (const queue of Object.values(q)) {
    await queue.obliterate({ force: true });
    await queue.close();
  }
});

const waiting = async <N extends "advance" | "commands">(queue: Queues[N], jobId: string) =>
  (await queue.getJobs(["waiting", "delayed", "prioritized"])).filter((j) => j.data.jobId === jobId);

describe("queue producers", () => {
  it("advance: every request is queued, even the same reason in the same millisecond; ids carry no `:`", async () => {
    await Promise.all([enqueueAdvance(q.advance, "a1", "upload"), enqueueAdvance(q.advance, "a1", "upload"), enqueueAdvances(q.advance, [{ jobId: "a1", reason: "upload" }])]);
    const jobs = await waiting(q.advance, "a1");
    expect(jobs).toHaveLength(3);
    for (const j of jobs) expect(j.id).not.toContain(":");
  });

  it("timer: repeated waits for one deadline collapse into one job", async () => {
    const at = Date.now() + 60_000;
    await enqueueAdvanceAt(q.advance, "t1", at);
    await enqueueAdvanceAt(q.advance, "t1", at);
    await enqueueAdvanceAt(q.advance, "t1", at + 1000);
    expect(await waiting(q.advance, "t1")).toHaveLength(2);
  });

  it("commands: one waiting command per job and action, however often the doorbell rings", async () => {
    await enqueueCommands(q.commands, [{ action: "kill", jobId: "c1" }, { action: "kill", jobId: "c1" }, { action: "clean", jobId: "c1" }]);
    await enqueueCommands(q.commands, [{ action: "kill", jobId: "c1" }]);
    const jobs = await waiting<"commands">(q.commands, "c1");
    expect(jobs.map((j) => j.data.action).sort()).toEqual(["clean", "kill"]);
  });
});
