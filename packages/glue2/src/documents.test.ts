import { describe, expect, it } from "vitest";
import { XMLParser } from "fast-xml-parser";
import { el } from "./tree.js";
import { renderXml } from "./render/xml.js";
import { render } from "./negotiate.js";
import {
  bulkResultsDoc,
  delegationListDoc,
  errorDoc,
  forceArraysFor,
  jobListDoc,
  sessionListingDoc,
  STATE_NONE,
  versionsDoc,
} from "./documents.js";

describe("REST body builders", () => {
  it("versions are ascending", () => {
    expect(renderXml(versionsDoc(["1.1", "1.0"]))).toBe("<versions><version>1.0</version><version>1.1</version></versions>");
  });

  it("job list with optional state", () => {
    expect(renderXml(jobListDoc([{ id: "a" }, { id: "b", state: "RUNNING" }]))).toBe(
      "<jobs><job><id>a</id></job><job><id>b</id><state>RUNNING</state></job></jobs>",
    );
    expect(renderXml(jobListDoc([]))).toBe("<jobs/>");
  });

  it("bulk items keep status-code, reason, id, then payload order", () => {
    const act = el("ComputingActivity", [el("ID", "x")]);
    const xml = renderXml(
      bulkResultsDoc([
        { statusCode: 201, reason: "Created", id: "a", state: "ACCEPTING" },
        { statusCode: 500, reason: "Failed to parse job description" },
        { statusCode: 200, reason: "OK", id: "b", infoDocument: act },
        { statusCode: 404, reason: "Job not found", id: "c", infoDocument: null },
        { statusCode: 200, reason: "OK", id: "d", delegationIds: ["D1", "D2"] },
        { statusCode: 202, reason: "Queued for killing", id: "e" },
      ]),
    );
    expect(xml).toBe(
      "<jobs>" +
        "<job><status-code>201</status-code><reason>Created</reason><id>a</id><state>ACCEPTING</state></job>" +
        "<job><status-code>500</status-code><reason>Failed to parse job description</reason></job>" +
        "<job><status-code>200</status-code><reason>OK</reason><id>b</id><info_document><ComputingActivity><ID>x</ID></ComputingActivity></info_document></job>" +
        "<job><status-code>404</status-code><reason>Job not found</reason><id>c</id><info_document/></job>" +
        "<job><status-code>200</status-code><reason>OK</reason><id>d</id><delegation_id>D1</delegation_id><delegation_id>D2</delegation_id></job>" +
        "<job><status-code>202</status-code><reason>Queued for killing</reason><id>e</id></job>" +
        "</jobs>",
    );
  });

  it("state None only when asked for explicitly", () => {
    const none = JSON.parse(render(bulkResultsDoc([{ statusCode: 404, reason: "Job not found", id: "z", stateNone: true }]), "json"));
    expect(none.job[0]).toEqual({ "status-code": "404", reason: "Job not found", id: "z", state: STATE_NONE });
    const absent = JSON.parse(render(bulkResultsDoc([{ statusCode: 404, reason: "Job not found", id: "z", state: null }]), "json"));
    expect(absent.job[0]).toEqual({ "status-code": "404", reason: "Job not found", id: "z" });
  });

  it("single bulk item is still an array, status-code a string, info_document empty string when not found", () => {
    const out = JSON.parse(render(bulkResultsDoc([{ statusCode: 404, reason: "Job not found", id: "z", infoDocument: null }]), "json"));
    expect(out).toEqual({ job: [{ "status-code": "404", reason: "Job not found", id: "z", info_document: "" }] });
  });

  it("delegation list with and without type", () => {
    expect(renderXml(delegationListDoc([{ id: "D", type: "jwt" }, { id: "E" }]))).toBe(
      "<delegations><delegation><id>D</id><type>jwt</type></delegation><delegation><id>E</id></delegation></delegations>",
    );
  });

  it("session listing: files with size attribute, then dirs", () => {
    const doc = sessionListingDoc({ files: [{ name: "a & b.txt", size: 12 }], dirs: ["gmlog"] });
    expect(renderXml(doc)).toBe('<list><file size="12">a &amp; b.txt</file><dir>gmlog</dir></list>');
    expect(render(doc, "json")).toBe('{"file":["a & b.txt"],"dir":["gmlog"]}');
    const parsed = new XMLParser({ ignoreAttributes: false, attributeNamePrefix: "@" }).parse(renderXml(doc));
    expect(parsed.list.file["@size"]).toBe("12");
  });

  it("error document", () => {
    expect(renderXml(errorDoc(400, "Unknown action 'x'"))).toBe(
      "<error><status-code>400</status-code><reason>Unknown action 'x'</reason></error>",
    );
    expect(render(errorDoc(415, "Unsupported"), "html")).toContain("<th>status-code</th><td>415</td>");
  });

  it("force-array names per document", () => {
    expect(forceArraysFor(el("jobs"))).toEqual(["job"]);
    expect(forceArraysFor(el("list"))).toEqual(["file", "dir"]);
    expect(forceArraysFor(el("InfoRoot"))).toEqual([]);
    expect(forceArraysFor(el("constructor"))).toEqual([]);
  });
});
