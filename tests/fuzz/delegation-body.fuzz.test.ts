/**
 * Delegation PUT bodies (E8 step 2) and the PEM/CSR helpers under them: the caller's valid signed
 * proxy chain, mutated as text, with DER bytes mutated inside intact armour, truncated, shuffled or
 * repeated, many blocks, huge base64 and random PEM-looking text. Property: acceptDelegatedChain
 * answers ok (only for a chain of the caller) or one of the designed error codes with a reason,
 * and never throws; the PEM helpers throw only their designed errors.
 */
import { createPublicKey } from "node:crypto";
import { describe, expect, it } from "vitest";
import { acceptDelegatedChain, createCsr, derToPem, normalizeCsrPem, pemBlocks, pemToDer, TrustStore, type KeyPair } from "@ce/x509";
import { createCA, createProxy, issueUserCert, signCsrAsProxy, testKey } from "@ce/x509/testing";
import { fc, fuzz } from "@ce/testing/fuzz";
import { breathe, rawText, wellFormedOrBroken } from "./arbitraries.js";

const USER = "/DC=org/DC=cetest/CN=Fuzz User";
const ca = createCA({ dn: "/DC=org/DC=cetest/CN=Fuzz CA" });
const user = issueUserCert(ca, { dn: USER });
const proxy = createProxy(user);
const store = TrustStore.fromPem(ca.certPem);
const priv = testKey();
const kp: KeyPair = { privateKey: priv, publicKey: createPublicKey(priv) };
const valid = signCsrAsProxy(createCsr(kp), proxy);
const validDers = pemBlocks(valid).map((b) => b.der);

const CODES = new Set([
  "EXPIRED",
  "NOT_YET_VALID",
  "UNTRUSTED_ISSUER",
  "BAD_SIGNATURE",
  "PROXY_RULES",
  "REVOKED",
  "MALFORMED",
  "EMPTY",
  "KEY_MISMATCH",
  "IDENTITY_MISMATCH",
  "NOT_A_PROXY",
  "TOO_MANY_CERTIFICATES",
  "KEY_REJECTED",
  "NAMESPACE",
  "CRL_UNUSABLE",
  "LIMITS",
]);
const LABELS = [
  "CERTIFICATE",
  "X509 CERTIFICATE",
  "TRUSTED CERTIFICATE",
  "RSA PRIVATE KEY",
  "PRIVATE KEY",
  "CERTIFICATE REQUEST",
  "NEW CERTIFICATE REQUEST",
  "X509 CRL",
  "A",
];
const label = fc.constantFrom(...LABELS);
const b64 = fc.oneof(
  fc.base64String({ maxLength: 400 }),
  fc.uint8Array({ maxLength: 300 }).map((b) => Buffer.from(b).toString("base64")),
);

/** DER of one of the valid certificates with a few bytes changed, dropped, inserted or cut off. */
const mutatedDer = fc
  .tuple(
    fc.constantFrom(...validDers),
    fc.array(fc.record({ at: fc.nat(), op: fc.constantFrom("set", "drop", "insert", "cut"), byte: fc.integer({ min: 0, max: 255 }) }), {
      minLength: 1,
      maxLength: 4,
    }),
  )
  .map(([der, edits]) => {
    let b = Buffer.from(der);
    for (const e of edits) {
      const at = e.at % (b.length + 1);
      if (e.op === "set" && at < b.length) b[at] = e.byte;
      else if (e.op === "drop") b = Buffer.concat([b.subarray(0, at), b.subarray(at + 1)]);
      else if (e.op === "insert") b = Buffer.concat([b.subarray(0, at), Buffer.from([e.byte]), b.subarray(at)]);
      else b = b.subarray(0, at);
    }
    return b;
  });
const certBlock = fc.oneof(fc.constantFrom(...validDers), mutatedDer).map((d) => derToPem(d));
const pemLooking = fc
  .array(
    fc.oneof(
      fc.tuple(label, b64).map(([l, b]) => `-----BEGIN ${l}-----\n${b}\n-----END ${l}-----\n`),
      certBlock,
      fc.constantFrom("-----BEGIN CERTIFICATE-----\n", "-----END CERTIFICATE-----\n", "junk\r\n", "Proc-Type: 4,ENCRYPTED\n\n"),
    ),
    { maxLength: 12 },
  )
  .map((parts) => parts.join(""));
