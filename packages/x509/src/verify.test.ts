import { generateKeyPairSync, X509Certificate } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import forge from "node-forge";
import { afterAll, describe, expect, it } from "vitest";
import { children, readTlv } from "./der.js";
import { classifyCertificate } from "./proxy.js";
import { TrustStore } from "./truststore.js";
import { verifyChain, type VerifyResult } from "./verify.js";
import { createCA, createCrl, createProxy, issueUserCert, testKey, writeCADir } from "./testing.js";

const CA_DN = "/DC=org/DC=nordugrid/DC=ARC/O=TestCA/CN=Harness CA";
const USER_DN = "/DC=org/DC=nordugrid/DC=ARC/O=TestCA/CN=Harness Test User";
const ca = createCA({ dn: CA_DN });
const user = issueUserCert(ca, { dn: USER_DN });
const store = TrustStore.fromPem(ca.certPem);

function fail(r: VerifyResult, code: string, re?: RegExp) {
  expect(r.ok, JSON.stringify(r)).toBe(false);
  if (!r.ok) {
    expect(r.code).toBe(code);
    if (re) expect(r.reason).toMatch(re);
    expect(r.reason).not.toMatch(/PRIVATE KEY/);
  }
}

describe("verifyChain: accepted chains", () => {
  it("end-entity certificate alone", () => {
    const r = verifyChain([user.cert], store);
    expect(r).toMatchObject({ ok: true, identity: USER_DN, proxies: 0, limited: false, issuerCA: CA_DN });
  });

  it("RFC 3820 proxy (PEM bundle with key, as in a proxy file)", () => {
    const p = createProxy(user, undefined, { type: "rfc3820" });
    expect(classifyCertificate(p.cert)).toMatchObject({ kind: "proxy", proxyType: "rfc3820", policy: "inheritAll" });
    expect(p.dn.startsWith(USER_DN + "/CN=")).toBe(true);
    const r = verifyChain(p.filePem, store);
    expect(r).toMatchObject({ ok: true, identity: USER_DN, proxies: 1, limited: false });
    if (r.ok) expect(r.notAfter.getTime()).toBe(new Date(p.cert.validTo).getTime());
  });

  it("proxy of a proxy, in any order", () => {
    const p1 = createProxy(user, undefined, {});
    const p2 = createProxy(p1, undefined, { lifetimeSeconds: 600 });
    expect(verifyChain(p2.chainPem, store)).toMatchObject({ ok: true, proxies: 2, identity: USER_DN });
    // The leaf (the proven certificate) comes first; the rest may come in any order.
    const shuffled = [p2.cert, user.cert, p1.cert];
    expect(verifyChain(shuffled, store)).toMatchObject({ ok: true, proxies: 2, identity: USER_DN });
  });

  it("legacy Globus proxy and legacy limited proxy", () => {
    const p = createProxy(user, undefined, { type: "legacy" });
    expect(p.dn).toBe(USER_DN + "/CN=proxy");
    expect(classifyCertificate(p.cert)).toMatchObject({ kind: "proxy", proxyType: "legacy" });
    expect(verifyChain(p.chainPem, store)).toMatchObject({ ok: true, proxies: 1, limited: false });
    const l = createProxy(p, undefined, { type: "legacy-limited" });
    expect(verifyChain(l.chainPem, store)).toMatchObject({ ok: true, proxies: 2, limited: true });
  });

  it("limited RFC proxy, limited under limited, GT3 draft proxy", () => {
    const l = createProxy(user, undefined, { type: "limited" });
    expect(verifyChain(l.chainPem, store)).toMatchObject({ ok: true, limited: true });
    const ll = createProxy(l, undefined, { type: "limited" });
    expect(verifyChain(ll.chainPem, store)).toMatchObject({ ok: true, limited: true, proxies: 2 });
    const d = createProxy(user, undefined, { type: "draft" });
    expect(classifyCertificate(d.cert)).toMatchObject({ kind: "proxy", proxyType: "draft" });
    expect(verifyChain(d.chainPem, store)).toMatchObject({ ok: true, proxies: 1 });
  });

  it("intermediate CA presented by the client, and pathLen honoured", () => {
    // Path building only: the CA policy for presented intermediates is in verify-intermediate.test.ts.
    const store = TrustStore.fromPem(ca.certPem, [], { namespaces: "ignore", crlRequired: "none" });
    const sub = createCA({ dn: "/O=Grid/CN=Sub CA", issuer: ca });
    const u = issueUserCert(sub, { dn: "/O=Grid/CN=Sub User" });
    expect(verifyChain(createProxy(u).chainPem, store)).toMatchObject({ ok: true, issuerCA: "/O=Grid/CN=Sub CA" });
    const p = createProxy(createProxy(u), undefined, {});
    const capped = createProxy(u, undefined, { pathLen: 0 });
    expect(verifyChain(p.chainPem, store)).toMatchObject({ ok: true, proxies: 2 });
    fail(verifyChain(createProxy(capped).chainPem, store), "PROXY_RULES", /pathLenConstraint 0/);
  });

  it("EC keys (P-256) for the user and the proxy", () => {
    const ec = () => generateKeyPairSync("ec", { namedCurve: "P-256" }).privateKey;
    const u = issueUserCert(ca, { dn: "/O=Grid/CN=EC User", key: ec() });
    const p = createProxy(u, undefined, { key: ec() });
    expect(verifyChain(p.chainPem, store)).toMatchObject({ ok: true, identity: "/O=Grid/CN=EC User", proxies: 1 });
  });

  it("several CAs with the same DN: the one whose key verifies is used", () => {
    const twin = createCA({ dn: CA_DN });
    const u2 = issueUserCert(twin, { dn: "/O=Grid/CN=Twin User" });
    const both = TrustStore.fromPem([ca.certPem, twin.certPem]);
    expect(verifyChain([user.cert], both)).toMatchObject({ ok: true });
    expect(verifyChain([u2.cert], both)).toMatchObject({ ok: true, identity: "/O=Grid/CN=Twin User" });
    fail(verifyChain([u2.cert], store), "BAD_SIGNATURE");
  });
});

