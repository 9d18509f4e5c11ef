import { describe, expect, it } from "vitest";
import { bulkResultsDoc, render } from "@ce/glue2";
import { renderBulkStatus, type StatusItem } from "./bulkstatus.js";

describe("renderBulkStatus", () => {
  const cases: StatusItem[][] = [
    [],
    [{ statusCode: 200, reason: "OK", id: "a", state: "RUNNING" }],
    [
      { statusCode: 200, reason: "OK", id: 'b<&>"\\é', state: "FINISHED" },
      { statusCode: 404, reason: "Job not found", id: "x\r\u0001", state: "None" },
    ],
    // Every ASCII character alone and around plain text (the JSON fast path must quote exactly as JSON.stringify).
    Array.from({ length: 128 }, (_, c) => ({
      statusCode: 200,
      reason: "OK",
      id: `a${String.fromCharCode(c)}b`,
      state: String.fromCharCode(c),
    })),
    [{ statusCode: 200, reason: "OK", id: "\u007f\u0080\ud800\u2028", state: "日本" }],
  ];
  it.each(cases.map((c) => [c]))("matches the element-tree rendering for %j", (items) => {
    for (const fmt of ["json", "xml"] as const) expect(renderBulkStatus(items, fmt)).toBe(render(bulkResultsDoc(items), fmt));
  });
});
