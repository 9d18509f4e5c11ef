import { describe, expect, it } from "vitest";
import { activityInputFor } from "./activity.js";
import { JobStore } from "./jobs.js";

const base = JobStore.newRecord(
  {
    id: "0b7c1f6e-1111-4222-8333-944445555666",
    owner: "/DC=org/CN=Jane",
    queue: "main",
    backend: "fork",
    language: "emies:adl",
    jobName: "j",
    delegations: [],
    rerun: 1,
    lifetime: 60,
    summary: { stdout: "out.txt", wallTime: 600, slots: 2, rtes: ["ENV/PROXY"] },
  },
  Date.UTC(2026, 0, 2, 3, 4, 5),
);

describe("activityInputFor", () => {
  it("maps a fresh job: arcrest state, owner, queue, requested resources, submission time", () => {
    const a = activityInputFor(base, { hostname: "ce.example.org", now: new Date(0) });
    expect(a.states).toContain("arcrest:ACCEPTING");
    expect(a).toMatchObject({
      id: base.id,
      hostname: "ce.example.org",
      name: "j",
      owner: "/DC=org/CN=Jane",
      queue: "main",
      jobDescription: "emies:adl",
      stdout: "out.txt",
      requestedSlots: 2,
      requestedTotalWallTime: 1200,
    });
    expect(a.requestedApplicationEnvironments).toEqual(["ENV/PROXY"]);
    expect(a.submissionTime?.toISOString()).toBe("2026-01-02T03:04:05.000Z");
    expect(a.endTime).toBeUndefined();
    expect(a.restartStates).toBeUndefined();
  });
  it("a failed job carries its failure, restart states, usage and the batch-system details", () => {
    const failed = {
      ...base,
      state: "FINISHED" as const,
      outcome: "failed" as const,
      rest: "FAILED" as const,
      failedState: "INLRMS" as const,
      failure: "exit 3",
      exitCode: 3,
      localId: "123",
      nodes: "n1,n2",
      endedAt: base.created + 1000,
      usedWallSeconds: 10,
    };
    const a = activityInputFor(failed, { hostname: "h" });
    expect(a.states).toContain("arcrest:FAILED");
    expect(a.restartStates?.some((s) => s.startsWith("arcrest:"))).toBe(true);
    expect(a).toMatchObject({
      errors: "exit 3",
      exitCode: 3,
      localIdFromManager: "123",
      executionNodes: ["n1", "n2"],
      usedTotalWallTime: 10,
    });
  });
});
