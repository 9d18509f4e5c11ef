/**
 * Test proxies, ARC-style delegation signing, CRLs and hashed CA directories (`@ce/x509/testing`).
 */
import { subjectDn } from "./dn.js";
import { execFileSync } from "node:child_process";
import { createPrivateKey, createPublicKey, verify, X509Certificate, type KeyObject } from "node:crypto";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { OID, type KeyUsage } from "./cert.js";
import { children, signedParts, SIG_HASH, slice } from "./der.js";
import { normalizeCsrPem, pemToDer, splitPem, derToPem } from "./pem.js";
import { classifyCertificate } from "./proxy.js";
import {
  buildCertificate,
  credential,
  ext,
  int,
  nameFromDn,
  randomSerial,
  seq,
  sigAlg,
  signed,
  subjectNode,
  testKey,
  time,
  type Ext,
  type Node,
  type TestCredential,
} from "./testing-pki.js";

export type ProxyKind = "rfc3820" | "limited" | "independent" | "legacy" | "legacy-limited" | "draft";

export interface ProxyOptions {
  type?: ProxyKind;
  lifetimeSeconds?: number;
  notBefore?: Date;
  notAfter?: Date;
  pathLen?: number;
  keyBits?: number;
  key?: KeyObject;
  freshKey?: boolean;
  /** Override the added CN (RFC 3820 default: the decimal serial number). */
  cn?: string;
  /** Extra RDNs appended after the proxy CN, e.g. `/CN=a/CN=b` (negative tests). */
  extraRdns?: string;
  ca?: boolean;
  keyUsage?: KeyUsage[];
  extensions?: Ext[];
  /** Sign with this key instead of the issuer's (negative tests). */
  signKey?: KeyObject;
  serial?: Buffer;
}

type CertInput = TestCredential | X509Certificate | string;

function resolveIssuer(issuer: CertInput, key: KeyObject | string | undefined): { cred: TestCredential } {
  if (typeof issuer === "object" && "cert" in issuer) return { cred: key === undefined ? issuer : { ...issuer, key: toKey(key) } };
  const chain = typeof issuer === "string" ? splitPem(issuer).certificates.map((p) => new X509Certificate(p)) : [issuer];
  if (!chain[0] || key === undefined) throw new Error("createProxy: issuer certificate and key are required");
  const k = toKey(key);
  const fake = credential(chain[0], k);
  return { cred: { ...fake, chain, chainPem: chain.map((c) => derToPem(c.raw)).join("") } };
}
const toKey = (k: KeyObject | string): KeyObject => (typeof k === "string" ? createPrivateKey(k) : k);

function proxyName(issuer: X509Certificate, cn: string, extra?: string): Node {
  const base = subjectNode(issuer);
  const rdns = [...(base.value as Node[]), ...(nameFromDn(`/CN=${cn.replace(/[/+\\]/g, "\\$&")}`).value as Node[])];
  if (extra) rdns.push(...(nameFromDn(extra).value as Node[]));
  return seq(rdns);
}

/**
 * A proxy certificate issued by `issuerCert` (a credential, a certificate, or a PEM bundle whose
 * first certificate is the issuer and the rest its chain). RFC 3820 proxies get subject = issuer +
 * `CN=<serial>`, a critical proxyCertInfo (inheritAll unless limited/independent), keyUsage
 * digitalSignature+keyEncipherment, SHA-256. Legacy proxies use `CN=proxy`/`CN=limited proxy`.
 */
export function createProxy(issuerCert: CertInput, issuerKey?: KeyObject | string, o: ProxyOptions = {}): TestCredential {
  const { cred: issuer } = resolveIssuer(issuerCert, issuerKey);
  const type = o.type ?? "rfc3820";
  const key = o.key ?? testKey(o.keyBits ?? 2048, o.freshKey);
  const serial = o.serial ?? randomSerial();
  const legacy = type === "legacy" || type === "legacy-limited";
  const cn = o.cn ?? (legacy ? (type === "legacy" ? "proxy" : "limited proxy") : BigInt("0x" + serial.toString("hex")).toString());
  const policy = type === "limited" ? OID.limited : type === "independent" ? OID.independent : OID.inheritAll;
  const notBefore = o.notBefore ?? new Date(Date.now() - 300_000);
  const notAfter = o.notAfter ?? new Date(notBefore.getTime() + 300_000 + (o.lifetimeSeconds ?? 12 * 3600) * 1000);
  const cert = buildCertificate({
    issuerName: subjectNode(issuer.cert),
    subjectName: proxyName(issuer.cert, cn, o.extraRdns),
    notBefore,
    notAfter,
    publicKey: key,
    signKey: o.signKey ?? issuer.key,
    serial,
    extensions: [
      ...(legacy ? [] : [ext.proxyCertInfo(policy, o.pathLen, type === "draft" ? OID.proxyCertInfoDraft : OID.proxyCertInfo)]),
      ...(o.ca ? [ext.basicConstraints(true)] : []),
      ext.keyUsage(o.keyUsage ?? ["digitalSignature", "keyEncipherment"]),
      ...(o.extensions ?? []),
    ],
  });
  return credential(cert, key, issuer);
}

export interface SignCsrOptions {
  lifetimeSeconds?: number;
  /** Force a limited proxy (default: limited iff the issuing proxy is limited, as ARC does). */
  limited?: boolean;
}

/**
 * What the ARC client does with a delegation CSR (arcsub step b): normalise the armour, verify the
 * CSR signature, ignore its subject, issue an RFC 3820 proxy for its key (validity not beyond the
 * issuer) and return the PUT body: new certificate + issuer certificate + issuer chain, no key.
 */
