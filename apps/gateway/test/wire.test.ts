import { readFileSync, rmSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { ADL, newPrefix, startTestGateway, XRSL, xmlAll, type J, type TestGateway } from "./harness.js";

let t: TestGateway;
beforeAll(async () => {
  t = await startTestGateway(inject("redisUrl"));
});
afterAll(async () => t?.close());

describe("what the ARC C++ client sends", () => {
  it("absolute-form request target, no Content-Type, Accept text/xml", async () => {
    const body = ADL("abs");
    const port = t.gw.port;
    const r = await t.raw(
      `POST https://127.0.0.1:${port}/arex/rest/1.0/jobs?action=new HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nuser-agent: ARC\r\naccept: text/xml\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: keep-alive\r\n\r\n${body}`,
    );
    expect(r.status).toBe(201);
    expect(r.head).toMatch(/content-type: application\/xml/i);
    expect(xmlAll(r.body, "status-code")).toEqual(["201"]);
    const id = xmlAll(r.body, "id")[0]!;
    const info = await t.raw(
      `POST https://127.0.0.1:${port}/arex/rest/1.0/jobs?action=info HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\naccept: text/xml\r\nContent-Length: ${`<jobs><job><id>${id}</id></job></jobs>`.length}\r\n\r\n<jobs><job><id>${id}</id></job></jobs>`,
    );
    expect(info.status).toBe(201);
    expect(info.body).toContain("<State>arcrest:ACCEPTING</State>");
    const list = await t.raw(
      `GET https://127.0.0.1:${port}/arex/rest/1.0/jobs HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\naccept: text/xml\r\n\r\n`,
    );
    expect(list.status).toBe(200);
    expect(xmlAll(list.body, "id")).toContain(id);
  });
  it("Expect: 100-continue on a submission is honoured", async () => {
    const body = XRSL("continue");
    const r = await t.request("POST", `${t.rest}/1.0/jobs?action=new`, { body, headers: { expect: "100-continue" }, accept: "text/xml" });
    expect(r.status).toBe(201);
  });
  it("whole-request errors carry the reason in the status line", async () => {
    const r = await t.request("POST", `${t.rest}/1.0/jobs?action=bogus`, { body: "<jobs/>" });
    expect(r.status).toBe(400);
    expect(r.statusMessage).toContain("bogus");
    expect(r.headers["content-type"]).toMatch(/^text\/html/);
  });
  it("X-Request-Id: generated, or a valid incoming one propagated", async () => {
    const a = await t.request("GET", `${t.rest}/1.0/jobs`);
    expect(a.headers["x-request-id"]).toMatch(/^[0-9a-f-]{36}$/);
    const b = await t.request("GET", `${t.rest}/1.0/jobs`, { headers: { "x-request-id": "abc-123" } });
    expect(b.headers["x-request-id"]).toBe("abc-123");
    const c = await t.request("GET", `${t.rest}/1.0/jobs`, { headers: { "x-request-id": "bad id <script>" } });
    expect(c.headers["x-request-id"]).not.toContain("bad");
  });
});

describe("two gateways, one Redis, one shared directory", () => {
  it("submit through one, status and kill through the other", async () => {
    const shared = { prefix: newPrefix(), stateDir: t.stateDir + "-shared", encryptionKey: Buffer.alloc(32, 7).toString("base64") };
    const a = await startTestGateway(inject("redisUrl"), {}, shared);
    const b = await startTestGateway(inject("redisUrl"), {}, shared);
    try {
      const sub = await a.request("POST", `${a.rest}/1.1/jobs?action=new&instances=2`, {
        body: XRSL("shared"),
        accept: "application/json",
      });
      const ids: string[] = sub.json().job.map((j: J) => j.id);
      expect(ids).toHaveLength(2);
      const body = JSON.stringify({ job: ids.map((id) => ({ id })) });
      const st = await b.request("POST", `${b.rest}/1.1/jobs?action=status`, {
        body,
        headers: { "content-type": "application/json" },
        accept: "application/json",
      });
      expect(st.json().job.map((j: J) => j.state)).toEqual(["ACCEPTING", "ACCEPTING"]);
      const kill = await b.request("POST", `${b.rest}/1.0/jobs?action=kill`, {
        body,
        headers: { "content-type": "application/json" },
        accept: "application/json",
      });
      expect(kill.json().job.map((j: J) => j["status-code"])).toEqual(["202", "202"]);
      // The control files written by gateway A are visible to B's ControlDir.
      expect(readFileSync(b.gw.services.control.file(ids[0]!, "description"), "utf8")).toContain("&(");
      const list = await b.request("GET", `${b.rest}/1.0/jobs`, { accept: "application/json" });
      expect(list.json().job.map((j: J) => j.id)).toEqual(expect.arrayContaining(ids));
    } finally {
      await a.close();
      await b.close();
      rmSync(shared.stateDir, { recursive: true, force: true });
    }
  });
});