describe("verifyChain: rejected chains", () => {
  const now = Date.now();

  it("empty and malformed input", () => {
    fail(verifyChain([], store), "EMPTY");
    fail(verifyChain("", store), "EMPTY");
    fail(verifyChain("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n", store), "MALFORMED");
  });

  it("oversized bundles and random garbage fail closed", () => {
    fail(verifyChain(Array(40).fill(user.cert), store), "LIMITS", /too many/);
    for (let i = 0; i < 50; i++) {
      const junk = Buffer.from(user.cert.raw);
      const at = Math.floor(Math.random() * junk.length);
      junk[at] = junk[at]! ^ 0xff;
      const pem = `-----BEGIN CERTIFICATE-----\n${junk.toString("base64")}\n-----END CERTIFICATE-----\n`;
      expect(verifyChain(pem, store).ok).toBe(false);
    }
  });

  it("expired proxy", () => {
    const p = createProxy(user, undefined, { notBefore: new Date(now - 7200_000), notAfter: new Date(now - 3600_000) });
    fail(verifyChain(p.chainPem, store), "EXPIRED", /expired/);
  });

  it("not-yet-valid proxy; `now` option moves the clock", () => {
    const p = createProxy(user, undefined, { notBefore: new Date(now + 3600_000), lifetimeSeconds: 3600 });
    fail(verifyChain(p.chainPem, store), "NOT_YET_VALID", /not valid before/);
    expect(verifyChain(p.chainPem, store, { now: new Date(now + 3700_000) })).toMatchObject({ ok: true });
  });

  it("expired CA", () => {
    const old = createCA({ dn: "/O=Grid/CN=Old CA", notBefore: new Date(now - 10 * 86400_000), notAfter: new Date(now - 86400_000) });
    const u = issueUserCert(old, { dn: "/O=Grid/CN=Old User", notBefore: new Date(now - 5 * 86400_000) });
    fail(verifyChain([u.cert], TrustStore.fromPem(old.certPem)), "EXPIRED", /Old CA/);
  });

  it("untrusted CA / EE-only chain from an unknown CA", () => {
    const rogue = createCA({ dn: "/O=Rogue/CN=Rogue CA" });
    const u = issueUserCert(rogue, { dn: USER_DN });
    fail(verifyChain([u.cert], store), "UNTRUSTED_ISSUER", /Rogue CA/);
    fail(verifyChain(createProxy(u).chainPem + rogue.certPem, store), "UNTRUSTED_ISSUER", /self-signed/);
  });

  it("tampered signature (one byte flipped inside the TBS)", () => {
    const flipSerial = (c: X509Certificate) => {
      const der = Buffer.from(c.raw);
      const tbs = children(der, readTlv(der, 0))[0]!;
      const serial = children(der, tbs)[1]!;
      der[serial.end - 1] = der[serial.end - 1]! ^ 0x01;
      return new X509Certificate(der);
    };
    const p = createProxy(user);
    fail(verifyChain([flipSerial(p.cert), user.cert], store), "BAD_SIGNATURE", /does not verify/);
    fail(verifyChain([flipSerial(user.cert)], store), "BAD_SIGNATURE", /Harness Test User/);
  });

  it("wrong issuer: proxy names user A but is signed by user B", () => {
    const other = issueUserCert(ca, { dn: "/O=Grid/CN=Other User", freshKey: true });
    const p = createProxy(user, undefined, { signKey: other.key });
    fail(verifyChain(p.chainPem, store), "BAD_SIGNATURE", /does not verify/);
    // A proxy of A presented with B's certificate only.
    fail(verifyChain([createProxy(user).cert, other.cert], store), "UNTRUSTED_ISSUER");
  });

  it("proxy with extra RDNs", () => {
    const p = createProxy(user, undefined, { extraRdns: "/CN=extra" });
    fail(verifyChain(p.chainPem, store), "PROXY_RULES", /exactly one CN/);
  });

  it("proxy with CA:true, keyCertSign, or subjectAltName", () => {
    fail(verifyChain(createProxy(user, undefined, { ca: true }).chainPem, store), "PROXY_RULES", /CA:true/);
    fail(
      verifyChain(createProxy(user, undefined, { keyUsage: ["digitalSignature", "keyCertSign"] }).chainPem, store),
      "PROXY_RULES",
      /keyCertSign/,
    );
    const withSan = createProxy(user, undefined, { extensions: [{ oid: "2.5.29.17", value: sanNode() }] });
    fail(verifyChain(withSan.chainPem, store), "PROXY_RULES", /AltName/);
  });

  it("legacy proxy with a wrong CN is not a proxy, so its issuer is not a CA", () => {
    fail(verifyChain(createProxy(user, undefined, { type: "legacy", cn: "proxyX" }).chainPem, store), "UNTRUSTED_ISSUER", /not a CA/);
  });

  it("limited proxy followed by an unlimited one", () => {
    const l = createProxy(user, undefined, { type: "limited" });
    fail(verifyChain(createProxy(l, undefined, { type: "rfc3820" }).chainPem, store), "PROXY_RULES", /limited/);
    const ll = createProxy(user, undefined, { type: "legacy-limited" });
    fail(verifyChain(createProxy(ll, undefined, { type: "legacy" }).chainPem, store), "PROXY_RULES", /limited/);
  });

  it("CA pathLenConstraint", () => {
    const root = createCA({ dn: "/O=Grid/CN=Root PL0", pathLen: 0 });
    const sub = createCA({ dn: "/O=Grid/CN=Sub PL", issuer: root });
    const u = issueUserCert(sub, { dn: "/O=Grid/CN=PL User" });
    fail(
      verifyChain(u.chainPem, TrustStore.fromPem(root.certPem, [], { namespaces: "ignore", crlRequired: "none" })),
      "UNTRUSTED_ISSUER",
      /pathLenConstraint 0/,
    );
    expect(verifyChain(issueUserCert(root, { dn: "/O=Grid/CN=Direct" }).chainPem, TrustStore.fromPem(root.certPem))).toMatchObject({
      ok: true,
    });
  });

  it("end-entity certificate that is a CA, and a CA without basicConstraints", () => {
    const u = issueUserCert(ca, { dn: "/O=Grid/CN=Sneaky", ca: true });
    fail(verifyChain(createProxy(u).chainPem, store), "PROXY_RULES", /is a CA/);
    const noBc = createCA({ dn: "/O=Grid/CN=NoBC", issuer: ca, noBasicConstraints: true });
    const u2 = issueUserCert(noBc, { dn: "/O=Grid/CN=Under NoBC" });
    fail(verifyChain(u2.chainPem, store), "UNTRUSTED_ISSUER", /not a CA/);
  });

  it("the signing key must not be the RSA key of a ring neighbour", () => {
    // guard for the test PKI itself: distinct certificates get distinct keys by default
    expect(
      testKey()
        .export({ type: "pkcs8", format: "der" })
        .equals(testKey().export({ type: "pkcs8", format: "der" })),
    ).toBe(false);
  });
});

