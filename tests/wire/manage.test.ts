/**
 * Wire contract: E5 `action=kill|clean|restart` as a gateway answers them (the moves that follow
 * need the JEM: lifecycle.test.ts). Written from the interface text; see wire.ts.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { startTestGateway, type TestGateway } from "../../apps/gateway/test/harness.js";
import { FORMATS, VERSIONS, bulk, expectFormat, expectItemBasics, newJobs } from "./wire.js";

let t: TestGateway;
let strict: TestGateway;
const MISSING = "00000000-0000-4000-8000-000000000000";
beforeAll(async () => {
  t = await startTestGateway(inject("redisUrl"));
  strict = await startTestGateway(inject("redisUrl"), { compat: { strictSpecCodes: true } });
});
afterAll(async () => {
  await t?.close();
  await strict?.close();
});

/** E5 table: kill, clean, restart items carry status-code, reason, id; 202 = queued for later execution. */
const ACTIONS = [
  { action: "kill", reason: "Queued for killing" },
  { action: "clean", reason: "Queued for cleaning" },
] as const;

describe("E5 kill and clean: 202 per item (request queued)", () => {
  for (const version of VERSIONS) {
    for (const fmt of FORMATS) {
      for (const { action, reason } of ACTIONS) {
        it(`${version} ${fmt} ${action}: items 202 with status-code, reason, id, in request order`, async () => {
          const ids = await newJobs(t, 2);
          const order = [ids[1]!, ids[0]!];
          const { r, items } = await bulk(t, version, action, order, fmt);
          expect(r.status).toBe(201); // Deviation #1: 201 for every bulk action
          expectFormat(r, fmt);
          expectItemBasics(items, fmt, r);
          expect(items.map((i) => i.id)).toEqual(order);
          for (const i of items) {
            // "Requests kill, clean, restart are accepted with code 202 (queued for later execution)".
            expect(i["status-code"]).toBe("202");
            expect(i.reason).toBe(reason); // A-REX's reason text (docs/interface.md E5)
            expect(Object.keys(i).sort()).toEqual(["id", "reason", "status-code"]);
          }
        });
      }
    }
  }
  for (const { action } of ACTIONS) {
    it(`${action} of an unknown id or another user's job: 404 with the id, no state`, async () => {
      const [mine] = await newJobs(t, 1);
      const { items } = await bulk(t, "1.1", action, [MISSING, mine!], "json", { as: "bob" });
      expect(items.map((i) => [i["status-code"], i.id, i.state])).toEqual([
        ["404", MISSING, undefined],
        ["404", mine, undefined],
      ]);
      // Bob's attempt did not touch alice's job.
      const st = await bulk(t, "1.1", "status", [mine!], "json");
      expect(st.items[0]!.state).toBe("ACCEPTING");
    });
  }
  it("compat.strictSpecCodes: overall 200 for kill/clean/restart, per-item codes unchanged (Deviation #1, switch)", async () => {
    const ids = await newJobs(strict, 1);
    for (const action of ["kill", "clean"]) {
      const { r, items } = await bulk(strict, "1.1", action, ids, "xml");
      expect(r.status).toBe(200);
      expect(items[0]!["status-code"]).toBe("202");
    }
  });
});

describe("E5 restart", () => {
  for (const fmt of FORMATS) {
    it(`${fmt}: a job that has not failed: per-item 409 with a reason, not 202 (Deviation #25: A-REX says 505)`, async () => {
      const ids = await newJobs(t, 1, '&(executable="/bin/echo")(rerun=2)');
      const { r, items } = await bulk(t, "1.1", "restart", ids, fmt);
      expect(r.status).toBe(201);
      expectItemBasics(items, fmt, r);
      expect(items[0]).toMatchObject({ "status-code": "409", id: ids[0] });
      expect(items[0]!.reason).toMatch(/not failed|restart/i);
    });
  }
  it("an unknown id: 404 with the id", async () => {
    const { items } = await bulk(t, "1.0", "restart", [MISSING], "xml");
    expect(items[0]).toMatchObject({ "status-code": "404", id: MISSING });
  });
});
