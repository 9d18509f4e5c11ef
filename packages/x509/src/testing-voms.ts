/**
 * Real VOMS proxies for tests (`@ce/x509/testing`), made by Debian's `voms-proxy-fake`
 * (voms-clients): an RFC 3820 proxy with an AC signed by the VOMS "server" credential given,
 * no VOMS server needed. `voms-proxy-info -all -file <proxy>` shows what the CE must find.
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sign, X509Certificate } from "node:crypto";
import { AsnConvert, AsnParser, OctetString } from "@peculiar/asn1-schema";
import { Extension } from "@peculiar/asn1-x509";
import { AttributeCertificate, type AttributeCertificateInfo } from "@peculiar/asn1-x509-attr";
import { certInfo } from "./cert.js";
import { children, readTlv, slice } from "./der.js";
import { issuerDn } from "./dn.js";
import { splitPem } from "./pem.js";
import { ctx, der, parse, seq, type TestCredential } from "./testing-pki.js";
import { createProxy } from "./testing-proxy.js";
import { VOMS_OID } from "./voms.js";

export const HAS_VOMS_FAKE = existsSync("/usr/bin/voms-proxy-fake");

export interface VomsProxyOptions {
  vo: string;
  fqans: string[];
  /** VOMS server `host:port` (the policy authority; its host names the .lsc file). */
  uri?: string;
  /** Target host names written into the AC. */
  targets?: string[];
  /** AC lifetime in hours (default 12). */
  acHours?: number;
  /** Start the AC this many seconds in the past (with acHours small: an expired AC). */
  pastAcSeconds?: number;
  /** A limited proxy. */
  limited?: boolean;
}

/**
 * A VOMS proxy of `user` whose AC is signed by `server`. Returns the proxy file (certificate,
 * key, chain) as PEM. `holder` makes the AC for another certificate (negative tests).
 */
export function vomsProxy(user: TestCredential, server: TestCredential, o: VomsProxyOptions, caDir: string): string {
  const d = mkdtempSync(join(tmpdir(), "ce-voms-"));
  try {
    const w = (n: string, s: string, mode = 0o644) => (writeFileSync(join(d, n), s, { mode }), join(d, n));
    const args = [
      "-cert",
      w("usercert.pem", user.certPem),
      "-key",
      w("userkey.pem", user.keyPem, 0o600),
      "-hostcert",
      w("hostcert.pem", server.certPem),
      "-hostkey",
      w("hostkey.pem", server.keyPem, 0o600),
      "-certdir",
      caDir,
      "-voms",
      o.vo,
      "-uri",
      o.uri ?? "voms.example.org:15000",
      "-rfc",
      "-q",
      "-out",
      join(d, "proxy.pem"),
      "-vomslife",
      String(o.acHours ?? 12),
      "-hours",
      "12",
    ];
    for (const f of o.fqans) args.push("-fqan", f);
    for (const t of o.targets ?? []) args.push("-target", t);
    if (o.pastAcSeconds) args.push("-pastac", String(o.pastAcSeconds));
    if (o.limited) args.push("-limited");
    try {
      execFileSync("voms-proxy-fake", args, { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, RANDFILE: join(d, ".rnd") } });
    } catch (e) {
      const err = e as { stderr?: Buffer; stdout?: Buffer };
      throw new Error(`voms-proxy-fake failed: ${err.stderr?.toString() ?? ""} ${err.stdout?.toString() ?? ""}`.trim());
    }
    return readFileSync(join(d, "proxy.pem"), "utf8");
  } finally {
    rmSync(d, { recursive: true, force: true });
  }
}

/** The `.lsc` text for a VOMS server credential issued directly by a CA. */
export function lscFor(server: TestCredential): string {
  return `${server.dn}\n${issuerDn(server.cert)}\n`;
}

/** The DER of every AC in a VOMS proxy's first certificate. */
export function acsOf(proxyPem: string): Buffer[] {
  const first = new X509Certificate(splitPem(proxyPem).certificates[0]!);
  const ext = certInfo(first).extensions.get(VOMS_OID.acSeq);
  if (!ext) return [];
  const der = Buffer.from(ext.value, "binary");
  return children(der, readTlv(der, 0)).flatMap((s) => children(der, s).map((t) => Buffer.from(slice(der, t))));
}

/**
 * Re-sign an AC after `edit` changed its content (the build of voms-proxy-fake in Debian writes
 * no targets, so targeted or otherwise crafted ACs are made from a real one this way).
 */
export function resignAc(acDer: Buffer, signer: TestCredential, edit: (info: AttributeCertificateInfo) => void): Buffer {
  const ac = AsnParser.parse(acDer, AttributeCertificate);
  edit(ac.acinfo);
  const tbs = Buffer.from(AsnConvert.serialize(ac.acinfo));
  const sig = sign("sha256", tbs, signer.key);
  ac.signatureValue = sig.buffer.slice(sig.byteOffset, sig.byteOffset + sig.byteLength) as ArrayBuffer;
  return Buffer.from(AsnConvert.serialize(ac));
}

/** targetInformation naming these hosts (dNSName targets). */
export function targetsExtension(hosts: string[], critical = true): Extension {
  const value = der(seq([seq(hosts.map((h) => ctx(0, true, [ctx(2, false, h)])))]));
  return new Extension({ extnID: VOMS_OID.targets, critical, extnValue: new OctetString(value) });
}

/** A proxy of `issuer` carrying these ACs in the VOMS extension. */
export function proxyWithAcs(issuer: TestCredential, acs: Buffer[]): TestCredential {
  const value = seq([seq(acs.map((a) => parse(a)))]);
  return createProxy(issuer, undefined, { extensions: [{ oid: VOMS_OID.acSeq, value }] });
}
