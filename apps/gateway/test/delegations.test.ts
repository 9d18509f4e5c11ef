import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { X509Certificate } from "node:crypto";
import { SignJWT } from "jose";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { createCA, createProxy, issueUserCert, signCsrAsProxy, type TestCredential } from "@ce/x509/testing";
import { sweepDelegations } from "@ce/store";
import { createCsr, KeyPool } from "@ce/x509";
import { DelegationService } from "../src/services/delegations.js";
import { startDelegationHarness, type DelegationHarness } from "./delegation-harness.js";

const ca = createCA({ dn: "/DC=org/DC=test/CN=Deleg Test CA" });
const ALICE = "/DC=org/DC=test/CN=Alice";
const BOB = "/DC=org/DC=test/CN=Bob";
const alice = issueUserCert(ca, { dn: ALICE });
const bob = issueUserCert(ca, { dn: BOB });
const aliceProxy = createProxy(alice, undefined, { lifetimeSeconds: 6 * 3600 });
const bobProxy = createProxy(bob, undefined, { lifetimeSeconds: 6 * 3600 });
const rogueCa = createCA({ dn: "/DC=org/DC=test/CN=Rogue CA" });
const rogueAlice = createProxy(issueUserCert(rogueCa, { dn: ALICE }));
const expiredProxy = createProxy(alice, undefined, { notBefore: new Date(Date.now() - 7200_000), lifetimeSeconds: 600 });

let h: DelegationHarness;
let otherCsr: string; // a CSR for a key that belongs to no slot
beforeAll(async () => {
  h = await startDelegationHarness(inject("redisUrl"), ca.certPem);
  otherCsr = createCsr(await h.services.keyPool.take());
});
afterAll(async () => {
  await h?.close();
});

const REST = "/arex/rest";
const sign = (csr: string, signer: TestCredential = aliceProxy) => signCsrAsProxy(csr, signer);
const leafOf = (pem: string) => new X509Certificate(pem.slice(0, pem.indexOf("-----END CERTIFICATE-----") + 25));

async function newX509(version = "1.1", subject = ALICE) {
  const res = await h.call("POST", `${REST}/${version}/delegations?action=new`, { subject });
  expect(res.status).toBe(201);
  expect(res.headers.get("content-type")).toBe("application/x-pem-file");
  const location = res.headers.get("location")!;
  return { id: location.slice(location.lastIndexOf("/") + 1), csr: await res.text(), location };
}

async function jwt(exp: number, sub = "alice") {
  return new SignJWT({ sub, exp }).setProtectedHeader({ alg: "HS256" }).sign(new TextEncoder().encode("0123456789abcdef0123456789abcdef"));
}

