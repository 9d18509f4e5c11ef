import { afterAll, beforeAll, describe, expect, it, inject } from "vitest";
import { startTestGateway, XRSL, xmlAll, type TestGateway } from "./harness.js";

/** Every E1–E5 resource × both versions × XML / JSON / HTML (+ HEAD where GET exists). */
let t: TestGateway;
let id: string;
beforeAll(async () => {
  t = await startTestGateway(inject("redisUrl"));
  id = (await t.request("POST", `${t.rest}/1.0/jobs?action=new`, { body: XRSL("fmt"), accept: "application/json" })).json().job[0].id;
});
afterAll(async () => t?.close());

const FORMATS = [
  ["application/xml", "application/xml"],
  ["text/xml", "application/xml"],
  ["application/json", "application/json"],
  [undefined, "text/html; charset=utf-8"],
  ["text/html", "text/html; charset=utf-8"],
] as const;

describe.each(["1.0", "1.1"])("formats under %s", (v) => {
  const gets = () => [`${t.rest}`, `${t.rest}/${v}/info`, `${t.rest}/${v}/jobs`, `${t.rest}/${v}/jobs?state=ACCEPTING`];
  it.each(FORMATS)("GET and HEAD with Accept %s", async (accept, type) => {
    for (const p of gets()) {
      const g = await t.request("GET", p, accept ? { accept } : {});
      expect(g.status, p).toBe(200);
      expect(g.headers["content-type"], p).toBe(type);
      if (type === "application/json") expect(() => g.json()).not.toThrow();
      if (type.startsWith("text/html")) expect(g.text).toMatch(/^<!DOCTYPE html>/);
      const h = await t.request("HEAD", p, accept ? { accept } : {});
      expect(h.status).toBe(200);
      expect(h.text).toBe("");
      expect(h.headers["content-length"], p).toBe(String(Buffer.byteLength(g.text)));
    }
  });
  it.each(FORMATS)("bulk actions with Accept %s", async (accept, type) => {
    for (const action of ["info", "status", "kill", "clean", "restart", "delegations"]) {
      const r = await t.request("POST", `${t.rest}/${v}/jobs?action=${action}`, {
        body: `<jobs><job><id>${id}</id></job></jobs>`,
        ...(accept ? { accept } : {}),
      });
      expect(r.status, action).toBe(201);
      expect(r.headers["content-type"]).toBe(type);
      if (type === "application/xml") expect(xmlAll(r.text, "id")[0]).toBe(id);
      if (type === "application/json") expect(r.json().job[0].id).toBe(id);
      if (type.startsWith("text/html")) expect(r.text).toContain(id);
    }
  });
  it("HTML job list links each id to its session directory", async () => {
    const r = await t.request("GET", `${t.rest}/${v}/jobs`, { accept: "text/html" });
    expect(r.text).toContain(`href="${t.rest}/${v}/jobs/${id}/session/"`);
  });
  it("error documents in every format", async () => {
    const x = await t.request("GET", `${t.rest}/${v}/jobs?state=NOPE`, { accept: "text/xml" });
    expect(x.text).toMatch(/^<error><status-code>400<\/status-code><reason>.*NOPE.*<\/reason><\/error>$/);
    const j = await t.request("GET", `${t.rest}/${v}/jobs?state=NOPE`, { accept: "application/json" });
    expect(j.json()["status-code"]).toBe("400");
    const h = await t.request("GET", `${t.rest}/${v}/jobs?state=NOPE`);
    expect(h.text).toContain("NOPE");
    const head = await t.request("HEAD", `${t.rest}/${v}/jobs?state=NOPE`, { accept: "application/json" });
    expect(head.status).toBe(400);
    expect(head.text).toBe("");
    expect(head.headers["content-length"]).toBe(String(Buffer.byteLength(j.text)));
  });
});
