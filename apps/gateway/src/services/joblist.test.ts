import { describe, expect, it } from "vitest";
import { jobListDoc, render } from "@ce/glue2";
import { renderJobList } from "./joblist.js";

describe("renderJobList", () => {
  const cases = [[], [{ id: "a" }], [{ id: "a" }, { id: "b<&>\"é" }], [{ id: "x", state: "RUNNING" }, { id: "y", state: "QUEUING" }]];
  it.each(cases.map((c) => [c]))("matches the element-tree rendering for %j", (items) => {
    for (const fmt of ["json", "xml"] as const) expect(renderJobList(items, fmt)).toBe(render(jobListDoc(items), fmt));
  });
});
