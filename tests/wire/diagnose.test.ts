/**
 * Wire contract: E7 "Diagnostic files", as far as a gateway answers them alone (files the job
 * execution manager writes later: lifecycle.test.ts). Written from the interface text; see wire.ts.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { startTestGateway, type TestGateway } from "../../apps/gateway/test/harness.js";
import { ACCEPT, DIAGNOSE_TYPES, VERSIONS, newJobs } from "./wire.js";

let t: TestGateway;
let id: string;
beforeAll(async () => {
  t = await startTestGateway(inject("redisUrl"));
  [id] = (await newJobs(t, 1, '&(executable="/bin/echo")(arguments="diag")(jobname="wire-diag")')) as [string];
});
afterAll(async () => t?.close());

const diag = (version: string, type: string, job = id) => `${t.rest}/${version}/jobs/${job}/diagnose/${type}`;

describe("E7 diagnostic files", () => {
  for (const version of VERSIONS) {
    it(`${version}: description returns the submitted description; status the job's state`, async () => {
      const d = await t.request("GET", diag(version, "description"));
      expect(d.status).toBe(200);
      expect(d.text).toContain("wire-diag");
      const s = await t.request("GET", diag(version, "status"));
      expect(s.status).toBe(200);
      expect(s.text.trim().length).toBeGreaterThan(0);
    });
    it(`${version}: every one of the 14 file types answers 200 with content or 404 when the job has none (never another code)`, async () => {
      for (const type of DIAGNOSE_TYPES) {
        const r = await t.request("GET", diag(version, type));
        expect([200, 404], type).toContain(r.status);
      }
    });
  }
  it("HEAD is supported: the length of the GET without a body", async () => {
    const get = await t.request("GET", diag("1.1", "description"));
    const head = await t.request("HEAD", diag("1.1", "description"));
    expect(head.status).toBe(200);
    expect(head.text).toBe("");
    expect(Number(head.headers["content-length"])).toBe(Buffer.byteLength(get.text));
  });
  it("POST, PUT, DELETE are not supported → 405 with Allow (Deviation #8)", async () => {
    for (const m of ["POST", "PUT", "DELETE"]) {
      const r = await t.request(m, diag("1.1", "description"), { body: "", accept: ACCEPT.json });
      expect(r.status, m).toBe(405);
      expect(String(r.headers.allow)).toContain("GET");
    }
  });
  it('a file type not in the list → 404 (as A-REX: "Diagnostic item not found")', async () => {
    for (const type of ["proxy", "grami", "description/x", "../description"]) {
      const r = await t.request("GET", diag("1.1", encodeURIComponent(type)));
      expect([400, 404], type).toContain(r.status);
    }
    expect((await t.request("GET", diag("1.1", "proxy"))).status).toBe(404);
  });
  it("Authentication 1: another user's job → 404", async () => {
    expect((await t.request("GET", diag("1.1", "description"), { as: "bob" })).status).toBe(404);
  });
});
