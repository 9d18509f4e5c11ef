import { execFileSync } from "node:child_process";
import { createPrivateKey } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { acceptDelegatedChain, createCsr, KeyPool, MAX_DELEGATED_CERTS, type KeyPair } from "./delegation.js";
import { children, readTlv } from "./der.js";
import { derToPem, pemToDer, splitPem } from "./pem.js";
import { TrustStore } from "./truststore.js";
import { verifyChain } from "./verify.js";
import { createCA, createProxy, issueUserCert, signCsrAsProxy } from "./testing.js";

const ca = createCA({ dn: "/DC=org/DC=nordugrid/O=TestCA/CN=Delegation CA" });
const USER = "/DC=org/DC=nordugrid/O=TestCA/CN=Delegating User";
const user = issueUserCert(ca, { dn: USER });
const proxy = createProxy(user, undefined, { lifetimeSeconds: 3600 });
const store = TrustStore.fromPem(ca.certPem);
const pool = new KeyPool({ size: 3 });
afterAll(() => pool.close());

describe("KeyPool", () => {
  it("hands out RSA-2048 e=65537 keys instantly once warm, and refills", async () => {
    await pool.warm();
    expect(pool.available).toBe(3);
    const t0 = performance.now();
    const kp = await pool.take();
    expect(performance.now() - t0).toBeLessThan(20);
    expect(kp.privateKey.asymmetricKeyDetails).toMatchObject({ modulusLength: 2048, publicExponent: 65537n });
    const other = await pool.take();
    expect(other.publicKey.export({ type: "spki", format: "der" }).equals(kp.publicKey.export({ type: "spki", format: "der" }))).toBe(
      false,
    );
    await pool.warm();
    expect(pool.available).toBe(3);
  });

  it("generates on demand when empty, and refuses after close", async () => {
    const p = new KeyPool({ size: 0, modulusLength: 1024 });
    expect((await p.take()).privateKey.asymmetricKeyDetails?.modulusLength).toBe(1024);
    await p.close();
    await expect(p.take()).rejects.toThrow(/closed/);
  });
});

describe("createCsr", () => {
  it("is PKCS#10 version 0 with an empty subject, SHA-256, and openssl-verifiable", async () => {
    const kp = await pool.take();
    const pem = createCsr(kp);
    expect(pem).toMatch(/^-----BEGIN CERTIFICATE REQUEST-----\n/);
    const der = pemToDer(pem);
    const cri = children(der, readTlv(der, 0))[0]!;
    const [version, subject] = children(der, cri);
    expect(der.subarray(version!.start, version!.end).toString("hex")).toBe("020100"); // INTEGER 0
    expect(subject!.len).toBe(0); // empty SEQUENCE
    const out = execFileSync("openssl", ["req", "-verify", "-noout", "-text"], { input: pem, stdio: ["pipe", "pipe", "pipe"] }).toString();
    expect(out).toMatch(/Version: 1 \(0x0\)/);
    expect(out).toMatch(/sha256WithRSAEncryption/);
    expect(out).toMatch(/Public-Key: \(2048 bit\)/);
    const verified = execFileSync("openssl", ["req", "-verify", "-noout"], { input: pem, stdio: ["pipe", "pipe", "pipe"] });
    expect(verified.toString() + "").not.toMatch(/fail/i);
  });
});