describe("X.509 delegation", () => {
  for (const version of ["1.0", "1.1"]) {
    it(`${version}: new → PUT → get → renew → PUT → delete, jobs see the renewed proxy`, async () => {
      const { id, csr, location } = await newX509(version);
      expect(location).toBe(`${REST}/${version}/delegations/${id}`);
      expect(execFileSync("openssl", ["req", "-verify", "-noout"], { input: csr, stdio: "pipe" }).toString()).toBe("");

      // A job bound to the delegation (the JEM reads its credential through the store).
      await h.store.redis.hset(h.store.keys.job("job-a"), { id: "job-a", mainDelegation: id });
      await h.store.bind([id], ["job-a"]);

      const put = await h.call("PUT", location, { subject: ALICE, body: sign(csr) });
      expect(put.status).toBe(200);
      const first = await h.store.credential(ALICE, id);
      expect(first?.type).toBe("x509");

      const got = await h.call("POST", `${location}?action=get`, { subject: ALICE });
      expect(got.status).toBe(200);
      expect(got.headers.get("content-type")).toBe("application/x-pem-file");
      const pub = await got.text();
      expect(pub).toContain("BEGIN CERTIFICATE");
      expect(pub).not.toContain("PRIVATE KEY");
      expect(pub).toContain(aliceProxy.certPem.trim());

      const renew = await h.call("POST", `${location}?action=renew`, { subject: ALICE });
      expect(renew.status).toBe(201);
      const csr2 = await renew.text();
      expect(csr2).not.toBe(csr); // a new key
      // Until the PUT the old proxy stays in use.
      expect((await h.store.credential(ALICE, id))?.type === "x509" && first?.type === "x509").toBe(true);
      const mid = await h.store.credential(ALICE, id);
      expect(mid).toEqual(first);
      // The old CSR's chain no longer fits the pending key.
      expect((await h.call("PUT", location, { subject: ALICE, body: sign(csr) })).status).toBe(400);

      expect((await h.call("PUT", location, { subject: ALICE, body: sign(csr2) })).status).toBe(200);
      const second = await h.store.credential(ALICE, id);
      if (second?.type !== "x509" || first?.type !== "x509") throw new Error("x509 credential expected");
      expect(leafOf(second.proxyPem).fingerprint256).not.toBe(leafOf(first.proxyPem).fingerprint256);
      expect(second.proxyPem).toMatch(/BEGIN (RSA )?PRIVATE KEY/);
      expect(Number(await h.store.redis.hget(h.store.keys.job("job-a"), "delegationExpires"))).toBe(second.expires);

      const del = await h.call("POST", `${location}?action=delete`, { subject: ALICE });
      expect(del.status).toBe(202);
      expect(await h.store.credential(ALICE, id)).toBeUndefined();
      expect((await h.call("POST", `${location}?action=get`, { subject: ALICE })).status).toBe(404);
    });
  }

  it("Location is path-only with the query stripped, also for sloppy paths", async () => {
    const res = await h.call("POST", `/arex/rest/1.0/delegations/?action=new`, { subject: ALICE });
    expect(res.status).toBe(201);
    expect(res.headers.get("location")).toMatch(/^\/arex\/rest\/1\.0\/delegations\/[0-9a-f]{16}$/);
  });

  const badChains: [string, (csr: string) => string, RegExp][] = [
    ["another user's chain", (csr) => sign(csr, bobProxy), /identity mismatch/],
    ["a chain for another key", () => sign(otherCsr), /key mismatch/],
    ["a chain from an untrusted CA", (csr) => sign(csr, rogueAlice), /untrusted issuer/],
    ["an expired issuing proxy", (csr) => sign(csr, expiredProxy), /expired/],
    ["garbage", () => "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", /malformed|empty/],
    ["an empty body", () => "", /Missing payload/],
  ];
  it.each(badChains)("PUT with %s → 400 naming the check", async (_n, make, reason) => {
    const { csr, location } = await newX509();
    const res = await h.call("PUT", location, { subject: ALICE, body: make(csr) });
    expect(res.status).toBe(400);
    expect(await res.text()).toMatch(reason);
  });

  it("another user's delegation is not found, for every operation", async () => {
    const { csr, location } = await newX509();
    expect((await h.call("PUT", location, { subject: BOB, body: sign(csr, bobProxy) })).status).toBe(404);
    for (const a of ["get", "renew", "delete"])
      expect((await h.call("POST", `${location}?action=${a}`, { subject: BOB })).status).toBe(404);
    expect((await h.call("PUT", `${REST}/1.1/delegations/0123456789abcdef`, { subject: ALICE, body: "x" })).status).toBe(404);
    expect((await h.call("POST", `${REST}/1.1/delegations/not..an:id?action=get`, { subject: ALICE })).status).toBe(404);
  });

  it("refuses oversized bodies with 413", async () => {
    const { location } = await newX509();
    const big = "A".repeat(h.services.config.gateway.limits.delegationBytes + 1);
    expect((await h.call("PUT", location, { subject: ALICE, body: big })).status).toBe(413);
  });

  it("a token caller may delegate a proxy it holds (no DN to compare)", async () => {
    const { csr, location } = await newX509("1.1", "https://issuer/alice");
    const res = await h.call("PUT", location, { subject: "https://issuer/alice", scopes: "compute.create", body: sign(csr) });
    expect(res.status).toBe(200);
  });
});

const PY_SIGN = new URL("./fixtures/pyarcrest_sign.py", import.meta.url).pathname;
const havePyCrypto = spawnSync("python3", ["-c", "import cryptography"]).status === 0;

