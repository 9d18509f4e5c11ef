/**
 * CA policy along the whole path: an intermediate CA the client presents (not installed) is held
 * to the namespace policy of the installed CA above it and needs a CRL of its own in the directory.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { TrustStore, type TrustPolicy } from "./truststore.js";
import { verifyChain, type VerifyResult } from "./verify.js";
import { createCA, createCrl, createProxy, issueUserCert, subjectHash, writeCADir } from "./testing.js";

const ROOT_DN = "/DC=org/DC=cetest/CN=Root CA";
const SUB_DN = "/DC=org/DC=cetest/CN=Sub CA";
const root = createCA({ dn: ROOT_DN });
const sub = createCA({ dn: SUB_DN, issuer: root });
const insider = issueUserCert(sub, { dn: "/DC=org/DC=cetest/CN=Insider" });
const forged = issueUserCert(sub, { dn: "/DC=org/DC=elsewhere/CN=Someone Else" });
// Another CA under the same name as the sub-CA: its CRL must not count for the real one.
const twin = createCA({ dn: SUB_DN, issuer: root });
const subCrl = createCrl(sub, []);
/** The root's own namespace covers the sub-CA's name (and so permits it) but not "elsewhere". */
const ROOT_NS = `TO Issuer "${ROOT_DN}" PERMIT Subject "/DC=org/DC=cetest/.*"\n`;

const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

/** The root installed (not the sub-CA) with the given policy file text and CRLs. */
async function rootOnly(policy: { namespaces?: string; signing_policy?: string }, crls: string[], trust: Partial<TrustPolicy> = {}) {
  const d = mkdtempSync(join(tmpdir(), "x509-sub-"));
  dirs.push(d);
  writeCADir(d, [root], { crls, sideFiles: false });
  const h = subjectHash(root);
  for (const [ext, text] of Object.entries(policy)) writeFileSync(join(d, `${h}.${ext}`), text);
  return TrustStore.load(d, trust);
}

function fail(r: VerifyResult, code: string, re: RegExp) {
  expect(r.ok, JSON.stringify(r)).toBe(false);
  if (!r.ok) {
    expect(r.code).toBe(code);
    expect(r.reason).toMatch(re);
  }
}

describe("a presented sub-CA is bound by the namespace of the installed CA above it", () => {
  it("the sub-CA cannot issue a subject its anchor could not (enforce and require)", async () => {
    for (const namespaces of ["enforce", "require"] as const) {
      const s = await rootOnly({ namespaces: ROOT_NS }, [subCrl], { namespaces });
      fail(
        verifyChain(createProxy(forged).chainPem, s),
        "NAMESPACE",
        /Someone Else.*outside the namespace of CA .*Root CA.*governs CA .*Sub CA.*not installed/,
      );
      expect(verifyChain(createProxy(insider).chainPem, s)).toMatchObject({ ok: true, identity: insider.dn, issuerCA: SUB_DN });
    }
  });

  it("rules naming the sub-CA in the anchor's .namespaces decide what it issues", async () => {
    const ns = `${ROOT_NS}TO Issuer "${SUB_DN}" PERMIT Subject "/DC=org/DC=cetest/CN=Ins.*"\n`;
    const s = await rootOnly({ namespaces: ns }, [subCrl]);
    expect(verifyChain([insider.cert, sub.cert], s)).toMatchObject({ ok: true });
    const other = issueUserCert(sub, { dn: "/DC=org/DC=cetest/CN=Other" });
    fail(verifyChain([other.cert, sub.cert], s), "NAMESPACE", /outside the namespace of CA .*Sub CA/);
  });

  it("the same through a .signing_policy with an access_id_CA entry for the sub-CA", async () => {
    const sp =
      `access_id_CA X509 '${ROOT_DN}'\npos_rights globus CA:sign\ncond_subjects globus '"/DC=org/DC=cetest/CN=Sub*"'\n` +
      `access_id_CA X509 '${SUB_DN}'\npos_rights globus CA:sign\ncond_subjects globus '"/DC=org/DC=cetest/CN=Insider"'\n`;
    const s = await rootOnly({ signing_policy: sp }, [subCrl]);
    expect(verifyChain([insider.cert, sub.cert], s)).toMatchObject({ ok: true });
    fail(verifyChain([forged.cert, sub.cert], s), "NAMESPACE", /Someone Else/);
  });

  it("a sub-CA whose own name the anchor does not permit is refused", async () => {
    const s = await rootOnly({ namespaces: `TO Issuer "${ROOT_DN}" PERMIT Subject "/DC=org/DC=cetest/CN=Users/.*"\n` }, [subCrl]);
    fail(verifyChain([insider.cert, sub.cert], s), "NAMESPACE", /Sub CA.*outside the namespace of CA .*Root CA/);
  });

  it("an anchor without a policy file covers no presented sub-CA, unless namespaces are ignored", async () => {
    const s = await rootOnly({}, [subCrl]);
    expect(verifyChain([issueUserCert(root, { dn: "/DC=org/DC=x/CN=Direct" }).cert], s)).toMatchObject({ ok: true });
    fail(
      verifyChain([insider.cert, sub.cert], s),
      "NAMESPACE",
      /Sub CA.* is not installed and installed CA .*Root CA.* has no \.namespaces/,
    );
    const ign = await rootOnly({}, [subCrl], { namespaces: "ignore" });
    expect(verifyChain([forged.cert, sub.cert], ign)).toMatchObject({ ok: true });
  });
});

