import { execFileSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import { parseDn, subjectDn, issuerDn } from "./dn.js";
import { derToPem } from "./pem.js";
import { createCA, issueUserCert } from "./testing.js";

const opensslSubject = (pem: string) =>
  execFileSync("openssl", ["x509", "-noout", "-subject", "-nameopt", "compat"], { input: pem })
    .toString()
    .trim()
    .replace(/^subject=/, "");

describe("one-line DN", () => {
  const ca = createCA({ dn: "/DC=org/DC=nordugrid/DC=ARC/O=TestCA/CN=Test CA" });
  const cases = [
    "/DC=org/DC=nordugrid/DC=ARC/O=TestCA/CN=Harness Test User",
    "/C=SE/ST=Skane/L=Lund/O=Lund University/OU=Physics/CN=Jane Doe/emailAddress=jane@example.org",
    "/DC=org/DC=example/UID=jdoe/CN=host\\/ce.example.org",
    "/O=Grid/OU=a+CN=multi valued",
    "/O=Grid/CN=plus\\+sign",
    "/O=Grid/CN=J\\xC3\\xB6rg M\\xC3\\xBCller",
    "/O=Grid/serialNumber=1234/title=Dr/GN=Jane/SN=Doe/CN=x",
  ];
  for (const dn of cases) {
    it(`matches openssl -nameopt compat for ${dn}`, () => {
      const u = issueUserCert(ca, { dn });
      const ours = subjectDn(u.cert);
      expect(ours).toBe(opensslSubject(u.certPem));
      expect(ours).toBe(dn);
      expect(issuerDn(u.certPem)).toBe("/DC=org/DC=nordugrid/DC=ARC/O=TestCA/CN=Test CA");
    });
  }

  it("keeps the encoded RDN order (not Node's display order)", () => {
    const u = issueUserCert(ca, { dn: "/CN=first/O=second/DC=third" });
    expect(subjectDn(u.cert)).toBe("/CN=first/O=second/DC=third");
    expect(opensslSubject(derToPem(u.cert.raw))).toBe("/CN=first/O=second/DC=third");
  });

  it("parses escapes and multi-valued RDNs", () => {
    expect(parseDn("/O=a\\/b+OU=c/CN=\\xC3\\xA9")).toEqual([
      [
        { type: "O", oid: "2.5.4.10", value: "a/b" },
        { type: "OU", oid: "2.5.4.11", value: "c" },
      ],
      [{ type: "CN", oid: "2.5.4.3", value: "é" }],
    ]);
  });
});
