import { generateKeyPairSync } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { TrustStore } from "./truststore.js";
import { verifyChain, type VerifyResult } from "./verify.js";
import { createCA, createCrl, createProxy, issueUserCert, subjectHash, testKey, victimLoopChain, writeCADir } from "./testing.js";

const CA_DN = "/C=XX/O=Grid/CN=Binding CA";
const ca = createCA({ dn: CA_DN });
const victim = issueUserCert(ca, { dn: "/C=XX/O=Grid/CN=Victim" });
const attacker = issueUserCert(ca, { dn: "/C=XX/O=Grid/CN=Attacker" });
const store = TrustStore.fromPem(ca.certPem);
const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

function fail(r: VerifyResult, code: string, re?: RegExp) {
  expect(r.ok, JSON.stringify(r)).toBe(false);
  if (!r.ok) {
    expect(r.code).toBe(code);
    if (re) expect(r.reason).toMatch(re);
  }
}

describe("identity is bound to the first (proven) certificate", () => {
  it("the [X, Y, V] loop with the victim's public certificate is refused", () => {
    const forged = victimLoopChain(victim);
    const r = verifyChain(forged.certs, store);
    expect(r.ok).toBe(false);
    if (r.ok) expect(r.identity).not.toBe(victim.dn);
    expect(verifyChain(forged.pem, store).ok).toBe(false);
  });

  it("every rotation and order of the forged bundle is refused or is the victim's own leaf", () => {
    const forged = victimLoopChain(victim);
    const [x, y, v] = forged.certs;
    for (const order of [
      [x, y, v],
      [x, v, y],
      [y, x, v],
      [y, v, x],
    ]) {
      const r = verifyChain(order as never, store);
      expect(r.ok, JSON.stringify(order.map((c) => c!.subject))).toBe(false);
    }
    // Only a path starting at V itself verifies, and that is the TLS leaf the attacker cannot prove.
    expect(verifyChain([v!, x!, y!], store)).toMatchObject({ ok: true, identity: victim.dn });
  });

  it("presented certificates off the path are ignored, never used for identity", () => {
    const p = createProxy(attacker);
    const r = verifyChain([p.cert, victim.cert, attacker.cert, ca.cert], store);
    expect(r).toMatchObject({ ok: true, identity: attacker.dn, proxies: 1 });
    if (r.ok) expect(r.chain.map((c) => c.fingerprint256)).toEqual([p.cert.fingerprint256, attacker.cert.fingerprint256]);
  });

  it("a proxy issued by someone else's certificate does not verify (every link is the real issuer)", () => {
    const p = createProxy(attacker, undefined, {});
    const fake = createProxy(victim.cert, attacker.key, {}); // victim's name, attacker's signature
    fail(verifyChain([fake.cert, victim.cert], store), "BAD_SIGNATURE");
    expect(verifyChain([p.cert, attacker.cert], store)).toMatchObject({ ok: true });
  });

  it("self-made issuer loops end with an error, not a hang", () => {
    const forged = victimLoopChain(attacker);
    const [x, y] = forged.certs;
    const t0 = Date.now();
    expect(verifyChain([x!, y!, x!, y!], store).ok).toBe(false);
    expect(Date.now() - t0).toBeLessThan(1000);
  });
});

describe("work is bounded before the chain is known to be good", () => {
  it("too many certificates, small or huge RSA keys, unsupported curves", () => {
    fail(
      verifyChain(
        Array.from({ length: 17 }, () => createProxy(attacker).cert),
        store,
      ),
      "LIMITS",
      /too many certificates/,
    );
    const weak = issueUserCert(ca, { dn: "/C=XX/O=Grid/CN=Weak", key: testKey(768, true) });
    fail(verifyChain([weak.cert], store), "KEY_REJECTED", /768-bit RSA/);
    fail(verifyChain([attacker.cert], store, { maxRsaBits: 1024 }), "KEY_REJECTED", /2048-bit RSA key \(accepted: 1024–1024\)/);
    const k1 = generateKeyPairSync("ec", { namedCurve: "secp256k1" }).privateKey;
    const ec = issueUserCert(ca, { dn: "/C=XX/O=Grid/CN=K1", key: k1 });
    fail(verifyChain([ec.cert], store), "KEY_REJECTED", /secp256k1/);
  });

  it("signature checks per chain are capped", () => {
    const p1 = createProxy(attacker);
    const p2 = createProxy(p1);
    expect(verifyChain(p2.chainPem, store)).toMatchObject({ ok: true });
    fail(verifyChain(p2.chainPem, store, { maxSignatureChecks: 2 }), "LIMITS", /signature checks/);
  });
});