describe("TrustStore directory", () => {
  const dir = mkdtempSync(join(tmpdir(), "x509-cadir-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const twin = createCA({ dn: CA_DN });
  const other = createCA({ dn: "/O=Other/CN=Other CA" });
  const revokedUser = issueUserCert(ca, { dn: "/O=Grid/CN=Revoked User" });

  it("loads the hashed layout, ignores side files, handles same-DN CAs and CRLs, reloads", async () => {
    writeCADir(dir, [ca, twin], { crls: [createCrl(ca, [revokedUser])] });
    writeFileSync(join(dir, "README.crl_url"), "http://example.org/crl\n");
    const s = await TrustStore.load(dir);
    expect(s.size).toBe(2);
    expect(s.warnings).toEqual([]);
    expect(verifyChain([user.cert], s)).toMatchObject({ ok: true });
    fail(verifyChain(createProxy(revokedUser).chainPem, s), "REVOKED", /Revoked User/);
    const u3 = issueUserCert(other, { dn: "/O=Other/CN=U3" });
    fail(verifyChain([u3.cert], s), "UNTRUSTED_ISSUER");
    writeCADir(dir, [other], { sideFiles: false });
    await s.reload();
    expect(s.size).toBe(3);
    expect(verifyChain([u3.cert], s)).toMatchObject({ ok: true });
  });

  it("a CRL signed by the wrong key makes its CA fail closed, unless the policy relaxes it", async () => {
    const d2 = mkdtempSync(join(tmpdir(), "x509-cadir-"));
    try {
      writeCADir(d2, [ca], { crls: [createCrl(twin, [revokedUser])] });
      const s = await TrustStore.load(d2);
      expect(s.warnings.join()).toMatch(/unusable: no CA in the store matches.*Harness CA.*refuses/);
      fail(verifyChain([revokedUser.cert], s), "CRL_UNUSABLE", /Harness CA/);
      fail(verifyChain([user.cert], s), "CRL_UNUSABLE");
      const lax = await TrustStore.load(d2, { crlUnparsable: "allow" });
      expect(verifyChain([revokedUser.cert], lax)).toMatchObject({ ok: true });
    } finally {
      rmSync(d2, { recursive: true, force: true });
    }
  });
});

function sanNode() {
  const A = forge.asn1;
  return A.create(A.Class.UNIVERSAL, A.Type.SEQUENCE, true, [A.create(A.Class.CONTEXT_SPECIFIC, 2, false, "x.example.org")]);
}