describe.skipIf(!havePyCrypto)("pyarcrest-style signing (python cryptography)", () => {
  it("our CSR loads in cryptography and a pyarcrest-signed chain is accepted", async () => {
    const dir = mkdtempSync(join(tmpdir(), "ce-pysign-"));
    try {
      const proxyFile = join(dir, "proxy.pem");
      writeFileSync(proxyFile, aliceProxy.filePem, { mode: 0o600 });
      const { csr, location, id } = await newX509("1.1");
      const signed = execFileSync("python3", [PY_SIGN, proxyFile], { input: csr }).toString();
      const res = await h.call("PUT", location, { subject: ALICE, headers: { "content-type": "application/x-pem-file" }, body: signed });
      expect([res.status, await res.text()]).toEqual([200, ""]);
      expect((await h.store.get(id, ALICE))?.expires).toBe(new Date(aliceProxy.cert.validTo).getTime());
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("JWT delegation (1.1)", () => {
  it("new (Bearer prefix) → get → renew (X-Delegation, raw) → delete", async () => {
    const t1 = await jwt(Math.floor(Date.now() / 1000) + 3600);
    const res = await h.call("POST", `${REST}/1.1/delegations?action=new&type=jwt`, {
      subject: ALICE,
      headers: { "X-Token-Delegation": `Bearer ${t1}` },
    });
    expect(res.status).toBe(201);
    const location = res.headers.get("location")!;
    const id = location.slice(location.lastIndexOf("/") + 1);
    expect(await res.text()).toBe("");
    expect((await h.store.get(id, ALICE))?.expires).toBe((Math.floor(Date.now() / 1000) + 3600) * 1000);

    // E9 get: "jwt: the stored token, application/jwt", whatever the Accept header asks for.
    for (const headers of [{}, { accept: "application/json" }, { accept: "text/html" }] as Record<string, string>[]) {
      const got = await h.call("POST", `${location}?action=get`, { subject: ALICE, headers });
      expect(got.status).toBe(200);
      expect(got.headers.get("content-type")).toBe("application/jwt");
      expect(got.headers.get("cache-control")).toBe("no-store");
      expect(await got.text()).toBe(t1);
    }
    await h.store.redis.hset(h.store.keys.job("job-j"), { id: "job-j", mainDelegation: id });
    await h.store.bind([id], ["job-j"]);
    expect(await h.store.credential(ALICE, id)).toMatchObject({ type: "jwt", token: t1 });

    const t2 = await jwt(Math.floor(Date.now() / 1000) + 7200);
    expect((await h.call("POST", `${location}?action=renew`, { subject: ALICE, headers: { "X-Delegation": t2 } })).status).toBe(200);
    expect(await h.store.credential(ALICE, id)).toMatchObject({ type: "jwt", token: t2 });
    expect(await (await h.call("POST", `${location}?action=get`, { subject: ALICE })).text()).toBe(t2);

    // arcrenew (ARC 7) sends a plain renew for token delegations: refused, the token is kept.
    expect((await h.call("POST", `${location}?action=renew`, { subject: ALICE })).status).toBe(400);
    expect(await h.store.credential(ALICE, id)).toMatchObject({ token: t2 });
    // Under 1.0 a jwt delegation does not exist.
    expect((await h.call("POST", `${REST}/1.0/delegations/${id}?action=get`, { subject: ALICE })).status).toBe(404);
    expect((await h.call("PUT", location, { subject: ALICE, body: "x" })).status).toBe(400);

    expect((await h.call("POST", `${location}?action=delete`, { subject: ALICE })).status).toBe(202);
    expect(await h.store.credential(ALICE, id)).toBeUndefined();
  });

  it("the token goes to a token caller with compute.create, never to a compute.read-only one (decisions #36)", async () => {
    const T = "https://issuer/erin";
    const secret = await new SignJWT({
      iss: "https://idp.example",
      sub: "erin",
      aud: ["https://se.example"],
      scope: "storage.modify:/ compute.create",
      exp: Math.floor(Date.now() / 1000) + 3600,
    })
      .setProtectedHeader({ alg: "HS256" })
      .sign(new TextEncoder().encode("0123456789abcdef0123456789abcdef"));
    const res = await h.call("POST", `${REST}/1.1/delegations?action=new&type=jwt`, {
      subject: T,
      scopes: "compute.create",
      headers: { "x-token-delegation": `Bearer ${secret}` },
    });
    expect(res.status).toBe(201);
    const loc = res.headers.get("location")!;
    for (const accept of [undefined, "application/json", "application/xml", "text/html"]) {
      const headers: Record<string, string> = accept ? { accept } : {};
      const refused = await h.call("POST", `${loc}?action=get`, { subject: T, scopes: "compute.read", headers });
      expect(refused.status).toBe(403);
      const text = await refused.text();
      expect(text).toMatch(/compute\.create/);
      expect(text).not.toContain(secret.split(".")[2]!); // not even the signature
      expect(refused.headers.get("www-authenticate")).toContain("insufficient_scope");
      const got = await h.call("POST", `${loc}?action=get`, { subject: T, scopes: "compute.read compute.create", headers });
      expect(got.status).toBe(200);
      expect(got.headers.get("content-type")).toBe("application/jwt");
      expect(await got.text()).toBe(secret);
    }
    // An opaque token is handed back as stored, too.
    const opaque = await h.call("POST", `${REST}/1.1/delegations?action=new&type=jwt`, {
      subject: T,
      scopes: "compute.create",
      headers: { "x-token-delegation": "opaque-secret-value" },
    });
    const o = await h.call("POST", `${opaque.headers.get("location")!}?action=get`, { subject: T, scopes: "compute.read compute.create" });
    expect(await o.text()).toBe("opaque-secret-value");
    // Another identity does not see it at all.
    expect(
      (await h.call("POST", `${loc}?action=get`, { subject: "https://issuer/frank", scopes: "compute.read compute.create" })).status,
    ).toBe(404);
  });

  it("an opaque (non-JWT) token is stored without expiry; a missing header is 400", async () => {
    const res = await h.call("POST", `${REST}/1.1/delegations?action=new&type=jwt`, {
      subject: ALICE,
      headers: { "x-token-delegation": "opaque-token-value" },
    });
    expect(res.status).toBe(201);
    const id = res.headers.get("location")!.split("/").pop()!;
    expect((await h.store.get(id, ALICE))?.expires).toBeUndefined();
    const bad = await h.call("POST", `${REST}/1.1/delegations?action=new&type=jwt`, { subject: ALICE });
    expect(bad.status).toBe(400);
    expect(await bad.text()).toMatch(/X-Token-Delegation/);
  });

  it("1.0 ignores type=jwt: an x509 CSR is issued", async () => {
    const res = await h.call("POST", `${REST}/1.0/delegations?action=new&type=jwt`, {
      subject: ALICE,
      headers: { "x-token-delegation": "t" },
    });
    expect(res.status).toBe(201);
    expect(await res.text()).toContain("CERTIFICATE REQUEST");
  });
});

describe("listing", () => {
  it("1.1 lists id and type with a type filter; 1.0 lists x509 ids only; always arrays", async () => {
    const carol = "/DC=org/DC=test/CN=Carol";
    const empty = await h.call("GET", `${REST}/1.1/delegations`, { subject: carol, headers: { accept: "application/json" } });
    expect(await empty.json()).toEqual({ delegation: [] });
    const { id: x } = await newX509("1.1", carol);
    const j = await h.call("POST", `${REST}/1.1/delegations?action=new&type=jwt`, {
      subject: carol,
      headers: { "x-token-delegation": "tok" },
    });
    const jid = j.headers.get("location")!.split("/").pop()!;
    const json = async (path: string) => (await h.call("GET", path, { subject: carol, headers: { accept: "application/json" } })).json();
    const all = (await json(`${REST}/1.1/delegations`)) as { delegation: { id: string; type: string }[] };
    expect(all.delegation.sort((a, b) => a.id.localeCompare(b.id))).toEqual(
      [
        { id: x, type: "x509" },
        { id: jid, type: "jwt" },
      ].sort((a, b) => a.id.localeCompare(b.id)),
    );
    expect(await json(`${REST}/1.1/delegations?type=jwt`)).toEqual({ delegation: [{ id: jid, type: "jwt" }] });
    expect(await json(`${REST}/1.1/delegations?type=x509`)).toEqual({ delegation: [{ id: x, type: "x509" }] });
    expect(await json(`${REST}/1.0/delegations?type=jwt`)).toEqual({ delegation: [{ id: x }] });
    const xml = await (await h.call("GET", `${REST}/1.1/delegations`, { subject: carol, headers: { accept: "text/xml" } })).text();
    expect(xml).toContain(`<delegation><id>${x}</id><type>x509</type></delegation>`);
    expect((await h.call("GET", `${REST}/1.1/delegations?type=pgp`, { subject: carol })).status).toBe(400);
    expect((await h.call("GET", `${REST}/1.1/delegations`, { subject: carol })).headers.get("content-type")).toMatch(/text\/html/);
  });
});

describe("methods, actions, scopes", () => {
  it("405 with Allow for unsupported methods; 400 for unknown or missing actions", async () => {
    const put = await h.call("PUT", `${REST}/1.1/delegations`, { subject: ALICE });
    expect(put.status).toBe(405);
    expect(put.headers.get("allow")).toBe("GET, HEAD, POST");
    const { location } = await newX509();
    for (const m of ["GET", "HEAD", "DELETE"]) {
      const res = await h.call(m, location, { subject: ALICE });
      expect(res.status).toBe(405);
      expect(res.headers.get("allow")).toBe("POST, PUT");
    }
    expect((await h.call("POST", `${location}?action=frobnicate`, { subject: ALICE })).status).toBe(400);
    expect((await h.call("POST", location, { subject: ALICE })).status).toBe(400);
    expect((await h.call("POST", `${REST}/1.1/delegations?action=get`, { subject: ALICE })).status).toBe(400);
    expect((await h.call("POST", `${REST}/1.1/delegations?action=new&type=ssh`, { subject: ALICE })).status).toBe(400);
    expect((await h.call("GET", `${location}/extra`, { subject: ALICE })).status).toBe(404);
    const head = await h.call("HEAD", `${REST}/1.1/delegations`, { subject: ALICE, headers: { accept: "application/json" } });
    expect(head.status).toBe(200);
    expect(await head.text()).toBe("");
  });

  it("token callers need compute.create / compute.read / compute.cancel", async () => {
    const T = "https://issuer/dave";
    const denied = await h.call("POST", `${REST}/1.1/delegations?action=new`, { subject: T, scopes: "compute.read" });
    expect(denied.status).toBe(403);
    expect(await denied.text()).toMatch(/compute\.create/);
    expect((await h.call("GET", `${REST}/1.1/delegations`, { subject: T, scopes: "compute.create" })).status).toBe(403);
    const ok = await h.call("POST", `${REST}/1.1/delegations?action=new`, { subject: T, scopes: "compute.create" });
    expect(ok.status).toBe(201);
    const loc = ok.headers.get("location")!;
    expect((await h.call("POST", `${loc}?action=get`, { subject: T, scopes: "compute.create" })).status).toBe(403);
    expect((await h.call("POST", `${loc}?action=delete`, { subject: T, scopes: "compute.read compute.create" })).status).toBe(403);
    expect((await h.call("POST", `${loc}?action=delete`, { subject: T, scopes: "compute.cancel" })).status).toBe(202);
  });
});

describe("strict spec codes", () => {
  it("jwt new 200, delete 200, 1.0 renew 200, 1.1 renew 201", async () => {
    const s = await startDelegationHarness(inject("redisUrl"), ca.certPem, { compat: { strictSpecCodes: true } });
    try {
      const j = await s.call("POST", `${REST}/1.1/delegations?action=new&type=jwt`, {
        subject: ALICE,
        headers: { "x-token-delegation": "t" },
      });
      expect(j.status).toBe(200);
      expect(j.headers.get("location")).toMatch(/\/delegations\/[0-9a-f]+$/);
      expect((await s.call("POST", `${j.headers.get("location")}?action=delete`, { subject: ALICE })).status).toBe(200);
      for (const [v, code] of [
        ["1.0", 200],
        ["1.1", 201],
      ] as const) {
        const n = await s.call("POST", `${REST}/${v}/delegations?action=new`, { subject: ALICE });
        expect(n.status).toBe(201);
        const r = await s.call("POST", `${n.headers.get("location")}?action=renew`, { subject: ALICE });
        expect(r.status).toBe(code);
        expect(await r.text()).toContain("CERTIFICATE REQUEST");
      }
    } finally {
      await s.close();
    }
  });
});

describe("limits", () => {
  it("a per-identity quota (403 naming it) and bounded on-demand key generation", async () => {
    const pool = new KeyPool({ size: 0, modulusLength: 1024 });
    try {
      const svc = new DelegationService({ store: h.store, keyPool: pool, trust: h.services.trust, maxPerOwner: 3, keyConcurrency: 1 });
      const who = "/DC=org/DC=test/CN=Quota";
      const made = await Promise.all([svc.newX509(who), svc.newX509(who), svc.newJwt(who, "tok")]);
      expect(new Set(made.map((m) => (typeof m === "string" ? m : m.id))).size).toBe(3);
      await expect(svc.newX509(who)).rejects.toMatchObject({ status: 403, message: expect.stringMatching(/limit is 3/) });
      await expect(svc.newJwt(who, "tok")).rejects.toMatchObject({ status: 403 });
    } finally {
      await pool.close();
    }
  });
});

describe("sweep", () => {
  it("removes abandoned CSR slots and expired delegations", async () => {
    const { id } = await newX509("1.1", "/DC=org/DC=test/CN=Sweeper");
    const res = await sweepDelegations(h.store, Date.now() + 25 * 3600_000, { pendingLifetimeSeconds: 24 * 3600 });
    expect(res.removed).toContain(id);
    expect(await h.store.get(id, "/DC=org/DC=test/CN=Sweeper")).toBeUndefined();
  });
});