async function caDir(files: Record<string, string>, crls: string[] = [], policy = {}): Promise<TrustStore> {
  const d = mkdtempSync(join(tmpdir(), "x509-eacl-"));
  dirs.push(d);
  writeCADir(d, [ca], { crls });
  const h = subjectHash(ca);
  for (const [ext, text] of Object.entries(files)) {
    if (text === "") rmSync(join(d, `${h}.${ext}`), { force: true });
    else writeFileSync(join(d, `${h}.${ext}`), text);
  }
  return TrustStore.load(d, policy);
}

describe("CA namespaces (IGTF EACL)", () => {
  const outsider = issueUserCert(ca, { dn: "/C=YY/O=Elsewhere/CN=Outsider" });

  it(".namespaces: a subject outside the CA's namespace is refused, proxies of insiders pass", async () => {
    const s = await caDir({ namespaces: `# test\nTO Issuer "${CA_DN}" \\\n  PERMIT Subject "/C=XX/O=Grid/.*"\n`, signing_policy: "" });
    expect(verifyChain(createProxy(victim).chainPem, s)).toMatchObject({ ok: true, identity: victim.dn });
    fail(verifyChain([outsider.cert], s), "NAMESPACE", /Outsider.*outside the namespace of CA.*Binding CA/);
  });

  it(".namespaces DENY wins over PERMIT, and rules for other issuers grant nothing", async () => {
    const s = await caDir({
      namespaces: `TO Issuer "${CA_DN}" PERMIT Subject "/C=XX/.*" DENY Subject "/C=XX/O=Grid/CN=Victim"\nTO Issuer "/CN=Other" PERMIT Subject ".*"\n`,
      signing_policy: "",
    });
    fail(verifyChain([victim.cert], s), "NAMESPACE", /denied by/);
    expect(verifyChain([attacker.cert], s)).toMatchObject({ ok: true });
    const other = await caDir({ namespaces: `TO Issuer "/CN=Other" PERMIT Subject ".*"\n`, signing_policy: "" });
    fail(verifyChain([attacker.cert], other), "NAMESPACE", /grants it no namespace/);
  });

  it(".signing_policy globs are used when there is no .namespaces", async () => {
    const s = await caDir({
      namespaces: "",
      signing_policy: `access_id_CA X509 '${CA_DN}'\npos_rights globus CA:sign\ncond_subjects globus '"/C=XX/O=Grid/*" "/C=ZZ/*"'\n`,
    });
    expect(verifyChain([victim.cert], s)).toMatchObject({ ok: true });
    fail(verifyChain([outsider.cert], s), "NAMESPACE");
  });

  it("an unparsable policy file refuses the CA; `require` refuses CAs without one; `ignore` skips them", async () => {
    const broken = await caDir({ namespaces: `TO Issuer "${CA_DN}" PERMIT Subject "(unclosed"\n`, signing_policy: "" });
    expect(broken.warnings.join()).toMatch(/bad regular expression/);
    fail(verifyChain([victim.cert], broken), "NAMESPACE");
    const none = await caDir({ namespaces: "", signing_policy: "" });
    expect(verifyChain([outsider.cert], none)).toMatchObject({ ok: true });
    const req = await caDir({ namespaces: "", signing_policy: "" }, [], { namespaces: "require" });
    fail(verifyChain([victim.cert], req), "NAMESPACE", /has no .namespaces/);
    const ign = await caDir({ namespaces: `TO Issuer "${CA_DN}" PERMIT Subject "/nobody"\n` }, [], { namespaces: "ignore" });
    expect(verifyChain([outsider.cert], ign)).toMatchObject({ ok: true });
  });
});

describe("CRLs fail closed", () => {
  it("a CRL past its nextUpdate refuses the CA's certificates, with a warning naming the CA", async () => {
    const old = createCrl(ca, [], { thisUpdate: new Date(Date.now() - 3 * 86_400_000), nextUpdate: new Date(Date.now() - 86_400_000) });
    const s = await caDir({}, [old]);
    expect(s.warnings.join()).toMatch(/CRL of CA .*Binding CA.* expired at/);
    fail(verifyChain(createProxy(victim).chainPem, s), "CRL_UNUSABLE", /CRL of CA .*Binding CA.* expired/);
    const lax = await caDir({}, [old], { crlExpired: "allow" });
    expect(verifyChain([victim.cert], lax)).toMatchObject({ ok: true });
  });

  it("a CRL file that does not parse refuses its CA", async () => {
    const s = await caDir({ r0: "-----BEGIN X509 CRL-----\nMIIBAAAA\n-----END X509 CRL-----\n" });
    fail(verifyChain([victim.cert], s), "CRL_UNUSABLE", /Binding CA/);
    const lax = await caDir({ r0: "garbage" }, [], { crlUnparsable: "allow" });
    expect(verifyChain([victim.cert], lax)).toMatchObject({ ok: true });
  });
});
