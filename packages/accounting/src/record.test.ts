import { describe, expect, it } from "vitest";
import { usageRecord } from "./record.js";

const base = {
  id: "j1",
  recordId: "j1/0",
  owner: "/DC=org/CN=u",
  queue: "main",
  outcome: "success",
  localId: "42",
  created: "1700000000000",
  startedAt: "1700000010000",
  endedAt: "1700000200000",
  usedWallSeconds: "95",
  usedCpuSeconds: "60",
  usedUserSeconds: "50",
  usedSystemSeconds: "10",
  usedMemoryMB: "2",
  processors: "1",
  nodes: "wn1",
};

describe("usageRecord", () => {
  it("takes the wrapper's figures when the batch system gave none", () => {
    const r = usageRecord("1-0", base, { vomslessVo: "ops" });
    expect(r).toMatchObject({
      startTime: 1700000010,
      endTime: 1700000200,
      wallSeconds: 95,
      cpuSeconds: 60,
      cpuUserSeconds: 50,
      cpuSystemSeconds: 10,
      maxRssKb: 2048,
      processors: 1,
      nodeCount: 1,
      nodes: "wn1",
    });
  });

  it("prefers the batch system's figures field by field; CPU and memory it did not measure stay the wrapper's", () => {
    const jobcomp = {
      ...base,
      "u.batchSource": "jobcomp",
      "u.batchStart": "1700000009",
      "u.batchEnd": "1700000105",
      "u.batchWall": "96",
      "u.batchProcessors": "4",
      "u.batchNodeCount": "2",
      "u.batchNodes": "wn[1-2]",
    };
    expect(usageRecord("1-0", jobcomp, { vomslessVo: "ops" })).toMatchObject({
      startTime: 1700000009,
      endTime: 1700000105,
      wallSeconds: 96,
      cpuSeconds: 60,
      cpuUserSeconds: 50,
      cpuSystemSeconds: 10,
      maxRssKb: 2048,
      processors: 4,
      nodeCount: 2,
      nodes: "wn1",
    });
    const sacct = {
      ...jobcomp,
      "u.batchSource": "sacct",
      "u.batchCpu": "300",
      "u.batchCpuUser": "280",
      "u.batchCpuSystem": "20",
      "u.batchMaxRssKb": "900000",
    };
    expect(usageRecord("1-0", sacct, { vomslessVo: "ops" })).toMatchObject({
      cpuSeconds: 300,
      cpuUserSeconds: 280,
      cpuSystemSeconds: 20,
      maxRssKb: 900000,
    });
  });
});
