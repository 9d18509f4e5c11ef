import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { bullConnection } from "./connection.js";
import { enqueueCommands, openQueue, type Queues } from "./queues.js";

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
    await enqueueCommands(q.commands, [{ action: "kill", jobId: "c1" }, { action: "kill", jobId: "c1" }, { action: "clean", jobId: "c1" }]);
    await enqueueCommands(q.commands, [{ action: "kill", jobId: "c1" }]);
    const jobs = (await q.commands.getJobs(["waiting", "delayed", "prioritized"])).filter((j) => j.data.jobId === "c1");
    expect(jobs.map((j) => j.data.action).sort()).toEqual(["clean", "kill"]);
    for (const j of jobs) expect(j.id).not.toContain(":");
  });
});
