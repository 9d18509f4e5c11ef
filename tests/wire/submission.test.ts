/**
 * Wire contract, E4 "Submit jobs" (`POST <base>/jobs?action=new`) and the first row of "States and
 * transitions". Written from the interface text; see wire.ts for the conventions.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { startTestGateway, type TestGateway } from "../../apps/gateway/test/harness.js";
import { ACCEPT, FORMATS, UUID, VERSIONS, bulk, errorOf, expectFormat, expectItemBasics, itemsOf, submit, type Item } from "./wire.js";

let t: TestGateway;
beforeAll(async () => {
  t = await startTestGateway(inject("redisUrl"), {
    jobs: { runtimeEnvironments: ["ENV/PRESENT-1.0"], queues: [{ name: "main" }, { name: "short" }], defaultQueue: "main" },
  });
});
afterAll(async () => t?.close());

const ADL_NS = 'xmlns:adl="http://www.eu-emi.eu/es/2010/12/adl"';
const adl = (name: string, staging = "") =>
  `<adl:ActivityDescription ${ADL_NS}><adl:ActivityIdentification><adl:Name>${name}</adl:Name></adl:ActivityIdentification>` +
  `<adl:Application><adl:Executable><adl:Path>/bin/cat</adl:Path></adl:Executable><adl:Output>out.txt</adl:Output></adl:Application>${staging}</adl:ActivityDescription>`;
const XRSL = (extra = "") => `&(executable="/bin/echo")(arguments="hi")(stdout="out.txt")${extra}`;

/**
 * Descriptions of every kind of job a client can submit; all must be told ACCEPTING. The ones
 * whose inputs all come from the client are the jobs the service admits at creation internally
 * (docs/architecture.md, "Job flow"); that must not show on the wire.
 */
const KINDS: { kind: string; body: string }[] = [
  { kind: "xRSL, no inputs", body: XRSL() },
  { kind: "xRSL, inputs uploaded by the client", body: XRSL('(inputfiles=("in.txt" "")("data/b.dat" ""))') },
  { kind: "xRSL, an input fetched by the CE", body: XRSL('(inputfiles=("in.txt" "https://example.org/in.txt"))') },
  { kind: "ADL, no inputs", body: adl("plain") },
  {
    kind: "ADL, inputs uploaded by the client",
    body: adl("uploads", "<adl:DataStaging><adl:InputFile><adl:Name>in.txt</adl:Name></adl:InputFile></adl:DataStaging>"),
  },
];

/** Per-item result table: a successful submission item carries exactly status-code, reason, id, state. */
function expectCreated(it: Item): void {
  // E4 "Response": "A successful item has status-code 201, reason text for Created, the job id and state ACCEPTING."
  expect(it["status-code"]).toBe("201");
  expect(it.reason).toBe("Created");
  expect(it.id).toMatch(UUID); // Job table: "Job identifier (a UUID). Assigned at successful submission."
  expect(it.state).toBe("ACCEPTING");
  expect(Object.keys(it).sort()).toEqual(["id", "reason", "state", "status-code"]);
}

/** E4: "A failed item carries another status-code ... and no id or state." */
function expectFailedItem(it: Item): void {
  expect(it["status-code"]).not.toBe("201");
  expect(it.id).toBeUndefined();
  expect(it.state).toBeUndefined();
  expect((it.reason ?? "").length).toBeGreaterThan(0);
}

describe("E4 submission: a successful item says ACCEPTING (States and transitions, first move)", () => {
  for (const version of VERSIONS) {
    for (const fmt of FORMATS) {
      for (const { kind, body } of KINDS) {
        it(`${version} ${fmt}: ${kind} → 201, item 201 Created, UUID id, state ACCEPTING`, async () => {
          const { r, items } = await submit(t, version, body, fmt);
          // E4 "Response: HTTP 201; body is an array of result elements (status-code, reason, id, state)".
          expect(r.status).toBe(201);
          expectFormat(r, fmt);
          expectItemBasics(items, fmt, r);
          expect(items).toHaveLength(1);
          expectCreated(items[0]!);
        });
      }
    }
  }

  it("1.1 json: several descriptions of every kind in one body → one ACCEPTING item each, in order", async () => {
    const body = `<ActivityDescriptions>${adl("a")}${adl("b", "<adl:DataStaging><adl:InputFile><adl:Name>x</adl:Name></adl:InputFile></adl:DataStaging>")}${adl("c")}</ActivityDescriptions>`;
    const { r, items } = await submit(t, "1.1", body, "json");
    expect(r.status).toBe(201);
    expect(items).toHaveLength(3);
    items.forEach(expectCreated);
  });

  it("1.1 xml: instances=3 of a job with client uploads → three ACCEPTING items, unique ids", async () => {
    const { r, items } = await submit(t, "1.1", KINDS[1]!.body, "xml", { query: "&instances=3" });
    expect(r.status).toBe(201);
    items.forEach(expectCreated);
    // Rules for instances 2: "each with a unique id".
    expect(new Set(items.map((i) => i.id)).size).toBe(3);
  });

  // The item tells the state at submission; a status right after must name a REST state too (the job may have moved on).
  it("a status of the fresh job names a REST state", async () => {
    const { items } = await submit(t, "1.1", KINDS[1]!.body, "json");
    const st = await bulk(t, "1.1", "status", [items[0]!.id!], "json");
    expect(st.items[0]!["status-code"]).toBe("200");
    expect(["ACCEPTING", "ACCEPTED", "PREPARING"]).toContain(st.items[0]!.state);
  });
});

