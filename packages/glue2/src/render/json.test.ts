import { describe, expect, it } from "vitest";
import { el } from "../tree.js";
import { renderJson, renderJsonValue } from "./json.js";
import { bulkResultsDoc, delegationListDoc, jobListDoc, sessionListingDoc, versionsDoc, errorDoc } from "../documents.js";
import { render } from "../negotiate.js";

describe("renderJson", () => {
  it("drops the root name; leaves are strings; children objects", () => {
    const doc = el("jobs", [el("job", [el("id", "X"), el("status-code", "200")])]);
    expect(renderJson(doc)).toBe('{"job":{"id":"X","status-code":"200"}}');
  });

  it("forced names are arrays with one item and [] when absent", () => {
    expect(renderJson(jobListDoc([{ id: "X" }]), { forceArrays: ["job"] })).toBe('{"job":[{"id":"X"}]}');
    expect(renderJson(jobListDoc([]), { forceArrays: ["job"] })).toBe('{"job":[]}');
    expect(renderJson(delegationListDoc([]), { forceArrays: ["delegation"] })).toBe('{"delegation":[]}');
  });

  it("render() applies the per-document forced arrays by default", () => {
    expect(render(jobListDoc([]), "json")).toBe('{"job":[]}');
    expect(render(jobListDoc([{ id: "a", state: "RUNNING" }]), "json")).toBe('{"job":[{"id":"a","state":"RUNNING"}]}');
    expect(render(versionsDoc(["1.1", "1.0"]), "json")).toBe('{"version":["1.0","1.1"]}');
    expect(render(delegationListDoc([{ id: "D", type: "x509" }]), "json")).toBe('{"delegation":[{"id":"D","type":"x509"}]}');
    expect(render(sessionListingDoc({ files: [], dirs: [] }), "json")).toBe('{"file":[],"dir":[]}');
    expect(render(sessionListingDoc({ files: [{ name: "a", size: 3 }], dirs: [] }), "json")).toBe('{"file":["a"],"dir":[]}');
    expect(render(errorDoc(404, "Not Found"), "json")).toBe('{"status-code":"404","reason":"Not Found"}');
  });

  it("delegation_id is always an array (spec: delegations-of-job responses), only where listed", () => {
    const doc = bulkResultsDoc([
      { statusCode: 200, reason: "OK", id: "A", delegationIds: ["D1"] },
      { statusCode: 200, reason: "OK", id: "B", delegationIds: ["D1", "D2"] },
      { statusCode: 200, reason: "OK", id: "C", delegationIds: [] },
      { statusCode: 404, reason: "Job not found", id: "X" },
    ]);
    const v = JSON.parse(render(doc, "json"));
    expect(v.job[0].delegation_id).toEqual(["D1"]);
    expect(v.job[1].delegation_id).toEqual(["D1", "D2"]);
    expect(v.job[2]).toEqual({ "status-code": "200", reason: "OK", id: "C", delegation_id: [] });
    expect("delegation_id" in v.job[3]).toBe(false);
    // XML keeps repeated elements (what arcsync reads); the JSON hint never shows up there.
    expect(render(doc, "xml")).toContain("<id>A</id><delegation_id>D1</delegation_id></job>");
  });

  it("other nested repeated elements become arrays, single nested ones stay strings", () => {
    const states = el("ComputingActivity", [el("State", "a:1"), el("ID", "x"), el("State", "arcrest:RUNNING")]);
    expect(renderJsonValue(states)).toEqual({ State: ["a:1", "arcrest:RUNNING"], ID: "x" });
  });

  it("collects non-adjacent repeats in order of first appearance", () => {
    const doc = el("r", [el("a", "1"), el("b", "2"), el("a", "3")]);
    expect(renderJson(doc)).toBe('{"a":["1","3"],"b":"2"}');
  });

  it("puts attribute values (not blanks) under _attributes after children; xmlns never appears", () => {
    const act = { ...el("ComputingActivity", [el("ID", "x")], { BaseType: "Activity", Validity: "60" }), ns: "urn:g" };
    expect(renderJson(el("info_document", [act]))).toBe(
      '{"ComputingActivity":{"ID":"x","_attributes":{"BaseType":"Activity","Validity":"60"}}}',
    );
    expect(renderJsonValue(el("a", [el("b")], { "xmlns:xsi": "u", "xsi:type": "t" }))).toEqual({
      b: "",
      _attributes: { type: "t" },
    });
  });

  it("uses local names and drops attributes of leaves", () => {
    expect(renderJson(el("r", [el("D:href", "/x"), el("file", "a", { size: "3" })]))).toBe('{"href":"/x","file":"a"}');
  });

  it("keeps UTF-8 as UTF-8 and escapes what JSON requires", () => {
    const out = renderJson(el("r", [el("name", 'é "q" \\ \n\u0001 日本')]));
    expect(out).toBe('{"name":"é \\"q\\" \\\\ \\n\\u0001 日本"}');
    expect(JSON.parse(out).name).toBe('é "q" \\ \n\u0001 日本');
  });

  it("never renders an empty body", () => {
    expect(renderJson(el("anything"))).toBe("{}");
    expect(renderJson(el("info_document", ""))).toBe("{}");
  });

  it("stores a __proto__ child as data", () => {
    const v = JSON.parse(renderJson(el("r", [el("__proto__", "x")])));
    expect(Object.keys(v)).toEqual(["__proto__"]);
  });
});
