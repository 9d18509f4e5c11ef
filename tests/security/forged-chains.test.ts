/**
 * Identity forgery through the real gateway: over direct TLS and over the trusted-proxy header.
 * Identity must come only from the certificate whose key was proven; a trusted CA may only vouch
 * for its namespace; a stale CRL closes its CA; a limited proxy cannot start jobs.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { request as httpRequest } from "node:http";
import { request as httpsRequest } from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import {
  createCA,
  createCrl,
  createProxy,
  issueUserCert,
  subjectHash,
  victimLoopChain,
  writeCADir,
  type TestCredential,
} from "@ce/x509/testing";
import { createPki, startTestGateway, XRSL, type TestGateway } from "../../apps/gateway/test/harness.js";

interface Res {
  status: number;
  text: string;
}

/** One HTTPS request with an arbitrary client chain and key (no agent reuse: a fresh handshake). */
function tlsGet(t: TestGateway, path: string, cert: string, key: string, method = "GET", body?: string): Promise<Res> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest(
      {
        host: "127.0.0.1",
        port: t.gw.port,
        path,
        method,
        cert,
        key,
        rejectUnauthorized: false,
        agent: false,
        headers: {
          accept: "application/json",
          ...(body ? { "content-type": "application/rsl", "content-length": Buffer.byteLength(body) } : {}),
        },
      },
      (res) => {
        let text = "";
        res.on("data", (d: Buffer) => (text += d.toString()));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, text }));
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

function headerGet(t: TestGateway, path: string, pem: string): Promise<Res> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      { host: "127.0.0.1", port: t.gw.port, path, headers: { accept: "application/json", "x-ssl-client-cert": encodeURIComponent(pem) } },
      (res) => {
        let text = "";
        res.on("data", (d: Buffer) => (text += d.toString()));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, text }));
      },
    );
    req.on("error", reject);
    req.end();
  });
}

const pki = createPki();
describe("forged chains", () => {
  let tls: TestGateway;
  let plain: TestGateway;
  const mallory = issueUserCert(pki.ca, { dn: "/DC=org/DC=cetest/CN=Mallory" });
  const malloryProxy = createProxy(mallory);
  let victim: TestCredential;
  let aliceJob: string;

  beforeAll(async () => {
    tls = await startTestGateway(inject("redisUrl"));
    plain = await startTestGateway(
      inject("redisUrl"),
      { gateway: { plainHttp: { enabled: true, trustedProxies: ["127.0.0.1"] } } },
      {
        prefix: tls.prefix,
        stateDir: tls.stateDir,
        encryptionKey: tls.config.delegations.encryptionKey!,
      },
    );
    const { X509Certificate } = await import("node:crypto");
    const alicePem = pki.creds.aliceCert!.cert;
    victim = { dn: pki.dn.alice, cert: new X509Certificate(alicePem), certPem: alicePem } as TestCredential;
    const r = await tls.request("POST", `${tls.rest}/1.0/jobs?action=new`, {
      body: XRSL("victim-job"),
      headers: { "content-type": "application/rsl" },
      accept: "application/json",
    });
    expect(r.status).toBe(201);
    aliceJob = r.json().job.id;
  });
  afterAll(async () => {
    await plain?.close();
    await tls?.close();
  });

  it("[X, Y, V] through the trusted-proxy header is refused, never the victim", async () => {
    const forged = victimLoopChain(victim);
    const r = await headerGet(plain, `${plain.rest}/1.0/jobs`, forged.pem);
    expect(r.status).toBe(401);
    expect(r.text).toMatch(/Client certificate rejected/);
    expect(r.text).not.toContain(aliceJob);
  });

  it("[X, Y, V] over direct TLS is refused (handshake failure or 401), never the victim", async () => {
    const forged = victimLoopChain(victim);
    const outcome = await tlsGet(tls, `${tls.rest}/1.0/jobs`, forged.pem, forged.keyPem).catch((e: Error) => ({
      status: -1,
      text: e.message,
    }));
    expect([401, -1]).toContain(outcome.status);
    expect(outcome.text).not.toContain(aliceJob);
  });

  it("the victim's certificate appended to the attacker's own chain changes nothing: the attacker is the attacker", async () => {
    const pem = malloryProxy.chainPem + victim.certPem;
    for (const r of [
      await tlsGet(tls, `${tls.rest}/1.0/jobs`, pem, malloryProxy.keyPem),
      await headerGet(plain, `${plain.rest}/1.0/jobs`, pem),
    ]) {
      expect(r.status).toBe(200);
      expect(r.text).not.toContain(aliceJob);
    }
    const info = await tlsGet(tls, `${tls.rest}/1.0/jobs/${aliceJob}/diagnose/status`, pem, malloryProxy.keyPem);
    expect(info.status).toBe(404);
  });

  it("a chain longer than the limit is refused with a reason naming it", async () => {
    let p = malloryProxy;
    for (let i = 0; i < 17; i++) p = createProxy(p);
    // Over TLS: through the proxy header such a chain is already refused as too large a header (431).
    const r = await tlsGet(tls, `${tls.rest}/1.0/jobs`, p.chainPem, p.keyPem);
    expect(r.status).toBe(401);
    expect(r.text).toMatch(/too many certificates presented \(\d+, at most 16\)/);
  });

  it("a limited proxy may read but may not submit or restart", async () => {
    const limited = createProxy(mallory, undefined, { type: "limited" });
    const list = await tlsGet(tls, `${tls.rest}/1.0/jobs`, limited.chainPem, limited.keyPem);
    expect(list.status).toBe(200);
    const sub = await tlsGet(tls, `${tls.rest}/1.0/jobs?action=new`, limited.chainPem, limited.keyPem, "POST", XRSL("limited"));
    expect(sub.status).toBe(403);
    expect(sub.text).toMatch(/limited proxy may not submit jobs/);
    const full = await tlsGet(tls, `${tls.rest}/1.0/jobs?action=new`, malloryProxy.chainPem, malloryProxy.keyPem, "POST", XRSL("full"));
    expect(full.status).toBe(201);
  });
});

