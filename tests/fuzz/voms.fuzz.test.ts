/**
 * The VOMS extension is a certificate field the client controls: random bytes and byte mutations
 * of a real AC (made by voms-proxy-fake, or re-signed when it is absent) must only ever give a
 * VomsParseError or a reasoned refusal — never another exception (a 500 in the gateway), never
 * attributes from a tampered AC.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import {
  parseVomsExtension,
  TrustStore,
  verifyChain,
  verifyVomsAc,
  VomsDir,
  VomsParseError,
  vomsAttributesOf,
  type VerifyOk,
} from "@ce/x509";
import {
  acsOf,
  createCA,
  HAS_VOMS_FAKE,
  issueHostCert,
  issueUserCert,
  lscFor,
  proxyWithAcs,
  vomsProxy,
  writeCADir,
} from "@ce/x509/testing";
import { fc, fuzz } from "@ce/testing/fuzz";

const ca = createCA({ dn: "/C=XX/O=Fuzz/CN=VOMS Fuzz CA" });
const user = issueUserCert(ca, { dn: "/C=XX/O=Fuzz/CN=User" });
const server = issueHostCert(ca, { hostnames: ["voms.example.org"], dn: "/C=XX/O=Fuzz/CN=voms.example.org" });
const dir = mkdtempSync(join(tmpdir(), "fuzz-voms-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const store = TrustStore.fromPem(ca.certPem);
const vomsdir = VomsDir.fromFiles({ atlas: { "voms.example.org.lsc": lscFor(server) } });
const opts = { hostNames: ["ce.example.org"] };

describe.skipIf(!HAS_VOMS_FAKE)("fuzz: VOMS attribute certificates", () => {
  const ac = acsOf(
    vomsProxy(user, server, { vo: "atlas", fqans: ["/atlas/Role=production", "/atlas"] }, writeCADir(join(dir, "ca"), [ca])),
  )[0]!;

  // The proxy extension around one AC: SEQUENCE { SEQUENCE { AC } } (lengths in long form).
  const wrap = (der: Buffer) =>
    Buffer.concat([
      Buffer.from([0x30, 0x82, (der.length + 4) >> 8, (der.length + 4) & 0xff, 0x30, 0x82, der.length >> 8, der.length & 0xff]),
      der,
    ]);

  it("random bytes in the extension: VomsParseError or ACs, nothing else", async () => {
    await fuzz("voms: random extension", fc.uint8Array({ maxLength: 2048 }), (bytes) => {
      try {
        parseVomsExtension(Buffer.from(bytes));
      } catch (e) {
        if (!(e instanceof VomsParseError)) throw e;
      }
    });
  });

  it("the unchanged AC verifies (the property below is not vacuous)", () => {
    const chain = verifyChain(proxyWithAcs(user, [ac]).chainPem, store) as VerifyOk;
    expect(vomsAttributesOf(chain, store, vomsdir, opts).valid).toHaveLength(1);
  });

  it("byte mutations of a real AC: refused with a reason, never an exception or attributes", async () => {
    const arb = fc.record({
      edits: fc.array(fc.record({ at: fc.nat(), byte: fc.integer({ min: 0, max: 255 }) }), { minLength: 1, maxLength: 4 }),
      cut: fc.nat({ max: 32 }),
    });
    await fuzz(
      "voms: AC mutations",
      arb,
      ({ edits, cut }) => {
        const m = Buffer.from(ac.subarray(0, ac.length - cut));
        for (const e of edits) m[e.at % m.length] = e.byte;
        if (m.equals(ac)) return;
        let acs;
        try {
          acs = parseVomsExtension(wrap(m));
        } catch (e) {
          if (e instanceof VomsParseError) return;
          throw e;
        }
        for (const parsed of acs) {
          const r = verifyVomsAc(parsed, user.cert, store, vomsdir, opts);
          // Whatever verifies must carry exactly what the server signed.
          if (typeof r !== "string") expect(r.fqans).toEqual(["/atlas/Role=production", "/atlas"]);
          else expect(r.length).toBeGreaterThan(0);
        }
      },
      100,
    );
  });
});
