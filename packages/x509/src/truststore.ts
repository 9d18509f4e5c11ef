/**
 * Trust anchors from an OpenSSL hashed CA directory (X509_CERT_DIR layout as installed by the IGTF
 * bundle and fetch-crl): `<hash>.N` certificates, `<hash>.rN` CRLs, `*.pem`/`*.crt` also accepted.
 * Namespace policies (`<hash>.namespaces`, else `<hash>.signing_policy`, see eacl.ts) restrict the
 * subjects each CA may vouch for. A CA whose CRL has passed its nextUpdate, or whose `<hash>.rN`
 * file does not parse or verify, fails closed (refuses what it issued) unless the policy relaxes
 * it, as sites running fetch-crl with a lenient schedule may want.
 */
import { X509Certificate, verify as cryptoVerify } from "node:crypto";
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import forge from "node-forge";
import { certInfo, normalizeSerial, type CertInfo } from "./cert.js";
import { nameFromAsn1 } from "./dn.js";
import { children, readTlv, signedParts, SIG_HASH } from "./der.js";
import { pemBlocks, splitPem } from "./pem.js";
import { eaclDenies, parseNamespaces, parseSigningPolicy, type Eacl } from "./eacl.js";

const CERT_FILE = /^(?:[0-9a-f]{8}\.\d+|.+\.pem|.+\.crt)$/i;
const CRL_FILE = /^(?:[0-9a-f]{8}\.r\d+|.+\.crl)$/i;

export interface Crl {
  issuerKey: string;
  thisUpdate: Date;
  nextUpdate?: Date;
  revoked: Set<string>;
  der: Buffer;
}

export interface TrustPolicy {
  /** A CRL past its nextUpdate: refuse what its CA issued (default) or keep using the CRL. */
  crlExpired: "deny" | "allow";
  /** A `<hash>.rN` file that does not parse or verify: refuse what that CA issued (default) or ignore the file. */
  crlUnparsable: "deny" | "allow";
  /** Namespace files: enforce where present (default), require one for every CA, or ignore them. */
  namespaces: "enforce" | "require" | "ignore";
  /**
   * Which issuing CAs need a CRL in the directory: only CAs the client presents that are not
   * installed (default: nothing else would ever revoke what they issue), every CA, or none.
   */
  crlRequired: "intermediates" | "all" | "none";
}
export const DEFAULT_TRUST_POLICY: TrustPolicy = {
  crlExpired: "deny",
  crlUnparsable: "deny",
  namespaces: "enforce",
  crlRequired: "intermediates",
};

/** What certificates issued by one CA face: a refusal, or the serials its CRL revokes. */
export type Revocation = { problem: string } | { revoked: ReadonlySet<string> };

/** A CRL whose issuer is no installed CA: kept for a CA the client may present under that name. */
interface LooseCrl {
  crl: Crl;
  tbs: Buffer;
  hash: string | null | undefined;
  signature: Buffer;
}
const NO_SERIALS: ReadonlySet<string> = new Set();

/** What is known of one CA's CRL: the newest nextUpdate, or why its CRL file is unusable. */
interface CrlState {
  nextUpdate?: Date;
  thisUpdate?: Date;
  broken?: string;
}

export class TrustStore {
  private byName = new Map<string, CertInfo[]>();
  private revokedByCa = new Map<string, Set<string>>();
  private crlByCa = new Map<string, CrlState>();
  private eaclByCa = new Map<string, Eacl>();
  private looseCrls = new Map<string, LooseCrl[]>();
  private fingerprints = new Set<string>();
  /** Problems met while loading (unreadable files, CRLs without a matching CA); never key material. */
  warnings: string[] = [];
  readonly policy: TrustPolicy;

  constructor(
    readonly dir?: string,
    policy: Partial<TrustPolicy> = {},
  ) {
    this.policy = { ...DEFAULT_TRUST_POLICY, ...policy };
  }

  /** Load a hashed CA directory. */
  static async load(dir: string, policy: Partial<TrustPolicy> = {}): Promise<TrustStore> {
    const s = new TrustStore(dir, policy);
    await s.reload();
    return s;
  }