describe("CA policy through the gateway", () => {
  const dirs: string[] = [];
  afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));
  const caDir = (edit: (dir: string, hash: string) => void, crls: string[] = []) => {
    const d = mkdtempSync(join(tmpdir(), "ce-sec-ca-"));
    dirs.push(d);
    writeCADir(d, [pki.ca], { crls });
    edit(d, subjectHash(pki.ca));
    return d;
  };

  it("a CA vouching for a subject outside its .namespaces is refused", async () => {
    const dir = caDir((d, h) =>
      writeFileSync(join(d, `${h}.namespaces`), `TO Issuer "${pki.ca.dn}" PERMIT Subject "/DC=org/DC=cetest/CN=Bob.*"\n`),
    );
    const t = await startTestGateway(inject("redisUrl"), { auth: { caDir: dir } });
    try {
      const alice = await t.request("GET", `${t.rest}/1.0/jobs`, { as: "alice", accept: "application/json" });
      expect(alice.status).toBe(401);
      expect(alice.text).toMatch(/outside the namespace of CA/);
      expect((await t.request("GET", `${t.rest}/1.0/jobs`, { as: "bob" })).status).toBe(200);
    } finally {
      await t.close();
    }
  });

  it("a CRL past its nextUpdate closes its CA (and a setting reopens it)", async () => {
    const stale = createCrl(pki.ca, [], {
      thisUpdate: new Date(Date.now() - 3 * 86_400_000),
      nextUpdate: new Date(Date.now() - 3_600_000),
    });
    const dir = caDir(() => undefined, [stale]);
    const t = await startTestGateway(inject("redisUrl"), { auth: { caDir: dir } });
    try {
      const r = await t.request("GET", `${t.rest}/1.0/jobs`, { as: "alice", accept: "application/json" });
      expect(r.status).toBe(401);
      expect(r.text).toMatch(/CRL of CA .*CE Test CA.* expired/);
    } finally {
      await t.close();
    }
    const lax = await startTestGateway(inject("redisUrl"), { auth: { caDir: dir, x509: { crlExpired: "allow" } } });
    try {
      expect((await lax.request("GET", `${lax.rest}/1.0/jobs`, { as: "alice" })).status).toBe(200);
    } finally {
      await lax.close();
    }
  });

  it("a sub-CA the client presents cannot vouch for a name outside its anchor's namespace (enforce and require)", async () => {
    // The sub-CA's own name is inside the installed root's namespace; it is not installed itself.
    const sub = createCA({ dn: "/DC=org/DC=cetest/CN=Sub CA", issuer: pki.ca });
    const forged = createProxy(issueUserCert(sub, { dn: "/DC=org/DC=elsewhere/CN=Someone Else" }));
    const insider = createProxy(issueUserCert(sub, { dn: "/DC=org/DC=cetest/CN=Sub Insider" }));
    const dir = caDir(
      (d, h) => writeFileSync(join(d, `${h}.namespaces`), `TO Issuer "${pki.ca.dn}" PERMIT Subject "/DC=org/DC=cetest/.*"\n`),
      [createCrl(sub, [])],
    );
    for (const namespaces of ["enforce", "require"] as const) {
      const t = await startTestGateway(inject("redisUrl"), { auth: { caDir: dir, x509: { namespaces } } });
      try {
        const r = await tlsGet(t, `${t.rest}/1.0/jobs`, forged.chainPem, forged.keyPem);
        expect(r.status).toBe(401);
        expect(r.text).toMatch(/Someone Else.*outside the namespace of CA .*governs CA .*Sub CA.*not installed/);
        expect((await tlsGet(t, `${t.rest}/1.0/jobs`, insider.chainPem, insider.keyPem)).status).toBe(200);
      } finally {
        await t.close();
      }
    }
  });
});
