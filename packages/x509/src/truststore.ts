/**
 * Trust anchors from an OpenSSL hashed CA directory (X509_CERT_DIR layout as installed by the IGTF
 * bundle and fetch-crl): `<hash>.N` certificates, `<hash>.rN` CRLs, `*.pem`/`*.crt` also accepted.
 * Policy side files (.signing_policy, .namespaces, .crl_url, .info) are ignored.
 */
import { X509Certificate, verify as cryptoVerify } from "node:crypto";
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import forge from "node-forge";
import { certInfo, normalizeSerial, type CertInfo } from "./cert.js";
import { nameFromAsn1 } from "./dn.js";
import { children, readTlv, signedParts, SIG_HASH } from "./der.js";
import { pemBlocks, splitPem } from "./pem.js";

const CERT_FILE = /^(?:[0-9a-f]{8}\.\d+|.+\.pem|.+\.crt)$/i;
const CRL_FILE = /^(?:[0-9a-f]{8}\.r\d+|.+\.crl)$/i;

export interface Crl {
  issuerKey: string;
  thisUpdate: Date;
  nextUpdate?: Date;
  revoked: Set<string>;
  der: Buffer;
}

export class TrustStore {
  private byName = new Map<string, CertInfo[]>();
  private revokedByCa = new Map<string, Set<string>>();
  private fingerprints = new Set<string>();
  /** Problems met while loading (unreadable files, CRLs without a matching CA); never key material. */
  warnings: string[] = [];

  constructor(readonly dir?: string) {}

  /** Load a hashed CA directory. */
  static async load(dir: string): Promise<TrustStore> {
    const s = new TrustStore(dir);
    await s.reload();
    return s;
  }

  /** In-memory store (tests, or anchors from configuration). */
  static fromPem(certs: string | string[], crls: (string | Buffer)[] = []): TrustStore {
    const s = new TrustStore();
    const x = (Array.isArray(certs) ? certs : [certs]).flatMap((p) => splitPem(p).certificates).map((p) => new X509Certificate(p));
    s.install(x, crls.flatMap(crlDers));
    return s;
  }

  /** Re-read the directory; the old contents stay in use if the directory cannot be listed. */
  async reload(): Promise<void> {
    if (!this.dir) return;
    const names = (await readdir(this.dir)).sort();
    const certs: X509Certificate[] = [];
    const crls: Buffer[] = [];
    const warnings: string[] = [];
    for (const name of names) {
      const isCert = CERT_FILE.test(name);
      const isCrl = !isCert && CRL_FILE.test(name);
      if (!isCert && !isCrl) continue;
      try {
        const data = await readFile(join(this.dir, name));
        if (isCrl) crls.push(...crlDers(data));
        else certs.push(...certsFrom(data));
      } catch (e) {
        warnings.push(`${name}: ${(e as Error).message.slice(0, 200)}`);
      }
    }
    this.install(certs, crls, warnings);
  }

  private install(certs: X509Certificate[], crls: Buffer[], warnings: string[] = []): void {
    const byName = new Map<string, CertInfo[]>();
    const fingerprints = new Set<string>();
    for (const c of certs) {
      if (fingerprints.has(c.fingerprint256)) continue; // hash links and .pem copies of one CA
      let info: CertInfo;
      try {
        info = certInfo(c);
      } catch (e) {
        warnings.push((e as Error).message);
        continue;
      }
      fingerprints.add(c.fingerprint256);
      const list = byName.get(info.subject.key) ?? [];
      list.push(info);
      byName.set(info.subject.key, list);
    }
    const revokedByCa = new Map<string, Set<string>>();
    for (const der of crls) {
      try {
        const crl = parseCrl(der);
        const { tbs, sigAlgOid, signature } = signedParts(der);
        const hash = SIG_HASH[sigAlgOid];
        const ca = (byName.get(crl.issuerKey) ?? []).find(
          (c) => hash !== undefined && cryptoVerify(hash, tbs, c.x509.publicKey, signature),
        );
        if (!ca) {
          warnings.push("CRL ignored: no CA in the store matches its issuer and signature");
          continue;
        }
        const set = revokedByCa.get(ca.x509.fingerprint256) ?? new Set();
        for (const s of crl.revoked) set.add(s);
        revokedByCa.set(ca.x509.fingerprint256, set);
      } catch (e) {
        warnings.push(`CRL ignored: ${(e as Error).message}`);
      }
    }
    this.byName = byName;
    this.fingerprints = fingerprints;
    this.revokedByCa = revokedByCa;
    this.warnings = warnings;
  }

  get size(): number {
    return this.fingerprints.size;
  }

  get certificates(): X509Certificate[] {
    return [...this.byName.values()].flat().map((i) => i.x509);
  }

  /** CAs whose subject matches a name comparison key (several CAs may share a DN). */
  findBySubject(nameKey: string): CertInfo[] {
    return this.byName.get(nameKey) ?? [];
  }

  contains(cert: X509Certificate): boolean {
    return this.fingerprints.has(cert.fingerprint256);
  }

  /** Whether `serialHex` is revoked by a CRL signed by `ca`. */
  isRevoked(ca: X509Certificate, serialHex: string): boolean {
    return this.revokedByCa.get(ca.fingerprint256)?.has(normalizeSerial(serialHex)) ?? false;
  }
}

function certsFrom(data: Buffer): X509Certificate[] {
  const text = data.toString("latin1");
  if (text.includes("-----BEGIN")) return splitPem(text).certificates.map((p) => new X509Certificate(p));
  return [new X509Certificate(data)];
}

function crlDers(data: string | Buffer): Buffer[] {
  const text = typeof data === "string" ? data : data.toString("latin1");
  if (text.includes("-----BEGIN")) return pemBlocks(text).filter((b) => b.label === "X509 CRL").map((b) => b.der);
  return [typeof data === "string" ? Buffer.from(data, "binary") : data];
}

/** TBSCertList fields we need: issuer, update times, revoked serials. */
export function parseCrl(der: Buffer): Crl {
  const { tbsTlv } = signedParts(der);
  const asn1 = forge.asn1;
  const parts = children(der, tbsTlv);
  let i = parts[0]?.tag === 0x02 ? 1 : 0; // optional version
  i++; // signature AlgorithmIdentifier
  const node = (t = parts[i]) => {
    if (!t) throw new Error("truncated CRL");
    return asn1.fromDer(der.subarray(t.start, t.end).toString("binary"));
  };
  const issuer = nameFromAsn1(node(parts[i++]));
  const time = (t: forge.asn1.Asn1) =>
    t.type === asn1.Type.UTCTIME ? asn1.utcTimeToDate(t.value as string) : asn1.generalizedTimeToDate(t.value as string);
  const thisUpdate = time(node(parts[i++]));
  let nextUpdate: Date | undefined;
  if (parts[i] && (parts[i]!.tag === 0x17 || parts[i]!.tag === 0x18)) nextUpdate = time(node(parts[i++]));
  const revoked = new Set<string>();
  const list = parts[i];
  if (list && list.tag === 0x30) {
    for (const entry of children(der, list)) {
      const serial = readTlv(der, entry.start + entry.headerLen);
      revoked.add(normalizeSerial(der.subarray(serial.start + serial.headerLen, serial.end).toString("hex")));
    }
  }
  return { issuerKey: issuer.key, thisUpdate, ...(nextUpdate ? { nextUpdate } : {}), revoked, der };
}
