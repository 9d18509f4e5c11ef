import { describe, expect, it } from "vitest";
import { bulkResultsDoc, render } from "@ce/glue2";
import { renderBulkStatus, type StatusItem } from "./bulkstatus.js";

describe("renderBulkStatus", () => {
  const cases: StatusItem[][] = [
    [],
    [{ statusCode: 200, reason: "OK", id: "a", state: "RUNNING" }],
    [
      { statusCode: 200, reason: "OK", id: "b<&>\"\\é", state: "FINISHED" },
      { statusCode: 404, reason: "Job not found", id: "x\r\u0001", state: "None" },
    ],
  ];
  it.each(cases.map((c) => [c]))("matches the element-tree rendering for %j", (items) => {
    for (const fmt of ["json", "xml"] as const) expect(renderBulkStatus(items, fmt)).toBe(render(bulkResultsDoc(items), fmt));
  });
});