  /** In-memory store (tests, or anchors from configuration). */
  static fromPem(certs: string | string[], crls: (string | Buffer)[] = [], policy: Partial<TrustPolicy> = {}): TrustStore {
    const s = new TrustStore(undefined, policy);
    const x = (Array.isArray(certs) ? certs : [certs]).flatMap((p) => splitPem(p).certificates).map((p) => new X509Certificate(p));
    s.install(
      x.map((c) => ({ cert: c })),
      crls.flatMap((c) => crlDers(c).map((der) => ({ der }))),
    );
    return s;
  }

  /** Re-read the directory; the old contents stay in use if the directory cannot be listed. */
  async reload(): Promise<void> {
    if (!this.dir) return;
    const names = (await readdir(this.dir)).sort();
    const certs: CertFile[] = [];
    const crls: CrlFile[] = [];
    const policies = new Map<string, Eacl>();
    const warnings: string[] = [];
    const hashOf = (name: string) => /^([0-9a-f]{8})\./i.exec(name)?.[1]?.toLowerCase();
    for (const name of names) {
      const isCert = CERT_FILE.test(name);
      const isCrl = !isCert && CRL_FILE.test(name);
      const policy = /^([0-9a-f]{8})\.(namespaces|signing_policy)$/i.exec(name);
      if (!isCert && !isCrl && !policy) continue;
      let data: Buffer;
      try {
        data = await readFile(join(this.dir, name));
      } catch (e) {
        warnings.push(`${name}: ${(e as Error).message.slice(0, 200)}`);
        if (isCrl) crls.push({ der: undefined, hash: hashOf(name), file: name, error: "unreadable" });
        continue;
      }
      if (policy) {
        const [, h, kind] = policy;
        // .namespaces wins over .signing_policy when a CA has both (sorted: "n" < "s").
        if (kind === "signing_policy" && policies.has(h!.toLowerCase())) continue;
        try {
          policies.set(
            h!.toLowerCase(),
            kind === "namespaces" ? parseNamespaces(data.toString("utf8")) : parseSigningPolicy(data.toString("utf8")),
          );
        } catch (e) {
          // An unreadable policy must not widen trust: the CA then grants no namespace at all.
          warnings.push(`${name}: ${(e as Error).message.slice(0, 200)}; the CA is refused until it is fixed`);
          policies.set(h!.toLowerCase(), { format: kind as Eacl["format"], rules: [] });
        }
      } else if (isCrl) {
        const ders = crlDers(data);
        if (ders.length === 0) crls.push({ der: undefined, hash: hashOf(name), file: name, error: "no CRL in the file" });
        for (const der of ders) crls.push({ der, hash: hashOf(name), file: name });
      } else {
        try {
          for (const cert of certsFrom(data)) certs.push({ cert, hash: hashOf(name) });
        } catch (e) {
          warnings.push(`${name}: ${(e as Error).message.slice(0, 200)}`);
        }
      }
    }
    this.install(certs, crls, warnings, policies);
  }

