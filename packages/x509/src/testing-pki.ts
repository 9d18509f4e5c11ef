/**
 * Test PKI core for `@ce/x509/testing`: CAs, user/host certificates, RFC 3820 / legacy / limited
 * proxies, ARC-style delegation signing, CRLs and OpenSSL hashed CA directories. TEST USE ONLY.
 *
 * Speed: RSA-2048 generation costs ~150 ms, so keys come from a ring of 16 per size, persisted in
 * the OS temp dir and reused across runs; pass `key` (or `freshKey: true`) when a test needs a
 * specific or never-used key. Certificates are assembled with forge.asn1 and signed by Node.
 */
import {
  createHash,
  createPrivateKey,
  createPublicKey,
  generateKeyPairSync,
  randomBytes,
  sign,
  X509Certificate,
  type KeyObject,
} from "node:crypto";
import { mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import forge from "node-forge";
import { OID, type KeyUsage, KEY_USAGE_BITS } from "./cert.js";
import { parseDn, subjectDn } from "./dn.js";
import { derToPem } from "./pem.js";

const A = forge.asn1;
export type Node = forge.asn1.Asn1;
const U = A.Class.UNIVERSAL;
export const seq = (v: Node[]) => A.create(U, A.Type.SEQUENCE, true, v);
export const oid = (o: string) => A.create(U, A.Type.OID, false, A.oidToDer(o).getBytes());
export const octets = (b: Buffer) => A.create(U, A.Type.OCTETSTRING, false, b.toString("binary"));
export const ctx = (n: number, constructed: boolean, v: Node[] | string) => A.create(A.Class.CONTEXT_SPECIFIC, n, constructed, v);
export const der = (n: Node) => Buffer.from(A.toDer(n).getBytes(), "binary");
export const parse = (b: Buffer) => A.fromDer(b.toString("binary"), { decodeBitStrings: false } as never);

export function int(v: Buffer | number): Node {
  const hex = typeof v === "number" ? v.toString(16) : "";
  let b = typeof v === "number" ? Buffer.from(hex.length % 2 ? "0" + hex : hex, "hex") : v;
  if ((b[0] ?? 0) & 0x80) b = Buffer.concat([Buffer.from([0]), b]);
  return A.create(U, A.Type.INTEGER, false, b.toString("binary"));
}
export function time(d: Date): Node {
  return d.getUTCFullYear() < 2050
    ? A.create(U, A.Type.UTCTIME, false, A.dateToUtcTime(d))
    : A.create(U, A.Type.GENERALIZEDTIME, false, A.dateToGeneralizedTime(d));
}

const STRING_TAG: Record<string, number> = { "0.9.2342.19200300.100.1.25": 22, "1.2.840.113549.1.9.1": 22, "2.5.4.6": 19 };

/** Encode a one-line DN (`/DC=org/CN=Jane`, `+` for multi-valued RDNs) as an X.501 Name. */
export function nameFromDn(dn: string): Node {
  return seq(
    parseDn(dn).map((rdn) =>
      A.create(
        U,
        A.Type.SET,
        true,
        rdn.map((a) => seq([oid(a.oid), str(a.oid, a.value)])),
      ),
    ),
  );
}
const str = (o: string, v: string) => A.create(U, STRING_TAG[o] ?? A.Type.UTF8, false, Buffer.from(v, "utf8").toString("binary"));

/** The subject Name node of a certificate, byte-exact (proxies must extend it unchanged). */
export function subjectNode(cert: X509Certificate): Node {
  const tbs = (parse(cert.raw).value as Node[])[0]!.value as Node[];
  return tbs[tbs[0]?.tagClass === A.Class.CONTEXT_SPECIFIC ? 5 : 4]!;
}

// ---- keys -------------------------------------------------------------------------------------
const RING = 16;
let ringNext = 0;
const ring = new Map<string, KeyObject>();

/** A test RSA key from the persistent ring (or a fresh one). */
export function testKey(bits = 2048, fresh = false): KeyObject {
  const gen = () => generateKeyPairSync("rsa", { modulusLength: bits, publicExponent: 0x10001 }).privateKey;
  if (fresh) return gen();
  const id = `rsa${bits}-${ringNext++ % RING}`;
  let key = ring.get(id);
  if (key) return key;
  const dir = join(tmpdir(), "ce-x509-test-keys");
  const file = join(dir, `${id}.pem`);
  try {
    key = createPrivateKey(readFileSync(file));
  } catch {
    key = gen();
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const tmp = `${file}.${process.pid}.${Date.now()}`;
    writeFileSync(tmp, key.export({ type: "pkcs8", format: "pem" }), { mode: 0o600 });
    renameSync(tmp, file); // atomic: parallel test workers may race here
  }
  ring.set(id, key);
  return key;
}

// ---- certificate assembly ---------------------------------------------------------------------
export interface Ext {
  oid: string;
  critical?: boolean;
  value: Node;
}

export const ext = {
  basicConstraints: (ca: boolean, pathLen?: number): Ext => ({
    oid: OID.basicConstraints,
    critical: true,
    value: seq(ca ? [A.create(U, A.Type.BOOLEAN, false, "\xff"), ...(pathLen !== undefined ? [int(pathLen)] : [])] : []),
  }),
  keyUsage: (names: KeyUsage[]): Ext => {
    const bytes = [0, 0];
    for (const n of names) {
      const i = KEY_USAGE_BITS.indexOf(n);
      bytes[i >> 3]! |= 0x80 >> (i & 7);
    }
    const used = bytes[1] ? 2 : 1;
    const last = bytes[used - 1]!;
    let unused = 0;
    while (unused < 7 && last && !(last & (1 << unused))) unused++;
    const v = Buffer.from([unused, ...bytes.slice(0, used)]).toString("binary");
    return { oid: OID.keyUsage, critical: true, value: A.create(U, A.Type.BITSTRING, false, v) };
  },
  subjectAltName: (names: string[]): Ext => ({
    oid: OID.subjectAltName,
    value: seq(
      names.map((n) => (/^[\d.]+$/.test(n) ? ctx(7, false, Buffer.from(n.split(".").map(Number)).toString("binary")) : ctx(2, false, n))),
    ),
  }),
  extKeyUsage: (oids: string[]): Ext => ({ oid: "2.5.29.37", value: seq(oids.map(oid)) }),
  proxyCertInfo: (policyLanguage: string = OID.inheritAll, pathLen?: number, extOid: string = OID.proxyCertInfo): Ext => ({
    oid: extOid,
    critical: true,
    // The pre-RFC GT3 layout is { proxyPolicy, [1] EXPLICIT pathLen }; RFC 3820 puts pathLen first.
    value:
      extOid === OID.proxyCertInfo
        ? seq([...(pathLen !== undefined ? [int(pathLen)] : []), seq([oid(policyLanguage)])])
        : seq([seq([oid(policyLanguage)]), ...(pathLen !== undefined ? [ctx(1, true, [int(pathLen)])] : [])]),
  }),
  subjectKeyId: (pub: KeyObject): Ext => ({ oid: "2.5.29.14", value: octets(keyId(pub)) }),
  authorityKeyId: (pub: KeyObject): Ext => ({ oid: "2.5.29.35", value: seq([ctx(0, false, keyId(pub).toString("binary"))]) }),
};
const keyId = (pub: KeyObject) =>
  createHash("sha1")
    .update(publicOf(pub).export({ type: "spki", format: "der" }))
    .digest();

/** Public half of a key (KeyObject private or public). */
export const publicOf = (k: KeyObject): KeyObject => (k.type === "public" ? k : createPublicKey(k));

export function sigAlg(key: KeyObject): { alg: Node; hash: string | null } {
  switch (key.asymmetricKeyType) {
    case "rsa":
      return { alg: seq([oid("1.2.840.113549.1.1.11"), A.create(U, A.Type.NULL, false, "")]), hash: "sha256" };
    case "ec":
      return { alg: seq([oid("1.2.840.10045.4.3.2")]), hash: "sha256" };
    case "ed25519":
      return { alg: seq([oid("1.3.101.112")]), hash: null };
    default:
      throw new Error(`unsupported signing key type ${key.asymmetricKeyType}`);
  }
}

/** Sign a TBS structure (certificate or CRL) with Node crypto and wrap it. */
export function signed(tbs: Node, key: KeyObject, alg: Node): Buffer {
  const sig = sign(sigAlg(key).hash, der(tbs), key);
  return der(seq([tbs, alg, A.create(U, A.Type.BITSTRING, false, "\x00" + sig.toString("binary"))]));
}

export interface CertSpec {
  issuerName: Node;
  subjectName: Node;
  notBefore: Date;
  notAfter: Date;
  publicKey: KeyObject;
  signKey: KeyObject;
  serial?: Buffer;
  extensions: Ext[];
}

export function buildCertificate(spec: CertSpec): X509Certificate {
  const { alg } = sigAlg(spec.signKey);
  const spki = publicOf(spec.publicKey).export({ type: "spki", format: "der" });
  const tbs = seq([
    ctx(0, true, [int(2)]),
    int(spec.serial ?? randomSerial()),
    alg,
    spec.issuerName,
    seq([time(spec.notBefore), time(spec.notAfter)]),
    spec.subjectName,
    parse(spki),
    ...(spec.extensions.length
      ? [
          ctx(3, true, [
            seq(
              spec.extensions.map((e) =>
                seq([oid(e.oid), ...(e.critical ? [A.create(U, A.Type.BOOLEAN, false, "\xff")] : []), octets(der(e.value))]),
              ),
            ),
          ]),
        ]
      : []),
  ]);
  return new X509Certificate(signed(tbs, spec.signKey, alg));
}

export function randomSerial(): Buffer {
  const b = randomBytes(8);
  b[0] = (b[0]! & 0x7f) | 0x01;
  return b;
}

// ---- credentials ------------------------------------------------------------------------------
export interface TestCredential {
  dn: string;
  cert: X509Certificate;
  certPem: string;
  key: KeyObject;
  /** PKCS#8 `PRIVATE KEY`. */
  keyPem: string;
  /** This certificate and its issuers, leaf first, the self-signed root excluded (a root: itself). */
  chain: X509Certificate[];
  chainPem: string;
  /** Grid proxy-file layout: certificate, private key, rest of the chain. */
  filePem: string;
}

/** @internal */
export function credential(cert: X509Certificate, key: KeyObject, issuer?: TestCredential): TestCredential {
  const above = issuer && !isSelfSigned(issuer.cert) ? issuer.chain : [];
  const chain = [cert, ...above];
  const certPem = derToPem(cert.raw);
  const keyPem = key.export({ type: "pkcs8", format: "pem" }) as string;
  return {
    dn: subjectDn(cert),
    cert,
    certPem,
    key,
    keyPem,
    chain,
    chainPem: chain.map((c) => derToPem(c.raw)).join(""),
    filePem: certPem + keyPem + above.map((c) => derToPem(c.raw)).join(""),
  };
}
export const isSelfSigned = (c: X509Certificate) => c.subject === c.issuer && c.checkIssued(c);

const DAY = 86_400_000;
export interface Validity {
  notBefore?: Date;
  notAfter?: Date;
  days?: number;
}
export function validity(v: Validity, defDays: number): { notBefore: Date; notAfter: Date } {
  const notBefore = v.notBefore ?? new Date(Date.now() - 3_600_000);
  return { notBefore, notAfter: v.notAfter ?? new Date(notBefore.getTime() + (v.days ?? defDays) * DAY) };
}

export interface CAOptions extends Validity {
  dn: string;
  keyBits?: number;
  key?: KeyObject;
  pathLen?: number;
  /** Issue an intermediate CA under this CA instead of a self-signed root. */
  issuer?: TestCredential;
  /** Leave out basicConstraints (a broken CA, for negative tests). */
  noBasicConstraints?: boolean;
}

export function createCA(o: CAOptions): TestCredential {
  const key = o.key ?? testKey(o.keyBits ?? 2048);
  const signer = o.issuer;
  const cert = buildCertificate({
    issuerName: signer ? subjectNode(signer.cert) : nameFromDn(o.dn),
    subjectName: nameFromDn(o.dn),
    ...validity(o, 3650),
    publicKey: key,
    signKey: signer?.key ?? key,
    extensions: [
      ...(o.noBasicConstraints ? [] : [ext.basicConstraints(true, o.pathLen)]),
      ext.keyUsage(["keyCertSign", "cRLSign"]),
      ext.subjectKeyId(key),
      ...(signer ? [ext.authorityKeyId(signer.key)] : []),
    ],
  });
  return credential(cert, key, signer);
}

export interface UserCertOptions extends Validity {
  dn: string;
  keyBits?: number;
  key?: KeyObject;
  freshKey?: boolean;
  /** Mark the end-entity certificate CA:true (negative tests). */
  ca?: boolean;
  keyUsage?: KeyUsage[];
  extensions?: Ext[];
}

export function issueUserCert(ca: TestCredential, o: UserCertOptions): TestCredential {
  const key = o.key ?? testKey(o.keyBits ?? 2048, o.freshKey);
  const cert = buildCertificate({
    issuerName: subjectNode(ca.cert),
    subjectName: nameFromDn(o.dn),
    ...validity(o, 365),
    publicKey: key,
    signKey: ca.key,
    extensions: [
      ext.basicConstraints(o.ca ?? false),
      ext.keyUsage(o.keyUsage ?? ["digitalSignature", "nonRepudiation", "keyEncipherment", "dataEncipherment"]),
      ext.extKeyUsage(["1.3.6.1.5.5.7.3.2"]),
      ext.subjectKeyId(key),
      ext.authorityKeyId(ca.key),
      ...(o.extensions ?? []),
    ],
  });
  return credential(cert, key, ca);
}

export interface HostCertOptions extends Validity {
  hostnames: string[];
  dn?: string;
  key?: KeyObject;
}

/** Host certificate with SAN DNS/IP entries, usable as a TLS server (and client) certificate. */
export function issueHostCert(ca: TestCredential, o: HostCertOptions): TestCredential {
  const key = o.key ?? testKey(2048);
  const cert = buildCertificate({
    issuerName: subjectNode(ca.cert),
    subjectName: nameFromDn(o.dn ?? `/O=Grid/CN=${o.hostnames[0] ?? "localhost"}`),
    ...validity(o, 365),
    publicKey: key,
    signKey: ca.key,
    extensions: [
      ext.basicConstraints(false),
      ext.keyUsage(["digitalSignature", "keyEncipherment"]),
      ext.extKeyUsage(["1.3.6.1.5.5.7.3.1", "1.3.6.1.5.5.7.3.2"]),
      ext.subjectAltName(o.hostnames),
      ext.subjectKeyId(key),
      ext.authorityKeyId(ca.key),
    ],
  });
  return credential(cert, key, ca);
}
