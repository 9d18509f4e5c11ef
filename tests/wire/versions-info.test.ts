/**
 * Wire contract: General rules (content negotiation), E1 "Supported versions", E2 "Resource
 * information", "Versioning". Written from the interface text; see wire.ts for the conventions.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { startTestGateway, type TestGateway } from "../../apps/gateway/test/harness.js";
import { ACCEPT, FORMATS, VERSIONS, errorOf, expectFormat, kid, kids, local, parseXml } from "./wire.js";

let t: TestGateway;
beforeAll(async () => {
  t = await startTestGateway(inject("redisUrl"));
});
afterAll(async () => t?.close());

describe("General rules 3: the format follows Accept", () => {
  const cases: [string | undefined, "json" | "xml" | "html"][] = [
    ["application/json", "json"],
    ["text/xml", "xml"],
    ["application/xml", "xml"],
    [undefined, "html"], // "When Accept is not given, the default is text/html"
  ];
  for (const [accept, fmt] of cases) {
    it(`Accept ${accept ?? "(none)"} → ${fmt} on versions, info, job list and delegation list`, async () => {
      for (const path of [t.rest, `${t.rest}/1.1/info`, `${t.rest}/1.1/jobs`, `${t.rest}/1.1/delegations`]) {
        const r = await t.request("GET", path, accept ? { accept } : {});
        expect(r.status, path).toBe(200);
        expectFormat(r, fmt);
        if (fmt === "json") expect(() => r.json()).not.toThrow();
        if (fmt === "xml") expect(() => parseXml(r.text)).not.toThrow();
      }
    });
  }
});

describe("General rules 2: all URL parts right of the host name are case-sensitive", () => {
  it("REST, Info, Jobs in another case → 404; action=NEW is no submission → 400 naming it (Deviation #9)", async () => {
    const mount = t.rest.slice(0, -"/rest".length);
    for (const path of [`${mount}/REST`, `${t.rest}/1.1/Info`, `${t.rest}/1.1/JOBS`]) {
      expect((await t.request("GET", path, { accept: ACCEPT.json })).status, path).toBe(404);
    }
    const r = await t.request("POST", `${t.rest}/1.1/jobs?action=NEW`, {
      body: '&(executable="/bin/echo")',
      headers: { "content-type": "application/rsl" },
      accept: ACCEPT.json,
    });
    expect(r.status).toBe(400);
    expect(errorOf(r, "json").reason).toContain("NEW");
  });
});

describe("E1 supported versions (GET <endpoint>/rest)", () => {
  it("JSON: key version holding the version strings, each <number>.<number>, 1.0 and 1.1 among them", async () => {
    const r = await t.request("GET", t.rest, { accept: ACCEPT.json });
    expect(r.status).toBe(200);
    const doc = r.json();
    expect(Object.keys(doc)).toEqual(["version"]);
    // Body shapes: "an array of strings or one string"; Deviation #6: always an array. Deviation #22: ascending.
    expect(doc.version).toEqual(["1.0", "1.1"]);
  });
  it("XML: root versions, repeated version children", async () => {
    const root = parseXml((await t.request("GET", t.rest, { accept: ACCEPT.xml })).text);
    expect(local(root.name)).toBe("versions");
    expect(kids(root, "version").map((v) => v.text)).toEqual(["1.0", "1.1"]);
    for (const v of kids(root, "version")) expect(v.text).toMatch(/^\d+\.\d+$/); // Versioning 1
  });
  it("POST, PUT, DELETE are not supported → 405 with Allow (Deviation #8)", async () => {
    for (const m of ["POST", "PUT", "DELETE"]) {
      const r = await t.request(m, t.rest, { accept: ACCEPT.json, body: "" });
      expect(r.status, m).toBe(405);
      expect(String(r.headers.allow)).toContain("GET");
      expect(errorOf(r, "json").code).toBe("405"); // Deviation #10
    }
  });
  it("a version that is not listed → 404 (Deviation #9: unknown version)", async () => {
    const r = await t.request("GET", `${t.rest}/2.0/info`, { accept: ACCEPT.json });
    expect(r.status).toBe(404);
  });
});

describe("E2 resource information (<base>/info)", () => {
  for (const version of VERSIONS) {
    it(`${version} XML: GLUE2 document with root InfoRoot containing Domains`, async () => {
      const r = await t.request("GET", `${t.rest}/${version}/info`, { accept: ACCEPT.xml });
      expect(r.status).toBe(200);
      expectFormat(r, "xml");
      const root = parseXml(r.text);
      expect(local(root.name)).toBe("InfoRoot");
      const domains = kid(root, "Domains");
      expect(domains).toBeDefined();
      // What the ARC broker walks (docs/interface.md E2): Domains/AdminDomain/Services/ComputingService/ComputingEndpoint.
      const service = kid(kid(kid(domains!, "AdminDomain")!, "Services")!, "ComputingService")!;
      const endpoints = kids(service, "ComputingEndpoint");
      const rest = endpoints.find((e) => kid(e, "InterfaceName")?.text === "org.nordugrid.arcrest");
      expect(rest).toBeDefined();
      expect(kid(rest!, "URL")?.text).not.toContain("/rest");
      expect(kids(rest!, "Capability").map((c) => c.text)).toContain("executionmanagement.jobcreation");
    });
    it(`${version} JSON: the same document (root element not emitted, Domains at the top)`, async () => {
      const r = await t.request("GET", `${t.rest}/${version}/info`, { accept: ACCEPT.json });
      expect(r.status).toBe(200);
      expectFormat(r, "json");
      expect(r.json().Domains?.AdminDomain?.Services?.ComputingService).toBeDefined();
    });
    it(`${version}: schema=glue2 is the default (same document)`, async () => {
      const plain = await t.request("GET", `${t.rest}/${version}/info`, { accept: ACCEPT.xml });
      const glue2 = await t.request("GET", `${t.rest}/${version}/info?schema=glue2`, { accept: ACCEPT.xml });
      expect(glue2.status).toBe(200);
      expect(local(parseXml(glue2.text).name)).toBe(local(parseXml(plain.text).name));
    });
    it(`${version}: HEAD is supported: the GET's status and Content-Length, no body`, async () => {
      for (const fmt of FORMATS) {
        const get = await t.request("GET", `${t.rest}/${version}/info`, { accept: ACCEPT[fmt] });
        const head = await t.request("HEAD", `${t.rest}/${version}/info`, { accept: ACCEPT[fmt] });
        expect(head.status).toBe(200);
        expect(head.text).toBe("");
        expectFormat(head, fmt);
        // Lengths may differ by a changed timestamp digit count only if the document was rebuilt; it is cached.
        expect(Math.abs(Number(head.headers["content-length"]) - Buffer.byteLength(get.text))).toBeLessThan(64);
      }
    });
    it(`${version}: PUT, POST, DELETE are not supported → 405 with Allow (Deviation #8)`, async () => {
      for (const m of ["PUT", "POST", "DELETE"]) {
        const r = await t.request(m, `${t.rest}/${version}/info`, { accept: ACCEPT.xml, body: "" });
        expect(r.status, m).toBe(405);
        expect(String(r.headers.allow)).toMatch(/GET/);
        expect(errorOf(r, "xml").code).toBe("405");
      }
    });
  }
  it("1.1: glue2 is the only supported schema; another value → 400 naming it (Deviation #9)", async () => {
    const r = await t.request("GET", `${t.rest}/1.1/info?schema=crr`, { accept: ACCEPT.json });
    expect(r.status).toBe(400);
    expect(errorOf(r, "json").reason).toContain("crr");
  });
  it("1.0: schema=crr is named by the interface but its rendering only announced: not a GLUE2 document under another name", async () => {
    const r = await t.request("GET", `${t.rest}/1.0/info?schema=crr`, { accept: ACCEPT.json });
    // Either the future rendering or a refusal naming the schema; never a silent GLUE2 answer.
    if (r.status === 200) expect(r.json().Domains).toBeUndefined();
    else expect(errorOf(r, "json").reason).toContain("crr");
  });
});