  private install(certs: CertFile[], crls: CrlFile[], warnings: string[] = [], policies = new Map<string, Eacl>()): void {
    const byName = new Map<string, CertInfo[]>();
    const byHash = new Map<string, CertInfo[]>();
    const fingerprints = new Set<string>();
    const eaclByCa = new Map<string, Eacl>();
    // Hash links and .pem copies of one CA are parsed once (by fingerprint).
    const byFingerprint = new Map<string, CertInfo>();
    for (const { cert: c, hash } of certs) {
      let info = byFingerprint.get(c.fingerprint256);
      if (!info) {
        try {
          info = certInfo(c);
        } catch (e) {
          warnings.push((e as Error).message);
          continue;
        }
        byFingerprint.set(c.fingerprint256, info);
        fingerprints.add(c.fingerprint256);
        const list = byName.get(info.subject.key) ?? [];
        list.push(info);
        byName.set(info.subject.key, list);
      }
      if (hash) {
        const list = byHash.get(hash) ?? [];
        list.push(info);
        byHash.set(hash, list);
        const p = policies.get(hash);
        if (p) eaclByCa.set(c.fingerprint256, p);
      }
    }
    const revokedByCa = new Map<string, Set<string>>();
    const crlByCa = new Map<string, CrlState>();
    const looseCrls = new Map<string, LooseCrl[]>();
    const broken = (file: CrlFile, why: string) => {
      // A hash-named CRL file names its CA even when its content is unusable: that CA fails closed.
      const cas = file.hash ? (byHash.get(file.hash) ?? []) : [];
      for (const ca of cas) {
        const st = crlByCa.get(ca.x509.fingerprint256) ?? {};
        if (!st.nextUpdate) st.broken = `${file.file}: ${why}`;
        crlByCa.set(ca.x509.fingerprint256, st);
      }
      const who = cas.map((c) => JSON.stringify(c.subject.oneLine)).join(", ");
      warnings.push(
        `CRL ${file.file ?? "(inline)"} unusable: ${why}${who ? `; CA ${who} ${this.policy.crlUnparsable === "deny" ? "refuses every certificate it issued until fixed" : "is used without it"}` : ""}`,
      );
    };
    for (const file of crls) {
      if (!file.der) {
        broken(file, file.error ?? "unreadable");
        continue;
      }
      const der = file.der;
      try {
        const crl = parseCrl(der);
        const { tbs, sigAlgOid, signature } = signedParts(der);
        const hash = SIG_HASH[sigAlgOid];
        const ca = (byName.get(crl.issuerKey) ?? []).find(
          (c) => hash !== undefined && cryptoVerify(hash, tbs, c.x509.publicKey, signature),
        );
        if (!ca) {
          const namedCa = file.hash !== undefined && (byHash.get(file.hash)?.length ?? 0) > 0;
          if (namedCa) {
            broken(file, "no CA in the store matches its issuer and signature");
          } else {
            // Checked against the key of a presented intermediate of that name when one comes.
            const list = looseCrls.get(crl.issuerKey) ?? [];
            list.push({ crl, tbs, hash: SIG_HASH[sigAlgOid], signature });
            looseCrls.set(crl.issuerKey, list);
          }
          continue;
        }
        const fp = ca.x509.fingerprint256;
        const set = revokedByCa.get(fp) ?? new Set();
        for (const s of crl.revoked) set.add(s);
        revokedByCa.set(fp, set);
        const st = crlByCa.get(fp) ?? {};
        if (!st.thisUpdate || crl.thisUpdate > st.thisUpdate) {
          st.thisUpdate = crl.thisUpdate;
          if (crl.nextUpdate) st.nextUpdate = crl.nextUpdate;
          else delete st.nextUpdate;
        }
        delete st.broken; // a good CRL for the CA outweighs a stray bad copy
        crlByCa.set(fp, st);
      } catch (e) {
        broken(file, (e as Error).message.slice(0, 200));
      }
    }
    for (const [fp, st] of crlByCa) {
      if (st.nextUpdate && st.nextUpdate.getTime() < Date.now()) {
        const ca = [...byName.values()].flat().find((i) => i.x509.fingerprint256 === fp);
        warnings.push(
          `CRL of CA ${JSON.stringify(ca?.subject.oneLine)} expired at ${st.nextUpdate.toISOString()}${this.policy.crlExpired === "deny" ? "; certificates it issued are refused until fetch-crl refreshes it" : ""}`,
        );
      }
    }
    this.byName = byName;
    this.fingerprints = fingerprints;
    this.revokedByCa = revokedByCa;
    this.crlByCa = crlByCa;
    this.eaclByCa = eaclByCa;
    this.looseCrls = looseCrls;
    this.warnings = warnings;
  }

  /** Why certificates issued by `ca` cannot be trusted now because of its CRL, if they cannot. */
  crlProblem(ca: X509Certificate, now: Date): string | undefined {
    const st = this.crlByCa.get(ca.fingerprint256);
    if (!st) return undefined;
    if (st.broken && this.policy.crlUnparsable === "deny")
      return `the CRL of CA ${JSON.stringify(subjectOf(ca))} is unusable (${st.broken})`;
    if (st.nextUpdate && st.nextUpdate.getTime() < now.getTime() && this.policy.crlExpired === "deny") {
      return `the CRL of CA ${JSON.stringify(subjectOf(ca))} expired at ${st.nextUpdate.toISOString()}`;
    }
    return undefined;
  }