describe("a presented sub-CA needs its CRL in the directory", () => {
  it("no CRL for the sub-CA: refused by default, accepted with crlRequired none", async () => {
    const s = await rootOnly({ namespaces: ROOT_NS }, []);
    fail(verifyChain([insider.cert, sub.cert], s), "CRL_UNUSABLE", /Sub CA.* is not installed and no CRL signed by it/);
    const lax = await rootOnly({ namespaces: ROOT_NS }, [], { crlRequired: "none" });
    expect(verifyChain([insider.cert, sub.cert], lax)).toMatchObject({ ok: true });
  });

  it("the sub-CA's CRL revokes what it issued; a stale one closes it", async () => {
    const s = await rootOnly({ namespaces: ROOT_NS }, [createCrl(sub, [insider])]);
    fail(verifyChain(createProxy(insider).chainPem, s), "REVOKED", /Insider.*revoked by .*Sub CA/);
    const stale = createCrl(sub, [], { thisUpdate: new Date(Date.now() - 3 * 86_400_000), nextUpdate: new Date(Date.now() - 3_600_000) });
    const old = await rootOnly({ namespaces: ROOT_NS }, [stale]);
    fail(verifyChain([insider.cert, sub.cert], old), "CRL_UNUSABLE", /CRL of CA .*Sub CA.* expired/);
  });

  it("a CRL under the sub-CA's name signed by another key does not count", async () => {
    const s = await rootOnly({ namespaces: ROOT_NS }, [createCrl(twin, [])]);
    fail(verifyChain([insider.cert, sub.cert], s), "CRL_UNUSABLE", /no CRL signed by it/);
  });

  it("the anchor's CRL still revokes the sub-CA itself; crlRequired all needs the anchor's CRL too", async () => {
    const s = await rootOnly({ namespaces: ROOT_NS }, [subCrl, createCrl(root, [sub])]);
    fail(verifyChain([insider.cert, sub.cert], s), "REVOKED", /Sub CA.*revoked by .*Root CA/);
    const all = await rootOnly({ namespaces: ROOT_NS }, [subCrl], { crlRequired: "all" });
    fail(verifyChain([insider.cert, sub.cert], all), "CRL_UNUSABLE", /Root CA.* has no CRL/);
  });
});
