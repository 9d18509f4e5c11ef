/**
 * Wire contract: E3 "List jobs" and E5 `action=status`, with the Body shapes of job lists and
 * bulk results. Written from the interface text; see wire.ts for the conventions.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { startTestGateway, type TestGateway } from "../../apps/gateway/test/harness.js";
import {
  ACCEPT,
  FORMATS,
  REST_STATE_NAMES,
  VERSIONS,
  bulk,
  errorOf,
  expectFormat,
  expectItemBasics,
  itemsOf,
  kid,
  kids,
  local,
  newJobs,
  parseXml,
} from "./wire.js";

let t: TestGateway;
let strict: TestGateway;
let ids: string[];
const MISSING = "00000000-0000-4000-8000-000000000000";
beforeAll(async () => {
  t = await startTestGateway(inject("redisUrl"));
  strict = await startTestGateway(inject("redisUrl"), { compat: { strictSpecCodes: true } });
  ids = await newJobs(t, 3);
});
afterAll(async () => {
  await t?.close();
  await strict?.close();
});

describe("E3 list jobs (GET <base>/jobs)", () => {
  for (const version of VERSIONS) {
    it(`${version} JSON: key job holding objects with key id (ids only)`, async () => {
      const r = await t.request("GET", `${t.rest}/${version}/jobs`, { accept: ACCEPT.json });
      expect(r.status).toBe(200);
      expectFormat(r, "json");
      const doc = r.json();
      expect(Object.keys(doc)).toEqual(["job"]);
      expect(doc.job.map((j: { id: string }) => j.id).sort()).toEqual([...ids].sort());
      for (const j of doc.job) expect(Object.keys(j)).toEqual(["id"]);
    });
    it(`${version} XML: root jobs, repeated job elements each with child id`, async () => {
      const r = await t.request("GET", `${t.rest}/${version}/jobs`, { accept: ACCEPT.xml });
      expect(r.status).toBe(200);
      expectFormat(r, "xml");
      const root = parseXml(r.text);
      expect(local(root.name)).toBe("jobs");
      const jobs = kids(root, "job");
      expect(jobs.map((j) => kid(j, "id")!.text).sort()).toEqual([...ids].sort());
      for (const j of jobs) expect(j.children.map((c) => local(c.name))).toEqual(["id"]);
    });
  }
  it('Authentication 1: the list is scoped to the authenticated user (bob sees none of alice\'s jobs); empty list is {"job":[]} (Deviation #6)', async () => {
    const r = await t.request("GET", `${t.rest}/1.1/jobs`, { accept: ACCEPT.json, as: "bob" });
    expect(r.status).toBe(200);
    expect(r.json()).toEqual({ job: [] });
    const x = parseXml((await t.request("GET", `${t.rest}/1.1/jobs`, { accept: ACCEPT.xml, as: "bob" })).text);
    expect(local(x.name)).toBe("jobs");
    expect(x.children).toEqual([]);
  });
  it("state filter: a comma-separated list of states; only jobs in those states", async () => {
    const hit = await t.request("GET", `${t.rest}/1.1/jobs?state=FINISHED,ACCEPTING`, { accept: ACCEPT.json });
    expect(hit.status).toBe(200);
    expect(
      hit
        .json()
        .job.map((j: { id: string }) => j.id)
        .sort(),
    ).toEqual([...ids].sort());
    // E3 says "job list (ids only)"; with a filter each item also carries its state, as A-REX does
    // (Deviation #32).
    for (const j of hit.json().job) expect(j).toEqual({ id: j.id, state: "ACCEPTING" });
    const x = parseXml((await t.request("GET", `${t.rest}/1.1/jobs?state=ACCEPTING`, { accept: ACCEPT.xml })).text);
    for (const j of kids(x, "job"))
      expect(j.children.map((c) => [local(c.name), c.children.length ? "" : c.text])).toEqual([
        ["id", kid(j, "id")!.text],
        ["state", "ACCEPTING"],
      ]);
    const miss = await t.request("GET", `${t.rest}/1.1/jobs?state=FINISHED,KILLED`, { accept: ACCEPT.json });
    expect(miss.json()).toEqual({ job: [] });
  });
  it("state filter with a name that is no job state → 400 naming it (Deviation #9)", async () => {
    const r = await t.request("GET", `${t.rest}/1.1/jobs?state=RUNNING,SLEEPING`, { accept: ACCEPT.json });
    expect(r.status).toBe(400);
    expect(errorOf(r, "json").reason).toContain("SLEEPING");
  });
  it("HEAD is supported; PUT and DELETE are not (405 with Allow, Deviation #8)", async () => {
    const head = await t.request("HEAD", `${t.rest}/1.1/jobs`, { accept: ACCEPT.json });
    expect(head.status).toBe(200);
    expect(head.text).toBe("");
    for (const m of ["PUT", "DELETE"]) {
      const r = await t.request(m, `${t.rest}/1.1/jobs`, { accept: ACCEPT.json, body: "" });
      expect(r.status, m).toBe(405);
      expect(String(r.headers.allow)).toContain("GET");
    }
  });
});

describe("E5 action=status", () => {
  for (const version of VERSIONS) {
    for (const fmt of FORMATS) {
      it(`${version} ${fmt}: one item per id in request order; status-code 200, reason, id, state`, async () => {
        const order = [ids[2]!, ids[0]!, ids[1]!];
        const { r, items } = await bulk(t, version, "status", order, fmt);
        // Deviation #1: 201 for every bulk action (the interface text states 201 only for info).
        expect(r.status).toBe(201);
        expectFormat(r, fmt);
        expectItemBasics(items, fmt, r);
        expect(items.map((i) => i.id)).toEqual(order);
        for (const i of items) {
          expect(i["status-code"]).toBe("200"); // E5 table: status, "200 (only positive)"
          expect(REST_STATE_NAMES).toContain(i.state);
          expect(Object.keys(i).sort()).toEqual(["id", "reason", "state", "status-code"]);
        }
        expect(items.map((i) => i.state)).toEqual(["ACCEPTING", "ACCEPTING", "ACCEPTING"]);
      });
      it(`${version} ${fmt}: an unknown id and another user's job: a non-positive code, the id, state None`, async () => {
        const { items } = await bulk(t, version, "status", [MISSING, ids[0]!], fmt, { as: "bob" });
        expectItemBasics(items, fmt);
        for (const [i, id] of items.map((x, n) => [x, [MISSING, ids[0]][n]] as const)) {
          expect(i.id).toBe(id);
          // Per-item result table: state "None when not available"; the code is A-REX's 404 (docs/interface.md E5).
          expect(i.state).toBe("None");
          expect(i["status-code"]).toBe("404");
        }
      });
    }
  }
  it("a JSON list of one may be a single object (Body shapes); the answer is still an array (Deviation #6)", async () => {
    const { r, items } = await bulk(t, "1.0", "status", [ids[0]!], "json", { single: true });
    expect(r.status).toBe(201);
    expect(Array.isArray(r.json().job)).toBe(true);
    expect(items[0]).toMatchObject({ "status-code": "200", id: ids[0], state: "ACCEPTING" });
  });
  it("the output of E3 can be reused as the request body (E5), in both formats", async () => {
    for (const fmt of FORMATS) {
      const list = await t.request("GET", `${t.rest}/1.1/jobs`, { accept: ACCEPT[fmt] });
      const ct = fmt === "json" ? "application/json" : "application/xml";
      const r = await t.request("POST", `${t.rest}/1.1/jobs?action=status`, {
        body: list.text,
        headers: { "content-type": ct },
        accept: ACCEPT[fmt],
      });
      expect(r.status).toBe(201);
      expect(
        itemsOf(r, fmt)
          .map((i) => i.id)
          .sort(),
      ).toEqual([...ids].sort());
    }
  });
  it('an empty id list → no items: {"job":[]} and <jobs/> (Deviation #6)', async () => {
    const j = await bulk(t, "1.1", "status", [], "json");
    expect(j.r.json()).toEqual({ job: [] });
    const x = await bulk(t, "1.1", "status", [], "xml");
    expect(parseXml(x.r.text).children).toEqual([]);
  });
  it("compat.strictSpecCodes: the overall code of status is the plain 200 (Deviation #1, switch)", async () => {
    const mine = await newJobs(strict, 1);
    const { r, items } = await bulk(strict, "1.1", "status", mine, "json");
    expect(r.status).toBe(200);
    expect(items[0]).toMatchObject({ "status-code": "200", state: "ACCEPTING" });
  });
  it("unknown action → 400 naming it; missing action → 400 (Deviation #9)", async () => {
    const r = await t.request("POST", `${t.rest}/1.1/jobs?action=hold`, { body: "<jobs/>", accept: ACCEPT.json });
    expect(r.status).toBe(400);
    expect(errorOf(r, "json").reason).toContain("hold");
    expect((await t.request("POST", `${t.rest}/1.1/jobs`, { body: "<jobs/>", accept: ACCEPT.json })).status).toBe(400);
  });
  it("a malformed id list → 400 (Deviation #9)", async () => {
    const r = await t.request("POST", `${t.rest}/1.1/jobs?action=status`, {
      body: '{"job": [',
      headers: { "content-type": "application/json" },
      accept: ACCEPT.json,
    });
    expect(r.status).toBe(400);
    expect(errorOf(r, "json").code).toBe("400");
  });
});
