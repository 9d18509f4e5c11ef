import { X509Certificate } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { splitPem } from "./pem.js";
import { TrustStore } from "./truststore.js";
import { verifyChain, type VerifyOk } from "./verify.js";
import { VomsDir, parseLsc } from "./voms-dir.js";
import { vomsAttributesOf } from "./voms-verify.js";
import { OctetString } from "@peculiar/asn1-schema";
import { Extension, Extensions } from "@peculiar/asn1-x509";
import { VOMS_OID } from "./voms.js";
import {
  acsOf,
  createCA,
  createProxy,
  HAS_VOMS_FAKE,
  issueHostCert,
  issueUserCert,
  lscFor,
  proxyWithAcs,
  resignAc,
  targetsExtension,
  vomsProxy,
  writeCADir,
} from "./testing.js";

const ca = createCA({ dn: "/C=XX/O=Grid/CN=VOMS Test CA" });
const rogueCa = createCA({ dn: "/C=XX/O=Grid/CN=Rogue CA" });
const alice = issueUserCert(ca, { dn: "/C=XX/O=Grid/CN=Alice" });
const bob = issueUserCert(ca, { dn: "/C=XX/O=Grid/CN=Bob" });
const server = issueHostCert(ca, { hostnames: ["voms.example.org"], dn: "/C=XX/O=Grid/CN=voms.example.org" });
const impostor = issueHostCert(ca, { hostnames: ["voms.example.org"], dn: "/C=XX/O=Grid/CN=impostor.example.org" });
const rogueServer = issueHostCert(rogueCa, { hostnames: ["voms.example.org"], dn: "/C=XX/O=Grid/CN=voms.example.org" });
const dir = mkdtempSync(join(tmpdir(), "x509-voms-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const caDir = writeCADir(join(dir, "ca"), [ca, rogueCa]);
const store = TrustStore.fromPem(ca.certPem);
const vomsdir = VomsDir.fromFiles({ atlas: { "voms.example.org.lsc": lscFor(server) } });
const opts = { hostNames: ["ce.example.org"] };

function chainOf(pem: string): VerifyOk {
  const r = verifyChain(pem, store);
  if (!r.ok) throw new Error(r.reason);
  return r;
}

describe.skipIf(!HAS_VOMS_FAKE)("VOMS ACs from voms-proxy-fake", () => {
  it("reads and verifies the FQANs (primary first); the identity stays the DN", () => {
    const pem = vomsProxy(alice, server, { vo: "atlas", fqans: ["/atlas/Role=production", "/atlas", "/atlas/lcg1"] }, caDir);
    const chain = chainOf(pem);
    expect(chain.identity).toBe(alice.dn);
    const r = vomsAttributesOf(chain, store, vomsdir, opts);
    expect(r.invalid).toEqual([]);
    expect(r.valid).toEqual([
      expect.objectContaining({ vo: "atlas", fqans: ["/atlas/Role=production", "/atlas", "/atlas/lcg1"], issuer: server.dn }),
    ]);
  });

  it("a proxy of the VOMS proxy inherits its attributes (end-entity-most AC)", () => {
    const pem = vomsProxy(alice, server, { vo: "atlas", fqans: ["/atlas"] }, caDir);
    const [cert, ...rest] = splitPem(pem).certificates;
    const key = pem
      .slice(pem.indexOf("-----BEGIN"), pem.length)
      .match(/-----BEGIN (RSA )?PRIVATE KEY-----[\s\S]+?-----END (RSA )?PRIVATE KEY-----\n?/)![0];
    const child = createProxy(cert! + rest.join(""), key);
    const chain = chainOf(child.certPem + cert! + rest.join(""));
    expect(chain.proxies).toBe(2);
    expect(vomsAttributesOf(chain, store, vomsdir, opts).valid[0]?.fqans).toEqual(["/atlas"]);
  });

  it("an expired AC is invalid, with a reason", () => {
    const pem = vomsProxy(alice, server, { vo: "atlas", fqans: ["/atlas"], acHours: 1, pastAcSeconds: 3 * 3600 }, caDir);
    const r = vomsAttributesOf(chainOf(pem), store, vomsdir, opts);
    expect(r.valid).toEqual([]);
    expect(r.invalid[0]).toMatch(/expired at/);
  });

  it("an AC signed by a host not in the .lsc, or by an untrusted CA, is invalid", () => {
    const a = vomsAttributesOf(chainOf(vomsProxy(alice, impostor, { vo: "atlas", fqans: ["/atlas"] }, caDir)), store, vomsdir, opts);
    expect(a.invalid[0]).toMatch(/not its issuer's|not listed in the .lsc/);
    const b = vomsAttributesOf(chainOf(vomsProxy(alice, rogueServer, { vo: "atlas", fqans: ["/atlas"] }, caDir)), store, vomsdir, opts);
    expect(b.invalid[0]).toMatch(/signing certificate does not verify/);
    const none = VomsDir.fromFiles({});
    const c = vomsAttributesOf(chainOf(vomsProxy(alice, server, { vo: "atlas", fqans: ["/atlas"] }, caDir)), store, none, opts);
    expect(c.invalid[0]).toMatch(/no .lsc file for atlas\/voms.example.org/);
  });

  it("an AC moved onto another user's chain fails the holder check", () => {
    const pem = vomsProxy(alice, server, { vo: "atlas", fqans: ["/atlas"] }, caDir);
    const chain = chainOf(pem);
    const stolen: VerifyOk = { ...chain, endEntity: bob.cert };
    expect(vomsAttributesOf(stolen, store, vomsdir, opts).invalid[0]).toMatch(/issued for another certificate/);
  });

  // Debian's voms-proxy-fake writes no targets, so targeted and crafted ACs are re-signed from a real one.
  const realAc = () => acsOf(vomsProxy(alice, server, { vo: "atlas", fqans: ["/atlas", "/atlas/Role=production"] }, caDir))[0]!;
  const attrsWith = (ac: Buffer) => vomsAttributesOf(chainOf(proxyWithAcs(alice, [ac]).chainPem), store, vomsdir, opts);

  it("a targeted AC must name this CE", () => {
    const other = resignAc(realAc(), server, (i) => i.extensions!.push(targetsExtension(["other.example.org"])));
    expect(attrsWith(other).invalid[0]).toMatch(/targeted at other.example.org, not at this CE/);
    const ours = resignAc(realAc(), server, (i) => i.extensions!.push(targetsExtension(["other.example.org", "ce.example.org"])));
    expect(attrsWith(ours)).toMatchObject({ invalid: [], valid: [{ vo: "atlas", fqans: ["/atlas", "/atlas/Role=production"] }] });
  });

  it("re-signing with another key, an unknown critical extension, or a holder serial of another certificate is refused", () => {
    expect(attrsWith(realAc()).valid).toHaveLength(1); // the unchanged AC in our own proxy verifies
    expect(attrsWith(resignAc(realAc(), impostor, () => undefined)).invalid[0]).toMatch(/bad signature/);
    const crit = resignAc(realAc(), server, (i) =>
      i.extensions!.push(new Extension({ extnID: "1.2.3.4.5", critical: true, extnValue: new OctetString(Buffer.from([5, 0])) })),
    );
    expect(attrsWith(crit).invalid[0]).toMatch(/unsupported critical extension 1.2.3.4.5/);
    const moved = resignAc(realAc(), server, (i) => {
      i.holder.baseCertificateID!.serial = Uint8Array.from(Buffer.from(bob.cert.serialNumber, "hex")).buffer;
    });
    expect(attrsWith(moved).invalid[0]).toMatch(/issued for another certificate/);
  });

  it("an FQAN of another VO in an AC signed by this VO's server is refused (the signer is trusted per VO)", () => {
    const pem = vomsProxy(alice, server, { vo: "atlas", fqans: ["/atlas", "/cms/Role=production"] }, caDir);
    expect(vomsAttributesOf(chainOf(pem), store, vomsdir, opts).invalid[0]).toMatch(
      /FQAN "\/cms\/Role=production" is outside the VO "atlas"/,
    );
  });

  it("an AC without a certificate list verifies against a vomsdir certificate only", () => {
    const bare = resignAc(realAc(), server, (i) => {
      i.extensions = new Extensions(i.extensions!.filter((e) => e.extnID !== VOMS_OID.certList));
    });
    expect(attrsWith(bare).invalid[0]).toMatch(/carries no signing certificate/);
    const withCert = VomsDir.fromFiles({ atlas: { "voms.pem": server.certPem } });
    expect(vomsAttributesOf(chainOf(proxyWithAcs(alice, [bare]).chainPem), store, withCert, opts).valid).toHaveLength(1);
  });

  it("an installed server certificate works without an .lsc (older vomsdir layout)", () => {
    const d = VomsDir.fromFiles({ atlas: { "voms.pem": server.certPem } });
    const r = vomsAttributesOf(chainOf(vomsProxy(alice, server, { vo: "atlas", fqans: ["/atlas"] }, caDir)), store, d, opts);
    expect(r.valid).toHaveLength(1);
  });
});

describe("lsc files", () => {
  it("parses chains separated by dashes, with comments", () => {
    expect(parseLsc("# c\n/C=XX/CN=a\n/C=XX/CN=ca\n------ NEXT CHAIN ------\n/C=YY/CN=b\n/C=YY/CN=ca2\n")).toEqual([
      ["/C=XX/CN=a", "/C=XX/CN=ca"],
      ["/C=YY/CN=b", "/C=YY/CN=ca2"],
    ]);
  });
  it("a chain without VOMS extension has no attributes", () => {
    const p = createProxy(alice);
    expect(vomsAttributesOf(chainOf(p.chainPem), store, vomsdir, opts)).toEqual({ valid: [], invalid: [] });
    void X509Certificate;
  });
});
