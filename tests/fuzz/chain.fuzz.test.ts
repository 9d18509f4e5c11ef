/**
 * The certificate-chain verifier under random and mutated input: random sequences drawn from a
 * pool of real, forged, looping and unrelated certificates (duplicates, wrong orders), and byte
 * mutations of their DER. Properties: never throws, answers fast, and when it accepts, the path
 * starts at the first certificate given and the identity is a real end-entity of the trusted CA
 * that the first certificate descends from.
 */
import { X509Certificate } from "node:crypto";
import { describe, expect, it } from "vitest";
import { TrustStore, verifyChain } from "@ce/x509";
import { createCA, createProxy, issueUserCert, victimLoopChain } from "@ce/x509/testing";
import { fc, fuzz } from "@ce/testing/fuzz";

const ca = createCA({ dn: "/C=XX/O=Fuzz/CN=Fuzz CA" });
const rogue = createCA({ dn: "/C=XX/O=Fuzz/CN=Rogue CA" });
const alice = issueUserCert(ca, { dn: "/C=XX/O=Fuzz/CN=Alice" });
const bob = issueUserCert(ca, { dn: "/C=XX/O=Fuzz/CN=Bob" });
const fakeAlice = issueUserCert(rogue, { dn: "/C=XX/O=Fuzz/CN=Alice" });
const p1 = createProxy(alice);
const p2 = createProxy(p1);
const limited = createProxy(bob, undefined, { type: "limited" });
const bad = createProxy(bob, undefined, { signKey: alice.key });
const forged = victimLoopChain(alice);
const store = TrustStore.fromPem(ca.certPem);

const pool: X509Certificate[] = [
  ca.cert,
  rogue.cert,
  alice.cert,
  bob.cert,
  fakeAlice.cert,
  p1.cert,
  p2.cert,
  limited.cert,
  bad.cert,
  ...forged.certs,
];
/** Which end-entity each certificate genuinely descends from (absent: none under the trusted CA). */
const realOwner = new Map<string, string>([
  [alice.cert.fingerprint256, alice.dn],
  [p1.cert.fingerprint256, alice.dn],
  [p2.cert.fingerprint256, alice.dn],
  [bob.cert.fingerprint256, bob.dn],
  [limited.cert.fingerprint256, bob.dn],
]);

function mutate(der: Buffer, edits: { at: number; byte: number }[], cut: number): Buffer {
  const b = Buffer.from(der.subarray(0, Math.max(1, der.length - cut)));
  for (const e of edits) b[e.at % b.length] = e.byte;
  return b;
}

describe("chain verifier fuzz", () => {
  it("random sequences of real, forged and unrelated certificates", async () => {
    await fuzz("x509 chain: sequences", fc.array(fc.integer({ min: 0, max: pool.length - 1 }), { minLength: 0, maxLength: 20 }), (idx) => {
      const certs = idx.map((i) => pool[i]!);
      const t0 = performance.now();
      const r = verifyChain(certs, store);
      expect(performance.now() - t0).toBeLessThan(2000);
      if (r.ok) {
        expect(r.chain[0]!.fingerprint256).toBe(certs[0]!.fingerprint256);
        expect(r.identity).toBe(realOwner.get(certs[0]!.fingerprint256));
      }
    });
  });

  it("byte mutations of the DER of each link", async () => {
    const arb = fc.record({
      idx: fc.array(fc.integer({ min: 0, max: pool.length - 1 }), { minLength: 1, maxLength: 6 }),
      edits: fc.array(fc.record({ at: fc.nat(), byte: fc.integer({ min: 0, max: 255 }) }), { maxLength: 4 }),
      cut: fc.nat({ max: 64 }),
      which: fc.nat(),
    });
    await fuzz("x509 chain: DER mutations", arb, ({ idx, edits, cut, which }) => {
      const ders: Buffer[] = idx.map((i) => Buffer.from(pool[i]!.raw));
      const k = which % ders.length;
      ders[k] = mutate(ders[k]!, edits, cut);
      const pem = ders.map((d) => `-----BEGIN CERTIFICATE-----\n${d.toString("base64")}\n-----END CERTIFICATE-----\n`).join("");
      const r = verifyChain(pem, store);
      if (r.ok) {
        // Only an untouched genuine first certificate may yield an identity.
        const first = new X509Certificate(ders[0]!);
        expect(r.identity).toBe(realOwner.get(first.fingerprint256));
      }
    });
  });

  it("arbitrary text in PEM armour never throws", async () => {
    await fuzz("x509 chain: PEM text", fc.string({ maxLength: 4000 }), (s) => {
      const r = verifyChain(`-----BEGIN CERTIFICATE-----\n${s}\n-----END CERTIFICATE-----\n` + s, store);
      expect(r.ok).toBe(false);
    });
  });
});
