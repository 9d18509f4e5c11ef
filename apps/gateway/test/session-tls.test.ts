import { connect } from "node:tls";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { startTestGateway, type TestGateway, XRSL } from "./harness.js";

/** E6/E7 through the whole gateway (TLS, proxy-certificate identity, real app routing). */
let t: TestGateway;
let id: string;
beforeAll(async () => {
  t = await startTestGateway(inject("redisUrl"));
  const sub = await t.request("POST", `${t.rest}/1.0/jobs?action=new`, {
    body: XRSL("tls-session"),
    accept: "application/json",
    headers: { "content-type": "application/rsl" },
  });
  expect(sub.status).toBe(201);
  id = sub.json().job[0].id;
});
afterAll(async () => {
  await t?.close();
});

describe("session files over the real gateway", () => {
  it("PUT as arcsub sends it, PROPFIND in absolute form as arcget sends it, GET back", async () => {
    const session = `${t.rest}/1.0/jobs/${id}/session`;
    const put = await t.request("PUT", `${session}/in/data.txt`, { body: "payload", headers: { "if-none-match": "*" } });
    expect(put.status).toBe(200);
    const target = `https://localhost:8443${session}`;
    const dav = await t.raw(
      `PROPFIND ${target} HTTP/1.1\r\nHost: localhost:8443\r\nDepth: 1\r\nUser-Agent: ARC\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`,
    );
    expect(dav.status).toBe(207);
    expect(dav.body).toContain(`<d:href>${session}/</d:href>`);
    expect(dav.body).toContain(`<d:href>${session}/in/</d:href>`);
    const get = await t.request("GET", `${session}/in/data.txt`);
    expect(get.status).toBe(200);
    expect(get.text).toBe("payload");
    expect(get.headers["content-type"]).toBe("application/octet-stream");
  });

  it("another user sees 404 for the same job's files and diagnose items", async () => {
    const session = `${t.rest}/1.0/jobs/${id}/session`;
    expect((await t.request("GET", `${session}/in/data.txt`, { as: "bob" })).status).toBe(404);
    expect((await t.request("PROPFIND", session, { as: "bob" })).status).toBe(404);
    expect((await t.request("GET", `${t.rest}/1.0/jobs/${id}/diagnose/description`, { as: "bob" })).status).toBe(404);
  });

  it("diagnose/description returns what was submitted", async () => {
    const res = await t.request("GET", `${t.rest}/1.0/jobs/${id}/diagnose/description`);
    expect(res.status).toBe(200);
    expect(res.text).toContain("tls-session");
  });

  it("unsupported methods are 405 with Allow through the app router", async () => {
    const res = await t.request("POST", `${t.rest}/1.0/jobs/${id}/session/x`, { body: "" });
    expect(res.status).toBe(405);
    expect(res.headers.allow).toBe("GET, HEAD, PUT, DELETE, PROPFIND");
  });

  it("the server's suite order wins: AES-128-GCM over a client's AES-256-GCM-first list (TLS 1.3 and 1.2)", async () => {
    const negotiated = (o: { maxVersion?: "TLSv1.2" }) =>
      new Promise<string>((resolve, reject) => {
        const s = connect({ host: "127.0.0.1", port: t.gw.port, rejectUnauthorized: false, ...o }, () => {
          resolve(s.getCipher().name);
          s.end();
        });
        s.on("error", reject);
      });
    expect(await negotiated({})).toBe("TLS_AES_128_GCM_SHA256");
    expect(await negotiated({ maxVersion: "TLSv1.2" })).toMatch(/^ECDHE-(RSA|ECDSA)-AES128-GCM-SHA256$/);
  });
});
