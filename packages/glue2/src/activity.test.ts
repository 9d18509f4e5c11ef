import { describe, expect, it } from "vitest";
import { XMLParser } from "fast-xml-parser";
import { buildActivityDocument, type ActivityInput } from "./activity.js";
import { bulkResultsDoc } from "./documents.js";
import { renderXml } from "./render/xml.js";
import { render } from "./negotiate.js";
import { glueTime, glueTimeOpt } from "./glue.js";

const t = (s: string) => new Date(s);
const full: ActivityInput = {
  id: "0b6c5d1e-1111-4222-8333-444455556666",
  hostname: "ce.example.org",
  now: t("2026-05-01T10:00:00.123Z"),
  name: "tëst <job>",
  jobDescription: "emies:adl",
  states: ["nordugrid:FINISHED", "bes:Failed", "arcrest:FAILED", "emies:terminal"],
  restartStates: ["arcrest:RUNNING"],
  localIdFromManager: "12345",
  exitCode: 1,
  computingManagerExitCode: "1",
  errors: "Job failed\r\nexit code 1\n\n",
  waitingPosition: 0,
  owner: "/DC=org/CN=User",
  localOwner: "grid001",
  requestedTotalWallTime: 600.4,
  requestedTotalCpuTime: 600,
  requestedSlots: 1,
  requestedApplicationEnvironments: ["ENV/PROXY"],
  stdin: "/dev/null",
  stdout: "out.txt",
  stderr: "err.txt",
  logDir: "gmlog",
  executionNodes: ["node1", "node2"],
  queue: "main",
  usedTotalWallTime: 12.7,
  usedTotalCpuTime: 3,
  usedMainMemory: 5,
  submissionTime: t("2026-05-01T09:00:00.999Z"),
  computingManagerSubmissionTime: t("2026-05-01T09:01:00Z"),
  startTime: t("2026-05-01T09:02:00Z"),
  computingManagerEndTime: t("2026-05-01T09:03:00Z"),
  endTime: t("2026-05-01T09:04:00Z"),
  workingAreaEraseTime: t("2026-05-08T09:04:00Z"),
  proxyExpirationTime: t("2026-05-02T09:00:00Z"),
  submissionHost: "192.0.2.1",
  submissionClientName: "arcsub",
  otherMessages: ["note"],
};

const ORDER = [
  "ID",
  "Name",
  "OtherInfo",
  "Type",
  "IDFromEndpoint",
  "LocalIDFromManager",
  "JobDescription",
  "State",
  "RestartState",
  "ExitCode",
  "ComputingManagerExitCode",
  "Error",
  "WaitingPosition",
  "Owner",
  "LocalOwner",
  "RequestedTotalWallTime",
  "RequestedTotalCPUTime",
  "RequestedSlots",
  "RequestedApplicationEnvironment",
  "StdIn",
  "StdOut",
  "StdErr",
  "LogDir",
  "ExecutionNode",
  "Queue",
  "UsedTotalWallTime",
  "UsedTotalCPUTime",
  "UsedMainMemory",
  "SubmissionTime",
  "ComputingManagerSubmissionTime",
  "StartTime",
  "ComputingManagerEndTime",
  "EndTime",
  "WorkingAreaEraseTime",
  "ProxyExpirationTime",
  "SubmissionHost",
  "SubmissionClientName",
  "OtherMessages",
  "Associations",
];

describe("glueTime", () => {
  it("is exactly YYYY-MM-DDTHH:MM:SSZ", () => {
    expect(glueTime(t("2026-01-02T03:04:05.999Z"))).toBe("2026-01-02T03:04:05Z");
    expect(() => glueTime(new Date(NaN))).toThrow(RangeError);
  });

  it("gives each second's text however times alternate (texts are kept per second)", () => {
    const ref = (ms: number) => new Date(ms).toISOString().slice(0, 19) + "Z";
    let seed = 7;
    const rnd = () => (seed = (seed * 48271) % 2147483647) / 2147483647;
    // Across the cache's bound (4096 seconds), before 1970, fractions either side of a second.
    for (let i = 0; i < 20_000; i++) {
      const ms = Math.floor((rnd() - 0.3) * 1e13) + (i % 3 === 0 ? 999 : i % 3 === 1 ? 1 : 0);
      expect(glueTime(new Date(ms))).toBe(ref(ms));
      expect(glueTimeOpt(new Date(ms))).toBe(ref(ms));
    }
    for (const ms of [-1, -999, -1000, -1001, 0, 999]) expect(glueTime(new Date(ms))).toBe(ref(ms));
    expect(glueTimeOpt(new Date(NaN))).toBeUndefined();
    expect(glueTimeOpt(new Date(Date.UTC(10000, 0, 1)))).toBeUndefined();
    expect(() => glueTime(new Date(Date.UTC(10000, 0, 1)))).toThrow(RangeError);
    expect(glueTimeOpt(undefined)).toBeUndefined();
  });
});

