import { describe, expect, it } from "vitest";
import { stateLine } from "@ce/controldir";
import { parseHistory, tokenParts, voOf } from "./data.js";
import { sortRows } from "./joblist.js";
import type { JobRow } from "./data.js";

describe("state history from the errors file", () => {
  it("reads the JEM's state lines with their reasons, and keeps other lines as notes", () => {
    const text =
      stateLine("ACCEPTED", "PREPARING", "Starting job processing", new Date("2026-01-02T03:04:05Z")) +
      "2026-01-02T03:04:06Z Waiting for client uploads: a.txt\n" +
      stateLine("INLRMS", "FINISHING", "LRMS error: (3) exit code 3", new Date("2026-01-02T03:05:00Z"));
    expect(parseHistory(text, false)).toEqual([
      { at: "2026-01-02T03:04:05Z", from: "ACCEPTED", to: "PREPARING", text: "Starting job processing" },
      { at: "2026-01-02T03:04:06Z", text: "Waiting for client uploads: a.txt" },
      { at: "2026-01-02T03:05:00Z", from: "INLRMS", to: "FINISHING", text: "LRMS error: (3) exit code 3" },
    ]);
  });
  it("a tail cut inside a line drops that partial line", () => {
    const text = "nge A -> B   Reason: x\n" + stateLine("B", "C", "y", new Date("2026-01-02T03:04:05Z"));
    expect(parseHistory(text, true).map((e) => e.to)).toEqual(["C"]);
  });
});

describe("job table sort", () => {
  const row = (id: string, jobName: string | undefined, created: number, exitCode?: number): JobRow =>
    ({ id, owner: "o", state: "FINISHED", rest: "FINISHED", jobName, created, stateSince: created, exitCode }) as JobRow;
  const rows = [row("a", "beta", 2, 1), row("b", "Alpha", 1), row("c", undefined, 3, 0)];
  it("sorts by name case-insensitively, by time, by exit code (none last when descending)", () => {
    expect(sortRows(rows, "name", "asc").map((r) => r.id)).toEqual(["c", "b", "a"]);
    expect(sortRows(rows, "submitted", "desc").map((r) => r.id)).toEqual(["c", "a", "b"]);
    expect(sortRows(rows, "exit", "desc").map((r) => r.id)).toEqual(["a", "c", "b"]);
  });
});

it("the VO of a job is its primary FQAN's first group", () => {
  expect(voOf(["/atlas/Role=production", "/atlas"])).toBe("atlas");
  expect(voOf(["/vo.example.org"])).toBe("vo.example.org");
  expect(voOf(undefined)).toBe("(none)");
  expect(voOf([])).toBe("(none)");
});

it("a token job's owner is its issuer and subject (split at the last /, the sub unescaped); a DN is none", () => {
  expect(tokenParts("https://iam.example.org/abc-123")).toEqual({ issuer: "https://iam.example.org", subject: "abc-123" });
  expect(tokenParts("https://idp.example/realms/x/u1")).toEqual({ issuer: "https://idp.example/realms/x", subject: "u1" });
  expect(tokenParts("/DC=org/DC=test/CN=Alice")).toBeUndefined();
  expect(tokenParts("opaque")).toBeUndefined();
  // A sub with `/` or `%` is escaped in the owner (the last `/` separates issuer and subject).
  expect(tokenParts("https://iam.example.org/r%2Fx%25y")).toEqual({ issuer: "https://iam.example.org", subject: "r/x%y" });
  expect(tokenParts("https://iam.example.org/bad%zz")).toBeUndefined();
});
