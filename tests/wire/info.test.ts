/**
 * Wire contract: E5 `action=info` (per-item `info_document`). Written from the interface text;
 * see wire.ts for the conventions.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { startTestGateway, type TestGateway } from "../../apps/gateway/test/harness.js";
import { FORMATS, UUID, VERSIONS, bulk, expectFormat, expectItemBasics, kid, kids, local, newJobs, type XNode } from "./wire.js";

let t: TestGateway;
let strict: TestGateway;
let ids: string[];
const MISSING = "00000000-0000-4000-8000-000000000000";
beforeAll(async () => {
  t = await startTestGateway(inject("redisUrl"));
  strict = await startTestGateway(inject("redisUrl"), { compat: { strictSpecCodes: true } });
  ids = await newJobs(t, 2, '&(executable="/bin/echo")(jobname="wire-info")(stdout="out.txt")(stderr="err.txt")');
});
afterAll(async () => {
  await t?.close();
  await strict?.close();
});

// Deviation #17: GLUE2 times are exactly YYYY-MM-DDTHH:MM:SSZ (one bad timestamp breaks pyarcrest's whole bulk call).
const TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/;
const TIME_FIELDS = [
  "SubmissionTime",
  "EndTime",
  "WorkingAreaEraseTime",
  "ProxyExpirationTime",
  "ComputingManagerSubmissionTime",
  "StartTime",
  "ComputingManagerEndTime",
];

describe("E5 action=info", () => {
  for (const version of VERSIONS) {
    it(`${version} xml: overall 201; items 200, reason, id, info_document holding a GLUE2 ComputingActivity`, async () => {
      const { r, items } = await bulk(t, version, "info", ids, "xml");
      // E5 table: info "200 (only positive); overall HTTP code 201".
      expect(r.status).toBe(201);
      expectFormat(r, "xml");
      expectItemBasics(items, "xml");
      expect(items.map((i) => i.id)).toEqual(ids);
      for (const i of items) {
        expect(i["status-code"]).toBe("200");
        expect(Object.keys(i).sort()).toEqual(["id", "info_document", "reason", "status-code"]);
        const doc = i.info_document as XNode;
        const act = kids(doc, "ComputingActivity");
        expect(act).toHaveLength(1);
        const states = kids(act[0]!, "State").map((s) => s.text);
        // Deviation #17: State holds prefixed values, among them arcrest:<REST state>.
        expect(states).toContain("arcrest:ACCEPTING");
        expect(kid(act[0]!, "ID")?.text).toContain(i.id!);
        expect(kid(act[0]!, "Name")?.text).toBe("wire-info");
        for (const f of TIME_FIELDS) for (const e of kids(act[0]!, f)) expect(e.text, f).toMatch(TIME);
      }
    });
    it(`${version} json: info_document.ComputingActivity (JSON rendering not shown: Deviation #17)`, async () => {
      const { r, items } = await bulk(t, version, "info", ids, "json");
      expect(r.status).toBe(201);
      expectFormat(r, "json");
      expectItemBasics(items, "json", r);
      for (const i of items) {
        expect(i["status-code"]).toBe("200");
        expect(i.id).toMatch(UUID);
        const act = (i.info_document as { ComputingActivity: Record<string, unknown> }).ComputingActivity;
        expect(act).toBeDefined();
        const states = ([] as unknown[]).concat(act.State);
        expect(states).toContain("arcrest:ACCEPTING");
        expect(act.Name).toBe("wire-info");
        for (const f of TIME_FIELDS) if (act[f] !== undefined) expect(act[f], f).toMatch(TIME);
        // Attributes of the GLUE2 element are under _attributes (Deviation #17).
        expect(act._attributes).toMatchObject({ BaseType: "Activity" });
      }
    });
  }
  for (const fmt of FORMATS) {
    it(`${fmt}: an unknown id and another user's job: 404, the id, an empty info_document (Per-item result: "empty document if not available")`, async () => {
      const { items } = await bulk(t, "1.1", "info", [MISSING, ids[0]!], fmt, { as: "bob" });
      expect(items.map((i) => i.id)).toEqual([MISSING, ids[0]]);
      for (const i of items) {
        expect(i["status-code"]).toBe("404");
        if (fmt === "json") expect(i.info_document).toBe("");
        else {
          const doc = i.info_document as XNode;
          expect(local(doc.name)).toBe("info_document");
          expect(doc.children).toEqual([]);
          expect(doc.text.trim()).toBe("");
        }
      }
    });
  }
  it("compat.strictSpecCodes: info keeps 201, the code the interface text states for it", async () => {
    const mine = await newJobs(strict, 1);
    const { r, items } = await bulk(strict, "1.1", "info", mine, "json");
    expect(r.status).toBe(201);
    expect(items[0]!["status-code"]).toBe("200");
  });
});
