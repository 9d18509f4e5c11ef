/**
 * Real-world check: a proxy made by NorduGrid's `arcproxy` from a test-PKI user credential must
 * verify, and `arcproxy -I` must agree with our reading of proxies we build ourselves.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { classifyCertificate } from "./proxy.js";
import { parseCertificates, splitPem } from "./pem.js";
import { TrustStore } from "./truststore.js";
import { verifyChain } from "./verify.js";
import { createCA, createProxy, issueUserCert, writeCADir } from "./testing.js";

const ARCPROXY = "/usr/bin/arcproxy";
const present = existsSync(ARCPROXY);
if (!present) console.warn(`[x509] ${ARCPROXY} not installed: skipping the arcproxy interoperability tests`);

describe.skipIf(!present)("arcproxy interoperability", () => {
  const work = mkdtempSync(join(tmpdir(), "x509-arcproxy-"));
  afterAll(() => rmSync(work, { recursive: true, force: true }));
  const ca = createCA({ dn: "/DC=org/DC=nordugrid/DC=ARC/O=TestCA/CN=ArcProxy Test CA" });
  const USER = "/DC=org/DC=nordugrid/DC=ARC/O=TestCA/CN=Harness Test User";
  const user = issueUserCert(ca, { dn: USER });
  const cadir = writeCADir(join(work, "certificates"), [ca]);
  const env = { ...process.env, HOME: work, X509_CERT_DIR: cadir, X509_USER_PROXY: join(work, "unused") };
  writeFileSync(join(work, "usercert.pem"), user.certPem, { mode: 0o644 });
  writeFileSync(join(work, "userkey.pem"), user.keyPem, { mode: 0o400 });

  const arcproxy = (args: string[]) => {
    const r = spawnSync(ARCPROXY, args, { env, encoding: "utf8", timeout: 30_000 });
    if (r.status !== 0) throw new Error(`arcproxy ${args.join(" ")} failed (${r.status}): ${r.stderr}${r.stdout}`);
    return r.stdout;
  };

  it("a real RFC 3820 proxy from arcproxy verifies, with the same identity arcproxy reports", async () => {
    const out = join(work, "x509up");
    arcproxy([
      "-C",
      join(work, "usercert.pem"),
      "-K",
      join(work, "userkey.pem"),
      "-P",
      out,
      "-T",
      cadir,
      "-S",
      "",
      "-c",
      "validityPeriod=1H",
    ]);
    const pem = readFileSync(out, "utf8");
    const parts = splitPem(pem);
    expect(parts.certificates).toHaveLength(2);
    expect(parts.privateKeys).toHaveLength(1);
    const [leaf] = parseCertificates(pem);
    expect(classifyCertificate(leaf!)).toMatchObject({ kind: "proxy", proxyType: "rfc3820", policy: "inheritAll" });
    const store = await TrustStore.load(cadir);
    const r = verifyChain(pem, store);
    expect(r).toMatchObject({ ok: true, identity: USER, proxies: 1, limited: false, issuerCA: ca.dn });
    const info = arcproxy(["-P", out, "-T", cadir, "-i", "identity", "-i", "subject", "-i", "validityLeft"]).trim().split("\n");
    expect(info[0]).toBe(USER);
    if (r.ok) {
      expect(r.chain[0]!.subject.length).toBeGreaterThan(0);
      const left = Number(info[2]);
      expect(Math.abs((r.notAfter.getTime() - Date.now()) / 1000 - left)).toBeLessThan(60);
    }
    // And one hour later it is expired.
    expect(verifyChain(pem, store, { now: new Date(Date.now() + 2 * 3600_000) })).toMatchObject({ ok: false, code: "EXPIRED" });
  });

  it("arcproxy reads our RFC 3820, limited and legacy proxies as we classify them", () => {
    const check = (file: string, pem: string) => {
      writeFileSync(join(work, file), pem, { mode: 0o600 });
      return arcproxy(["-P", join(work, file), "-T", cadir, "-I"]);
    };
    const rfc = check("rfc.pem", createProxy(user).filePem);
    expect(rfc).toMatch(/RFC inheritAll proxy/);
    expect(rfc).toContain(`Identity: ${USER}`);
    const limited = check("limited.pem", createProxy(user, undefined, { type: "limited" }).filePem);
    expect(limited).toMatch(/limited/i);
    expect(check("legacy.pem", createProxy(user, undefined, { type: "legacy" }).filePem)).toMatch(/Legacy Globus impersonation proxy/);
    expect(execFileSync("openssl", ["version"]).toString()).toMatch(/OpenSSL/);
  });
});
