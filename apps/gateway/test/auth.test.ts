import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { createPki, startTestGateway, XRSL, type TestGateway } from "./harness.js";

let t: TestGateway;
beforeAll(async () => {
  t = await startTestGateway(inject("redisUrl"));
});
afterAll(async () => t?.close());

describe("X.509 client authentication", () => {
  it("RFC 3820 proxy chain (proxy + user cert): identity is the end-entity DN", async () => {
    const sub = await t.request("POST", `${t.rest}/1.0/jobs?action=new`, { body: XRSL(), accept: "application/json" });
    expect(sub.status).toBe(201);
    const id = sub.json().job[0].id as string;
    const rec = await t.gw.services.jobs.get(id);
    expect(rec?.owner).toBe(createPki().dn.alice);
  });
  it("a plain user certificate works too and is the same identity", async () => {
    const r = await t.request("GET", `${t.rest}/1.0/jobs`, { as: "aliceCert", accept: "application/json" });
    expect(r.status).toBe(200);
    expect(r.json().job.length).toBeGreaterThan(0);
  });
  it("a proxy of a proxy (three presented certificates) is the same identity", async () => {
    const { createProxy, issueUserCert } = await import("@ce/x509/testing");
    const pki = createPki();
    const user = issueUserCert(pki.ca, { dn: "/DC=org/DC=cetest/CN=Carol Tester" });
    const p2 = createProxy(createProxy(user), undefined, {});
    const { Agent, request } = await import("node:https");
    const agent = new Agent({ cert: p2.chainPem, key: p2.keyPem, rejectUnauthorized: false });
    const body = await new Promise<string>((resolve, reject) => {
      const req = request(
        {
          host: "127.0.0.1",
          port: t.gw.port,
          method: "POST",
          path: `${t.rest}/1.0/jobs?action=new`,
          agent,
          headers: { accept: "application/json" },
        },
        (res) => {
          let b = "";
          res.on("data", (d) => (b += d));
          res.on("end", () => resolve(b));
        },
      );
      req.on("error", reject);
      req.end(XRSL("carol"));
    });
    agent.destroy();
    const id = JSON.parse(body).job[0].id as string;
    expect((await t.gw.services.jobs.get(id))?.owner).toBe(user.dn);
  });
  it("keep-alive: many requests on one connection", async () => {
    for (let i = 0; i < 5; i++) expect((await t.request("GET", `${t.rest}/1.1/jobs`, { accept: "text/xml" })).status).toBe(200);
  });
  it("expired proxy → 401 naming expiry", async () => {
    const r = await t.request("GET", `${t.rest}/1.0/jobs`, { as: "expired", accept: "application/json" });
    expect(r.status).toBe(401);
    expect(r.json().reason).toMatch(/expired/i);
  });
  it("proxy from an untrusted CA → 401 naming the issuer problem", async () => {
    const r = await t.request("GET", `${t.rest}/1.0/jobs`, { as: "untrusted", accept: "application/json" });
    expect(r.status).toBe(401);
    expect(r.json().reason).toMatch(/untrusted|issuer/i);
  });
  it("no certificate → 401 with WWW-Authenticate", async () => {
    const r = await t.request("GET", `${t.rest}/1.0/jobs`, { as: "none", accept: "application/json" });
    expect(r.status).toBe(401);
    expect(r.headers["www-authenticate"]).toBeDefined();
    expect(r.json()["status-code"]).toBe("401");
  });
  it("the versions list is public: no certificate needed", async () => {
    const r = await t.request("GET", t.rest, { as: "none" });
    expect(r.status).toBe(200); // the versions list is always public (identity/index.ts isPublic)
  });
  it("a client-cert header is ignored over TLS", async () => {
    const r = await t.request("GET", `${t.rest}/1.0/jobs`, {
      as: "none",
      headers: { "x-ssl-client-cert": encodeURIComponent(createPki().creds.alice!.cert) },
    });
    expect(r.status).toBe(401);
  });
});

describe("plain-HTTP mode behind a TLS proxy", () => {
  it("believes the header only from trusted proxies", async () => {
    const { request } = await import("node:http");
    const pki = createPki();
    const mk = async (trusted: string[]) =>
      startTestGateway(inject("redisUrl"), { gateway: { plainHttp: { enabled: true, trustedProxies: trusted } } });
    const get = (port: number, headers: Record<string, string>) =>
      new Promise<number>((resolve, reject) => {
        const req = request({ host: "127.0.0.1", port, path: "/arex/rest/1.0/jobs", headers }, (res) => {
          res.resume();
          res.on("end", () => resolve(res.statusCode ?? 0));
        });
        req.on("error", reject);
        req.end();
      });
    const header = { "x-ssl-client-cert": encodeURIComponent(pki.creds.alice!.cert) };
    const trusted = await mk(["127.0.0.1"]);
    try {
      expect(trusted.origin.startsWith("http://")).toBe(true);
      expect(await get(trusted.gw.port, header)).toBe(200);
      expect(await get(trusted.gw.port, { "x-ssl-client-cert": encodeURIComponent(pki.creds.expired!.cert) })).toBe(401);
      expect(await get(trusted.gw.port, {})).toBe(401);
    } finally {
      await trusted.close();
    }
    const untrusted = await mk(["10.9.9.9"]);
    try {
      expect(await get(untrusted.gw.port, header)).toBe(401);
    } finally {
      await untrusted.close();
    }
  });
});
