import { describe, expect, it } from "vitest";
import { normalizeCsrPem, parseCertificates, pemToDer, splitPem, derToPem } from "./pem.js";
import { createCA, issueUserCert } from "./testing.js";

describe("pem", () => {
  const ca = createCA({ dn: "/O=Grid/CN=PEM CA" });
  const user = issueUserCert(ca, { dn: "/O=Grid/CN=PEM User" });

  it("splits a proxy-style bundle with CRLF and leading junk", () => {
    const text = ("junk before\r\n" + user.certPem + user.keyPem + "trailing text\n" + ca.certPem).replace(/\n/g, "\r\n");
    const b = splitPem(text);
    expect(b.certificates).toHaveLength(2);
    expect(b.privateKeys).toHaveLength(1);
    expect(b.privateKeys[0]).toContain("BEGIN PRIVATE KEY");
    const certs = parseCertificates(text);
    expect(certs[0]!.fingerprint256).toBe(user.cert.fingerprint256);
    expect(certs[1]!.fingerprint256).toBe(ca.cert.fingerprint256);
  });

  it("round-trips DER and PEM", () => {
    const der = pemToDer(user.certPem);
    expect(der.equals(user.cert.raw)).toBe(true);
    expect(derToPem(der)).toBe(user.certPem);
  });

  it("normalises bare base64 CSR armour", () => {
    const b64 = Buffer.from("0\x03\x02\x01\x00", "binary").toString("base64");
    expect(normalizeCsrPem(b64)).toBe(`-----BEGIN CERTIFICATE REQUEST-----\n${b64}\n-----END CERTIFICATE REQUEST-----\n`);
    expect(normalizeCsrPem(`-----BEGIN NEW CERTIFICATE REQUEST-----\r\n${b64}\r\n-----END NEW CERTIFICATE REQUEST-----`)).toContain(
      "BEGIN CERTIFICATE REQUEST",
    );
  });

  // Finding of tests/fuzz/delegation-body.fuzz.test.ts: BEGIN…END\1 backtracked quadratically
  // (37,000 unmatched BEGINs, one 1 MiB delegation body, took ~12 s of event loop).
  it("scans unmatched BEGIN markers in linear time and still pairs the real block after them", () => {
    const text = "-----BEGIN CERTIFICATE-----\n".repeat(40_000) + user.certPem;
    const t0 = performance.now();
    const blocks = splitPem(text).certificates;
    expect(performance.now() - t0).toBeLessThan(1000);
    expect(blocks).toHaveLength(1); // the first BEGIN pairs with the only END
    expect(() => parseCertificates(user.certPem.repeat(5), 4)).toThrow(/5 certificates; at most 4/);
  });

  it("rejects garbage without echoing it", () => {
    expect(() => parseCertificates("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")).toThrow(/certificate #1/);
    expect(() => pemToDer("not base64 !!")).toThrow();
  });
});