/** The chain's blocks reordered, dropped, duplicated, with mutated members mixed in. */
const chainVariant = fc
  .array(fc.oneof({ arbitrary: fc.constantFrom(...validDers), weight: 3 }, { arbitrary: mutatedDer, weight: 1 }), {
    minLength: 1,
    maxLength: 6,
  })
  .map((ders) => ders.map((d) => derToPem(d)).join(""));
const manyBlocks = fc
  .tuple(fc.integer({ min: 20, max: 300 }), fc.boolean())
  .map(([n, real]) => (real ? derToPem(validDers[0]!) : "-----BEGIN CERTIFICATE-----\nMAA=\n-----END CERTIFICATE-----\n").repeat(n));
const huge = fc
  .integer({ min: 1_000, max: 300_000 })
  .map((n) => `-----BEGIN CERTIFICATE-----\n${"MIIB".repeat(n)}\n-----END CERTIFICATE-----\n`);
const unmatched = fc.integer({ min: 100, max: 10_000 }).map((n) => "-----BEGIN CERTIFICATE-----\n".repeat(n));

const body = fc.oneof(
  { arbitrary: wellFormedOrBroken(fc.constant(valid)), weight: 4 },
  { arbitrary: chainVariant, weight: 4 },
  { arbitrary: pemLooking, weight: 4 },
  { arbitrary: manyBlocks, weight: 1 },
  { arbitrary: huge, weight: 1 },
  { arbitrary: unmatched, weight: 1 },
  { arbitrary: rawText, weight: 2 },
);

describe("fuzz: delegation bodies", () => {
  it("acceptDelegatedChain: ok for the caller, else a designed code with a reason; never throws", async () => {
    await fuzz("delegation-body", body, async (text) => {
      await breathe();
      const r = acceptDelegatedChain(text, priv, store, USER);
      if (r.ok) {
        expect(r.identity).toBe(USER);
        return;
      }
      expect(CODES.has(r.code), r.code).toBe(true);
      expect(r.reason.length).toBeGreaterThan(5);
    });
  });

  it("CSR and PEM helpers: a result or their designed Error, linear time", async () => {
    const csrText = fc.oneof(
      { arbitrary: wellFormedOrBroken(fc.constant(createCsr(kp))), weight: 4 },
      { arbitrary: pemLooking, weight: 4 },
      { arbitrary: b64, weight: 2 },
      { arbitrary: rawText, weight: 2 },
      { arbitrary: unmatched, weight: 1 },
    );
    await fuzz("pem-csr", csrText, async (text) => {
      await breathe();
      for (const f of [() => normalizeCsrPem(text), () => pemToDer(text), () => pemToDer(text, "CERTIFICATE REQUEST")]) {
        try {
          const out = f();
          expect(typeof out === "string" || Buffer.isBuffer(out)).toBe(true);
        } catch (e) {
          expect((e as Error).message).toMatch(/^(no PEM block|input is neither PEM nor base64)/);
        }
      }
    });
  });

  it("pemBlocks pairs markers exactly as the former BEGIN…END\\1 regex did", async () => {
    const REF = /-----BEGIN ([A-Z0-9 ]{1,64})-----([\s\S]*?)-----END \1-----/g;
    const small = fc
      .array(
        fc.oneof(
          label.map((l) => `-----BEGIN ${l}-----`),
          label.map((l) => `-----END ${l}-----`),
          fc.constantFrom("\n", "-", "--", "AAAA", " ", "\r\n"),
          b64,
        ),
        { maxLength: 12 },
      )
      .map((p) => p.join(""));
    await fuzz("pem-blocks-reference", small, async (text) => {
      await breathe();
      const src = text.replace(/\r\n?/g, "\n");
      const ref = [...src.matchAll(REF)].map((m) => m[1]);
      expect(pemBlocks(text).map((b) => b.label)).toEqual(ref);
    });
  });
});
