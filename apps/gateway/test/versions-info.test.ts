import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { startTestGateway, xmlAll, type TestGateway } from "./harness.js";
import { quietPeriod } from "@ce/testing";

let t: TestGateway;
beforeAll(async () => {
  t = await startTestGateway(inject("redisUrl"), {
    jobs: { runtimeEnvironments: ["ENV/PROXY", "APPS/HEP/ATLAS-1.2.3"], queues: [{ name: "main" }, { name: "long" }] },
  });
});
afterAll(async () => t?.close());

describe("E1 versions", () => {
  it("lists 1.0 and 1.1 ascending in XML (application/xml even for text/xml)", async () => {
    const r = await t.request("GET", `${t.rest}`, { accept: "text/xml" });
    expect(r.status).toBe(200);
    expect(r.headers["content-type"]).toBe("application/xml");
    expect(r.text).toBe("<versions><version>1.0</version><version>1.1</version></versions>");
  });
  it("JSON always an array; trailing slash and runs of slashes are the same resource", async () => {
    for (const p of [t.rest, `${t.rest}/`, t.rest.replace("/rest", "//rest")]) {
      const r = await t.request("GET", p, { accept: "application/json" });
      expect(r.status).toBe(200);
      expect(r.json()).toEqual({ version: ["1.0", "1.1"] });
    }
  });
  it("HTML without Accept", async () => {
    const r = await t.request("GET", t.rest);
    expect(r.headers["content-type"]).toMatch(/^text\/html/);
    expect(r.text).toContain("<!DOCTYPE html>");
    expect(r.text).toContain("1.1");
  });
  it("HEAD: same headers and Content-Length, no body", async () => {
    const get = await t.request("GET", t.rest, { accept: "application/json" });
    const head = await t.request("HEAD", t.rest, { accept: "application/json" });
    expect(head.status).toBe(200);
    expect(head.text).toBe("");
    expect(head.headers["content-length"]).toBe(String(Buffer.byteLength(get.text)));
    expect(head.headers["content-type"]).toBe("application/json");
  });
  it("POST/PUT/DELETE → 405 with Allow and an error document", async () => {
    for (const m of ["POST", "PUT", "DELETE"]) {
      const r = await t.request(m, t.rest, { accept: "application/json" });
      expect(r.status).toBe(405);
      expect(r.headers.allow).toBe("GET, HEAD");
      expect(r.json()).toMatchObject({ "status-code": "405" });
      expect(typeof r.json().reason).toBe("string");
    }
  });
  it("unknown version → 404 Version Not Supported; unknown functionality → 404", async () => {
    const v = await t.request("GET", `${t.rest}/1.2/info`, { accept: "text/xml" });
    expect(v.status).toBe(404);
    expect(v.statusMessage).toBe("Version Not Supported");
    expect(v.text).toBe("<error><status-code>404</status-code><reason>Version Not Supported</reason></error>");
    const f = await t.request("GET", `${t.rest}/1.0/nonexistent`, { accept: "text/xml" });
    expect(f.status).toBe(404);
  });
});

describe.each(["1.0", "1.1"])("E2 info (%s)", (v) => {
  it("GLUE2 XML with the arcrest endpoint, queues and RTEs", async () => {
    const r = await t.request("GET", `${t.rest}/${v}/info`, { accept: "text/xml" });
    expect(r.status).toBe(200);
    expect(r.headers["content-type"]).toBe("application/xml");
    expect(r.text.startsWith("<InfoRoot")).toBe(true);
    expect(r.text).toContain("<InterfaceName>org.nordugrid.arcrest</InterfaceName>");
    expect(r.text).toContain("<URL>https://localhost:8443/arex</URL>");
    expect(r.text).toContain("<HealthState>ok</HealthState>");
    expect(xmlAll(r.text, "MappingQueue")).toEqual(expect.arrayContaining(["main", "long"]));
    expect(r.text).toContain("ATLAS");
  });
  it("JSON and HEAD", async () => {
    const r = await t.request("GET", `${t.rest}/${v}/info`, { accept: "application/json" });
    expect(r.status).toBe(200);
    expect(r.json().Domains).toBeDefined();
    const h = await t.request("HEAD", `${t.rest}/${v}/info`, { accept: "application/json" });
    expect(h.status).toBe(200);
    expect(h.text).toBe("");
    expect(Number(h.headers["content-length"])).toBeGreaterThan(100);
  });
  it("schema=glue2 accepted; other values → 400 naming the value", async () => {
    expect((await t.request("GET", `${t.rest}/${v}/info?schema=glue2`, { accept: "text/xml" })).status).toBe(200);
    const r = await t.request("GET", `${t.rest}/${v}/info?schema=crr`, { accept: "application/json" });
    expect(r.status).toBe(400);
    expect(r.json().reason).toContain("crr");
  });
  it("PUT/POST/DELETE → 405 Allow: GET, HEAD", async () => {
    const r = await t.request("PUT", `${t.rest}/${v}/info`);
    expect(r.status).toBe(405);
    expect(r.headers.allow).toBe("GET, HEAD");
  });
});

describe("info serving state", () => {
  it("drain flag in Redis → draining", async () => {
    await t.gw.services.redis.hset(t.gw.services.jobs.keys.flags(), "drain", "1");
    await quietPeriod(1_100, "the info document is cached for a second: let the cached copy expire");
    const r = await t.request("GET", `${t.rest}/1.1/info`, { accept: "text/xml" });
    expect(r.text).toContain("<ServingState>draining</ServingState>");
    await t.gw.services.redis.hdel(t.gw.services.jobs.keys.flags(), "drain");
  });
});