describe("E4 submission: several descriptions, failed items", () => {
  for (const version of VERSIONS) {
    for (const fmt of FORMATS) {
      it(`${version} ${fmt}: xRSL merged with + → items in the order of the descriptions; a failed item has no id or state`, async () => {
        const body = `+(${XRSL()})(&(executable="/bin/x")(cputime="not-a-time"))(${XRSL('(runtimeenvironment="ENV/ABSENT")')})(${XRSL()})`;
        const { r, items } = await submit(t, version, body, fmt);
        expect(r.status).toBe(201);
        expectItemBasics(items, fmt, r);
        expect(items).toHaveLength(4);
        expectCreated(items[0]!);
        expectCreated(items[3]!);
        expectFailedItem(items[1]!);
        expectFailedItem(items[2]!);
        // Deviation #20: a description that is invalid is a per-item 400 naming the problem.
        expect(items[1]!["status-code"]).toBe("400");
        expect(items[1]!.reason).toMatch(/cputime|cpu/i);
        // Errors table, 500: "per-item failure example in submission (a reason text states, for example, a missing runtime environment)".
        expect(items[2]!["status-code"]).toBe("500");
        expect(items[2]!.reason).toContain("ENV/ABSENT");
      });
      it(`${version} ${fmt}: ADL in an ActivityDescriptions element → one item per description`, async () => {
        const body = `<ActivityDescriptions>${adl("one")}${adl("two")}</ActivityDescriptions>`;
        const { r, items } = await submit(t, version, body, fmt);
        expect(r.status).toBe(201);
        expect(items).toHaveLength(2);
        items.forEach(expectCreated);
      });
    }
  }

  it("a body without Content-Type is read by its first character (Deviation #11: the ARC C++ client sends none)", async () => {
    for (const body of [XRSL(), adl("untyped")]) {
      const r = await t.request("POST", `${t.rest}/1.0/jobs?action=new`, { body, accept: ACCEPT.xml });
      expect(r.status).toBe(201);
      expectCreated(itemsOf(r, "xml")[0]!);
    }
  });

  it("a present runtime environment is accepted", async () => {
    const { items } = await submit(t, "1.0", XRSL('(runtimeenvironment="ENV/PRESENT")'), "xml");
    expectCreated(items[0]!);
  });

  it("every item failed: the overall code is still 201 (it states the outcome of the request, the items their own)", async () => {
    const { r, items } = await submit(t, "1.1", XRSL('(runtimeenvironment="ENV/ABSENT")'), "json");
    expect(r.status).toBe(201);
    expectFailedItem(items[0]!);
  });
});

describe("E4 submission: the 1.1 query parameters", () => {
  it("queue: the default for descriptions naming none; a value inside the description wins", async () => {
    const { items } = await submit(t, "1.1", `+(${XRSL()})(${XRSL('(queue="main")')})`, "json", { query: "&queue=short" });
    items.forEach(expectCreated);
    const info = await bulk(
      t,
      "1.1",
      "info",
      items.map((i) => i.id!),
      "json",
    );
    const queues = info.items.map((i) => (i.info_document as { ComputingActivity: { Queue: string } }).ComputingActivity.Queue);
    expect(queues).toEqual(["short", "main"]);
  });

  it("instances with an array of descriptions → 403 (Rules for instances 1)", async () => {
    for (const fmt of FORMATS) {
      const { r } = await submit(t, "1.1", `+(${XRSL()})(${XRSL()})`, fmt, { query: "&instances=2" });
      expect(r.status).toBe(403);
      expect(errorOf(r, fmt).code).toBe("403"); // Deviation #10: whole-request error document
    }
  });

  it("instances_min more than the server can create → 403, whole bulk cancelled (Rules for instances 3)", async () => {
    const small = await startTestGateway(inject("redisUrl"), { jobs: { maxTotal: 2 } });
    try {
      const { r } = await submit(small, "1.1", XRSL(), "json", { query: "&instances=3&instances_min=3" });
      expect(r.status).toBe(403);
      const list = await small.request("GET", `${small.rest}/1.1/jobs`, { accept: ACCEPT.json });
      expect(list.json().job).toEqual([]); // nothing was created
      // Rules for instances 2/3: "as many as its limits allow, up to instances"; at least instances_min.
      const some = await submit(small, "1.1", XRSL(), "json", { query: "&instances=3&instances_min=1" });
      expect(some.r.status).toBe(201);
      expect(some.items).toHaveLength(2);
      some.items.forEach(expectCreated);
    } finally {
      await small.close();
    }
  });

  it("instances_min equal to instances demands exactly that number (Rules for instances 4)", async () => {
    const { r, items } = await submit(t, "1.1", XRSL(), "json", { query: "&instances=2&instances_min=2" });
    expect(r.status).toBe(201);
    expect(items).toHaveLength(2);
  });

  it("1.0 has no parameters besides action (Versioning table): instances is not applied", async () => {
    const { r, items } = await submit(t, "1.0", XRSL(), "json", { query: "&instances=3" });
    expect(r.status).toBe(201);
    expect(items).toHaveLength(1);
  });
});