describe("buildActivityDocument", () => {
  const doc = buildActivityDocument(full);
  const xml = renderXml(doc);

  it("is a GLUE2 ComputingActivity with Activity attributes", () => {
    expect(
      xml.startsWith(
        '<ComputingActivity xmlns="http://schemas.ogf.org/glue/2009/03/spec_2.0_r1" BaseType="Activity" CreationTime="2026-05-01T10:00:00Z" Validity="60">',
      ),
    ).toBe(true);
  });

  it("has children in A-REX order", () => {
    const names = (doc.children ?? []).map((c) => c.name);
    const distinct = names.filter((n, i) => names[i - 1] !== n);
    expect(distinct).toEqual(ORDER);
  });

  it("uses the arcrest identifiers and states", () => {
    const p = new XMLParser({ parseTagValue: false, ignoreAttributes: false, attributeNamePrefix: "@" }).parse(xml).ComputingActivity;
    expect(p.ID).toBe(`urn:caid:ce.example.org:org.nordugrid.arcrest:${full.id}`);
    expect(p.IDFromEndpoint).toBe(`urn:idfe:${full.id}`);
    expect(p.OtherInfo).toBe("SubmittedVia=org.nordugrid.arcrest");
    expect(p.Type).toBe("single");
    expect(p.State).toContain("arcrest:FAILED");
    expect(p.Error).toEqual(["Job failed", "exit code 1"]);
    expect(p.ExecutionNode).toEqual(["node1", "node2"]);
    expect(p.Associations.ComputingShareID).toBe("urn:ogf:ComputingShare:ce.example.org:main");
    expect(p.Name).toBe("tëst <job>");
  });

  it("formats every time exactly and every integer as an integer", () => {
    const p = new XMLParser({ parseTagValue: false }).parse(xml).ComputingActivity;
    for (const k of [
      "SubmissionTime",
      "ComputingManagerSubmissionTime",
      "StartTime",
      "ComputingManagerEndTime",
      "EndTime",
      "WorkingAreaEraseTime",
      "ProxyExpirationTime",
    ]) {
      expect(p[k]).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/);
    }
    expect(p.SubmissionTime).toBe("2026-05-01T09:00:00Z");
    for (const k of [
      "UsedTotalWallTime",
      "UsedTotalCPUTime",
      "RequestedTotalWallTime",
      "RequestedTotalCPUTime",
      "RequestedSlots",
      "ExitCode",
      "WaitingPosition",
      "UsedMainMemory",
    ]) {
      expect(p[k]).toMatch(/^-?\d+$/);
    }
    expect(p.UsedTotalWallTime).toBe("13");
    expect(p.RequestedTotalWallTime).toBe("600");
  });

  it("renders in an info bulk item as JSON pyarcrest reads", () => {
    const out = JSON.parse(render(bulkResultsDoc([{ statusCode: 200, reason: "OK", id: full.id, infoDocument: doc }]), "json"));
    const ca = out.job[0].info_document.ComputingActivity;
    expect(ca.State).toEqual(full.states);
    expect(ca.State.find((s: string) => s.startsWith("arcrest:"))).toBe("arcrest:FAILED");
    expect(ca.Name).toBe("tëst <job>");
    expect(ca.ExitCode).toBe("1");
    expect(ca._attributes).toEqual({ BaseType: "Activity", CreationTime: "2026-05-01T10:00:00Z", Validity: "60" });
    expect(Object.keys(ca).at(-1)).toBe("_attributes");
  });

  it("a minimal document has just the essentials; absent and invalid values are omitted", () => {
    const min = buildActivityDocument({
      id: "j",
      hostname: "h",
      now: t("2026-05-01T10:00:00Z"),
      states: ["arcrest:ACCEPTING"],
      endTime: new Date(NaN),
      exitCode: NaN,
    });
    expect(renderXml(min)).toBe(
      '<ComputingActivity xmlns="http://schemas.ogf.org/glue/2009/03/spec_2.0_r1" BaseType="Activity" CreationTime="2026-05-01T10:00:00Z" Validity="60">' +
        "<ID>urn:caid:h:org.nordugrid.arcrest:j</ID><OtherInfo>SubmittedVia=org.nordugrid.arcrest</OtherInfo><Type>single</Type>" +
        "<IDFromEndpoint>urn:idfe:j</IDFromEndpoint><State>arcrest:ACCEPTING</State></ComputingActivity>",
    );
  });

  it("requires an arcrest: state", () => {
    expect(() => buildActivityDocument({ id: "j", hostname: "h", now: new Date(), states: ["bes:Running"] })).toThrow(/arcrest:/);
  });
});