describe("acceptDelegatedChain", () => {
  let kp: KeyPair;
  it("accepts the caller's own ARC-style signed proxy and builds a complete proxy file", async () => {
    kp = await pool.take();
    const body = signCsrAsProxy(createCsr(kp), proxy.filePem, proxy.key);
    expect(body).not.toMatch(/PRIVATE KEY/);
    const r = acceptDelegatedChain(body, kp.privateKey, store, USER);
    expect(r).toMatchObject({ ok: true, identity: USER, limited: false });
    if (!r.ok) return;
    const parts = splitPem(r.proxyPem);
    expect(r.proxyPem.startsWith("-----BEGIN CERTIFICATE-----\n")).toBe(true);
    expect(r.proxyPem).toMatch(/-----END CERTIFICATE-----\n-----BEGIN RSA PRIVATE KEY-----/);
    expect(parts.certificates).toHaveLength(3); // new proxy, user's proxy, user certificate
    expect(createPrivateKey(parts.privateKeys[0]!).equals(kp.privateKey)).toBe(true);
    // the stored file is itself a valid credential chain
    expect(verifyChain(r.proxyPem, store)).toMatchObject({ ok: true, identity: USER, proxies: 2 });
    expect(r.notAfter.getTime()).toBeLessThanOrEqual(new Date(proxy.cert.validTo).getTime());
  });

  it("also accepts bare-base64 CSRs signed directly with a user certificate proxy chain passed as PEM", async () => {
    const csr = createCsr(kp)
      .replace(/-----[A-Z ]+-----/g, "")
      .replace(/\n/g, "");
    const body = signCsrAsProxy(csr, proxy.cert, proxy.key, proxy.chain.slice(1));
    expect(acceptDelegatedChain(body, kp.privateKey, store, undefined)).toMatchObject({ ok: true, identity: USER });
  });

  it("rejects a chain for a different key", async () => {
    const other = await pool.take();
    const body = signCsrAsProxy(createCsr(other), proxy);
    const r = acceptDelegatedChain(body, kp.privateKey, store, USER);
    expect(r).toMatchObject({ ok: false, code: "KEY_MISMATCH" });
  });

  it("rejects another user's chain", () => {
    const mallory = issueUserCert(ca, { dn: "/DC=org/DC=nordugrid/O=TestCA/CN=Mallory" });
    const body = signCsrAsProxy(createCsr(kp), createProxy(mallory));
    const r = acceptDelegatedChain(body, kp.privateKey, store, USER);
    expect(r).toMatchObject({ ok: false, code: "IDENTITY_MISMATCH" });
    if (!r.ok) expect(r.reason).toMatch(/Mallory/);
  });

  it("rejects an expired or untrusted chain and garbage", async () => {
    const now = Date.now();
    const body = signCsrAsProxy(createCsr(kp), proxy, undefined, undefined, { lifetimeSeconds: 60 });
    expect(acceptDelegatedChain(body, kp.privateKey, store, USER, { now: new Date(now + 7200_000) })).toMatchObject({
      ok: false,
      code: "EXPIRED",
    });
    const rogue = createCA({ dn: "/DC=org/DC=nordugrid/O=TestCA/CN=Delegation CA" });
    const fake = createProxy(issueUserCert(rogue, { dn: USER }));
    expect(acceptDelegatedChain(signCsrAsProxy(createCsr(kp), fake), kp.privateKey, store, USER)).toMatchObject({
      ok: false,
      code: "BAD_SIGNATURE",
    });
    expect(acceptDelegatedChain("", kp.privateKey, store, USER)).toMatchObject({ ok: false, code: "EMPTY" });
    const bad = acceptDelegatedChain("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----", kp.privateKey, store, USER);
    expect(bad).toMatchObject({ ok: false, code: "MALFORMED" });
  });

  // Findings of tests/fuzz/delegation-body.fuzz.test.ts.
  it("a leaf whose public key Node cannot read is MALFORMED, not an exception", () => {
    const der = Buffer.from(proxy.cert.raw);
    const at = der.indexOf(Buffer.from("2a864886f70d010101", "hex")); // rsaEncryption → unknown OID
    der[at + 8] = 0x7f;
    const r = acceptDelegatedChain(derToPem(der), kp.privateKey, store, USER);
    expect(r).toMatchObject({ ok: false, code: "MALFORMED" });
    if (!r.ok) expect(r.reason).toMatch(/public key that cannot be read/);
  });

  it("more certificates than a delegation needs are refused before any is parsed", () => {
    const r = acceptDelegatedChain(proxy.cert.toString().repeat(MAX_DELEGATED_CERTS + 1), kp.privateKey, store, USER);
    expect(r).toMatchObject({ ok: false, code: "TOO_MANY_CERTIFICATES" });
    if (!r.ok) expect(r.reason).toMatch(new RegExp(`${MAX_DELEGATED_CERTS + 1} certificates; at most ${MAX_DELEGATED_CERTS}`));
  });

  it("limited issuing proxy gives a limited delegation", () => {
    const limited = createProxy(user, undefined, { type: "limited" });
    const r = acceptDelegatedChain(signCsrAsProxy(createCsr(kp), limited), kp.privateKey, store, USER);
    expect(r).toMatchObject({ ok: true, limited: true });
  });
});

describe("openssl agrees with the test PKI", () => {
  it("openssl verify -allow_proxy_certs accepts a two-level RFC 3820 proxy chain", () => {
    const dir = mkdtempSync(join(tmpdir(), "x509-ossl-"));
    try {
      const p2 = createProxy(proxy);
      writeFileSync(join(dir, "ca.pem"), ca.certPem);
      writeFileSync(join(dir, "untrusted.pem"), proxy.certPem + user.certPem);
      writeFileSync(join(dir, "leaf.pem"), p2.certPem);
      const out = execFileSync("openssl", [
        "verify",
        "-allow_proxy_certs",
        "-CAfile",
        join(dir, "ca.pem"),
        "-untrusted",
        join(dir, "untrusted.pem"),
        join(dir, "leaf.pem"),
      ]);
      expect(out.toString()).toMatch(/: OK/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