export function signCsrAsProxy(
  csrPem: string,
  issuerCert: CertInput,
  issuerKey?: KeyObject | string,
  issuerChain?: string | X509Certificate[],
  o: SignCsrOptions = {},
): string {
  const csr = pemToDer(normalizeCsrPem(csrPem));
  const { tbs, tbsTlv, sigAlgOid, signature } = signedParts(csr);
  const spkiTlv = children(csr, tbsTlv)[2];
  if (!spkiTlv) throw new Error("CSR without public key");
  const publicKey = createPublicKey({ key: slice(csr, spkiTlv), format: "der", type: "spki" });
  const hash = SIG_HASH[sigAlgOid];
  if (hash === undefined || !verify(hash, tbs, publicKey, signature)) throw new Error("CSR signature does not verify");
  const { cred } = resolveIssuer(issuerCert, issuerKey);
  const issuerKind = classifyCertificate(cred.cert);
  const limited = o.limited ?? (issuerKind.kind === "proxy" && issuerKind.limited);
  const serial = randomSerial();
  const notBefore = new Date(Date.now() - 300_000);
  const lifetimeEnd = o.lifetimeSeconds ? Date.now() + o.lifetimeSeconds * 1000 : Infinity;
  const notAfter = new Date(Math.min(lifetimeEnd, new Date(cred.cert.validTo).getTime()));
  const cert = buildCertificate({
    issuerName: subjectNode(cred.cert),
    subjectName: proxyName(cred.cert, BigInt("0x" + serial.toString("hex")).toString()),
    notBefore,
    notAfter,
    publicKey,
    signKey: cred.key,
    serial,
    extensions: [ext.proxyCertInfo(limited ? OID.limited : OID.inheritAll), ext.keyUsage(["digitalSignature", "keyEncipherment"])],
  });
  const chain =
    issuerChain === undefined
      ? cred.chain
      : [
          cred.cert,
          ...(typeof issuerChain === "string" ? splitPem(issuerChain).certificates.map((p) => new X509Certificate(p)) : issuerChain),
        ];
  const uniq = chain.filter((c, i) => chain.findIndex((d) => d.fingerprint256 === c.fingerprint256) === i);
  return [cert, ...uniq].map((c) => derToPem(c.raw)).join("");
}

export interface CrlOptions {
  thisUpdate?: Date;
  nextUpdate?: Date;
}

/** A v2 CRL signed by `ca` revoking the given certificates (or serial numbers in hex). */
export function createCrl(ca: TestCredential, revoked: (X509Certificate | TestCredential | string)[], o: CrlOptions = {}): string {
  const thisUpdate = o.thisUpdate ?? new Date(Date.now() - 3_600_000);
  const nextUpdate = o.nextUpdate ?? new Date(Date.now() + 7 * 86_400_000);
  const serials = revoked.map((r) => (typeof r === "string" ? r : ("cert" in r ? r.cert : r).serialNumber));
  const { alg } = sigAlg(ca.key);
  const tbs = seq([
    int(1),
    alg,
    subjectNode(ca.cert),
    time(thisUpdate),
    time(nextUpdate),
    ...(serials.length ? [seq(serials.map((s) => seq([int(Buffer.from(s.length % 2 ? "0" + s : s, "hex")), time(thisUpdate)])))] : []),
  ]);
  return derToPem(signed(tbs, ca.key, alg), "X509 CRL");
}

/** OpenSSL subject hash (`openssl x509 -subject_hash`), the file name stem in X509_CERT_DIR. */
export function subjectHash(cert: X509Certificate | TestCredential): string {
  const c = "cert" in cert ? cert.cert : cert;
  return execFileSync("openssl", ["x509", "-noout", "-subject_hash"], { input: derToPem(c.raw) })
    .toString()
    .trim();
}

export interface CADirOptions {
  /** CRL PEMs; each is written as `<issuer hash>.r<N>`. */
  crls?: string[];
  /** Also write IGTF side files (.signing_policy, .namespaces, .info) to prove they are ignored. */
  sideFiles?: boolean;
}

/** Write CA certificates in the OpenSSL hashed layout (`<hash>.0`, `<hash>.1` on collisions). */
export function writeCADir(dir: string, cas: (TestCredential | X509Certificate)[], o: CADirOptions = {}): string {
  mkdirSync(dir, { recursive: true });
  const next = new Map<string, number>();
  const slot = (h: string, prefix = "") => {
    const k = prefix + h;
    const n = next.get(k) ?? 0;
    next.set(k, n + 1);
    return n;
  };
  for (const ca of cas) {
    const c = "cert" in ca ? ca.cert : ca;
    const h = subjectHash(c);
    writeFileSync(join(dir, `${h}.${slot(h)}`), derToPem(c.raw));
    if (o.sideFiles ?? true) {
      // Real IGTF formats: grid clients (ARC's signing-policy check) read these, not just skip them.
      const dn = subjectDn(c);
      writeFileSync(
        join(dir, `${h}.signing_policy`),
        `access_id_CA      X509         '${dn}'\npos_rights        globus        CA:sign\ncond_subjects     globus       '"*"'\n`,
      );
      writeFileSync(join(dir, `${h}.namespaces`), `TO Issuer "${dn}" \\\n  PERMIT Subject ".*"\n`);
      writeFileSync(join(dir, `${h}.info`), `alias = ${dn.split("/").pop()?.replace(/^CN=/, "") ?? "test"}\n`);
    }
  }
  for (const crl of o.crls ?? []) {
    const h = execFileSync("openssl", ["crl", "-noout", "-hash"], { input: crl }).toString().trim();
    writeFileSync(join(dir, `${h}.r${slot(h, "r")}`), crl);
  }
  return dir;
}