  /**
   * The CRL verdict for what `ca` issued. An installed CA: its CRL from the directory. A CA the
   * client presented (`installed` false): CRLs in the directory whose issuer is its name and whose
   * signature its key verifies (each check is charged to `budget`), with the same expiry rules.
   */
  revocation(ca: CertInfo, installed: boolean, now: Date, budget: { left: number }): Revocation {
    const name = JSON.stringify(ca.subject.oneLine);
    if (installed) {
      const problem = this.crlProblem(ca.x509, now);
      if (problem) return { problem };
      if (this.policy.crlRequired === "all" && !this.crlByCa.has(ca.x509.fingerprint256)) {
        return { problem: `CA ${name} has no CRL in the CA directory (CRLs are required for every CA)` };
      }
      return { revoked: this.revokedByCa.get(ca.x509.fingerprint256) ?? NO_SERIALS };
    }
    let newest: Crl | undefined;
    const revoked = new Set<string>();
    for (const l of this.looseCrls.get(ca.subject.key) ?? []) {
      if (budget.left-- <= 0) return { problem: "too many signature checks for one certificate chain" };
      let ok = false;
      try {
        ok = l.hash !== undefined && cryptoVerify(l.hash, l.tbs, ca.x509.publicKey, l.signature);
      } catch {
        ok = false;
      }
      if (!ok) continue;
      for (const s of l.crl.revoked) revoked.add(s);
      if (!newest || l.crl.thisUpdate > newest.thisUpdate) newest = l.crl;
    }
    if (!newest) {
      if (this.policy.crlRequired === "none") return { revoked: NO_SERIALS };
      return { problem: `CA ${name} is not installed and no CRL signed by it is in the CA directory; install the CA or its CRL` };
    }
    if (newest.nextUpdate && newest.nextUpdate.getTime() < now.getTime() && this.policy.crlExpired === "deny") {
      return { problem: `the CRL of CA ${name} (not installed) expired at ${newest.nextUpdate.toISOString()}` };
    }
    return { revoked };
  }

  /**
   * Why `ca`, a CA the client presented that is not installed, may not vouch for `subjectDn`.
   * The policy file of `anchor`, the nearest installed CA above it, governs it (IGTF: the trust
   * anchor's file lists what its whole chain may sign): its rules for `ca` by name when it has
   * any, else the anchor's own namespace, which bounds whatever it vouches for through a sub-CA.
   * Without such a file nothing covers `ca`, so it is refused unless namespaces are ignored.
   */
  presentedNamespaceProblem(anchor: CertInfo, ca: CertInfo, subjectDn: string): string | undefined {
    if (this.policy.namespaces === "ignore") return undefined;
    const caDn = ca.subject.oneLine;
    const anchorDn = anchor.subject.oneLine;
    const eacl = this.eaclByCa.get(anchor.x509.fingerprint256);
    if (!eacl) {
      return `CA ${JSON.stringify(caDn)} is not installed and installed CA ${JSON.stringify(anchorDn)} has no .namespaces or .signing_policy file to cover what it issues; install the CA with its policy`;
    }
    const named = eacl.rules.some((r) => r.issuer !== "SELF" && r.issuer.toLowerCase() === caDn.toLowerCase());
    const why = named ? eaclDenies(eacl, caDn, subjectDn, anchorDn) : eaclDenies(eacl, anchorDn, subjectDn, anchorDn);
    return why && `${why}; it governs CA ${JSON.stringify(caDn)}, which is not installed`;
  }

  /** Why `ca` may not vouch for `subjectDn` under its namespace policy, if it may not. */
  namespaceProblem(ca: CertInfo, subjectDn: string): string | undefined {
    if (this.policy.namespaces === "ignore") return undefined;
    const eacl = this.eaclByCa.get(ca.x509.fingerprint256);
    if (!eacl) {
      return this.policy.namespaces === "require"
        ? `CA ${JSON.stringify(ca.subject.oneLine)} has no .namespaces or .signing_policy file`
        : undefined;
    }
    return eaclDenies(eacl, ca.subject.oneLine, subjectDn, ca.subject.oneLine);
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

interface CertFile {
  cert: X509Certificate;
  /** Subject hash from a `<hash>.N` file name: how CRL and policy files find their CA. */
  hash?: string;
}
interface CrlFile {
  der: Buffer | undefined;
  hash?: string;
  file?: string;
  error?: string;
}

const subjectOf = (c: X509Certificate) => certInfo(c).subject.oneLine;

function certsFrom(data: Buffer): X509Certificate[] {
  const text = data.toString("latin1");
  if (text.includes("-----BEGIN")) return splitPem(text).certificates.map((p) => new X509Certificate(p));
  return [new X509Certificate(data)];
}

function crlDers(data: string | Buffer): Buffer[] {
  const text = typeof data === "string" ? data : data.toString("latin1");
  if (text.includes("-----BEGIN"))
    return pemBlocks(text)
      .filter((b) => b.label === "X509 CRL")
      .map((b) => b.der);
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
