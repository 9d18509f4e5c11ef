/**
 * Parsed view of the parts of a certificate that Node's X509Certificate does not expose reliably
 * (exact names, extensions with criticality, proxyCertInfo). Parsed once per object and cached.
 */
import { Failure } from "@ce/model";
import forge from "node-forge";
import { X509Certificate } from "node:crypto";
import { nameFromAsn1, type Name } from "./dn.js";

const asn1 = forge.asn1;
type Node = forge.asn1.Asn1;

export const OID = {
  basicConstraints: "2.5.29.19",
  keyUsage: "2.5.29.15",
  subjectAltName: "2.5.29.17",
  issuerAltName: "2.5.29.18",
  proxyCertInfo: "1.3.6.1.5.5.7.1.14",
  proxyCertInfoDraft: "1.3.6.1.4.1.3536.1.222",
  inheritAll: "1.3.6.1.5.5.7.21.1",
  independent: "1.3.6.1.5.5.7.21.2",
  limited: "1.3.6.1.4.1.3536.1.1.1.9",
} as const;

/** Extensions we understand (or that carry no constraint we must enforce) and may be critical. */
export const KNOWN_CRITICAL = new Set<string>([
  OID.basicConstraints,
  OID.keyUsage,
  OID.subjectAltName,
  OID.issuerAltName,
  OID.proxyCertInfo,
  OID.proxyCertInfoDraft,
  "2.5.29.37", // extKeyUsage
  "2.5.29.32", // certificatePolicies
  "2.5.29.36", // policyConstraints
  "2.5.29.54", // inhibitAnyPolicy
  "2.5.29.14", // subjectKeyIdentifier
  "2.5.29.35", // authorityKeyIdentifier
  "2.5.29.31", // cRLDistributionPoints
]);

export const KEY_USAGE_BITS = [
  "digitalSignature",
  "nonRepudiation",
  "keyEncipherment",
  "dataEncipherment",
  "keyAgreement",
  "keyCertSign",
  "cRLSign",
  "encipherOnly",
  "decipherOnly",
] as const;
export type KeyUsage = (typeof KEY_USAGE_BITS)[number];

export interface Extension {
  oid: string;
  critical: boolean;
  /** DER of the extnValue contents, binary string. */
  value: string;
}

export interface ProxyCertInfo {
  oid: string;
  pathLen?: number;
  policyLanguage: string;
}

export interface CertInfo {
  x509: X509Certificate;
  subject: Name;
  issuer: Name;
  notBefore: Date;
  notAfter: Date;
  serialHex: string;
  tbsSigAlgOid: string;
  sigAlgOid: string;
  extensions: Map<string, Extension>;
  basicConstraints?: { ca: boolean; pathLen?: number };
  keyUsage?: Set<KeyUsage>;
  proxyCertInfo?: ProxyCertInfo;
}

export class CertParseError extends Failure<"CERT_PARSE"> {
  constructor(message: string) {
    super("CERT_PARSE", message);
  }
}

const cache = new WeakMap<X509Certificate, CertInfo>();

export function certInfo(x509: X509Certificate): CertInfo {
  let info = cache.get(x509);
  if (!info) {
    try {
      info = parse(x509);
    } catch (e) {
      throw new CertParseError(`cannot parse certificate ${safeSubject(x509)}: ${(e as Error).message}`);
    }
    cache.set(x509, info);
  }
  return info;
}

function safeSubject(x: X509Certificate): string {
  return JSON.stringify(x.subject.replace(/\n/g, ", ").slice(0, 200));
}

const arr = (n: Node | undefined, what: string): Node[] => {
  if (!n || !Array.isArray(n.value)) throw new Error(`bad ${what}`);
  return n.value;
};
const str = (n: Node | undefined, what: string): string => {
  if (!n || typeof n.value !== "string") throw new Error(`bad ${what}`);
  return n.value;
};

function parseTime(n: Node | undefined): Date {
  const v = str(n, "time");
  const d = n!.type === asn1.Type.UTCTIME ? asn1.utcTimeToDate(v) : asn1.generalizedTimeToDate(v);
  if (Number.isNaN(d.getTime())) throw new Error("bad time");
  return d;
}

function parse(x509: X509Certificate): CertInfo {
  const root = asn1.fromDer(x509.raw.toString("binary"), { decodeBitStrings: false } as never);
  const [tbsNode, algNode] = arr(root, "Certificate");
  const tbs = arr(tbsNode, "TBSCertificate");
  const off = tbs[0]?.tagClass === asn1.Class.CONTEXT_SPECIFIC && tbs[0].type === 0 ? 1 : 0;
  const serial = Buffer.from(str(tbs[off], "serial"), "binary");
  const validity = arr(tbs[off + 3], "Validity");
  const info: CertInfo = {
    x509,
    serialHex: normalizeSerial(serial.toString("hex")),
    tbsSigAlgOid: asn1.derToOid(str(arr(tbs[off + 1], "AlgorithmIdentifier")[0], "OID")),
    sigAlgOid: asn1.derToOid(str(arr(algNode, "AlgorithmIdentifier")[0], "OID")),
    issuer: nameFromAsn1(tbs[off + 2]!),
    notBefore: parseTime(validity[0]),
    notAfter: parseTime(validity[1]),
    subject: nameFromAsn1(tbs[off + 4]!),
    extensions: new Map(),
  };
  const extWrapper = tbs.slice(off + 6).find((n) => n.tagClass === asn1.Class.CONTEXT_SPECIFIC && n.type === 3);
  if (extWrapper) {
    for (const ext of arr(arr(extWrapper, "extensions")[0], "Extensions")) {
      const parts = arr(ext, "Extension");
      const oid = asn1.derToOid(str(parts[0], "extnID"));
      const critical = parts.length === 3 && str(parts[1], "critical") !== "\x00";
      if (info.extensions.has(oid)) throw new Error(`duplicate extension ${oid}`);
      info.extensions.set(oid, { oid, critical, value: str(parts[parts.length - 1], "extnValue") });
    }
  }
  const bc = info.extensions.get(OID.basicConstraints);
  if (bc) {
    const items = arr(asn1.fromDer(bc.value), "basicConstraints");
    const ca = items[0]?.type === asn1.Type.BOOLEAN && items[0].value !== "\x00";
    const pl = items.find((n) => n.type === asn1.Type.INTEGER);
    info.basicConstraints = { ca, ...(pl ? { pathLen: intValue(pl) } : {}) };
  }
  const ku = info.extensions.get(OID.keyUsage);
  if (ku) info.keyUsage = decodeKeyUsage(str(asn1.fromDer(ku.value), "keyUsage"));
  const pci = info.extensions.get(OID.proxyCertInfo) ?? info.extensions.get(OID.proxyCertInfoDraft);
  if (pci) info.proxyCertInfo = parseProxyCertInfo(pci);
  return info;
}

function intValue(n: Node): number {
  const b = Buffer.from(str(n, "INTEGER"), "binary");
  if (b.length > 4 || (b[0] ?? 0) & 0x80) throw new Error("INTEGER out of range");
  return b.reduce((v, x) => v * 256 + x, 0);
}

function decodeKeyUsage(bits: string): Set<KeyUsage> {
  const set = new Set<KeyUsage>();
  const b = Buffer.from(bits, "binary").subarray(1); // first octet = unused bits
  KEY_USAGE_BITS.forEach((name, i) => {
    if ((b[i >> 3] ?? 0) & (0x80 >> (i & 7))) set.add(name);
  });
  return set;
}

/**
 * RFC 3820: SEQUENCE { pCPathLenConstraint INTEGER OPTIONAL, proxyPolicy SEQUENCE { policyLanguage
 * OID, policy OCTET STRING OPTIONAL } }. The pre-RFC GT3 form puts the policy first and the path
 * length as `[1] EXPLICIT INTEGER`; both are accepted.
 */
function parseProxyCertInfo(ext: Extension): ProxyCertInfo {
  let pathLen: number | undefined;
  let policyLanguage: string | undefined;
  for (const n of arr(asn1.fromDer(ext.value), "proxyCertInfo")) {
    if (n.tagClass === asn1.Class.UNIVERSAL && n.type === asn1.Type.INTEGER) pathLen = intValue(n);
    else if (n.tagClass === asn1.Class.CONTEXT_SPECIFIC && n.type === 1) pathLen = intValue(arr(n, "pathLen")[0]!);
    else if (n.type === asn1.Type.SEQUENCE) policyLanguage = asn1.derToOid(str(arr(n, "proxyPolicy")[0], "policyLanguage"));
  }
  if (!policyLanguage) throw new Error("proxyCertInfo without proxyPolicy");
  return { oid: ext.oid, policyLanguage, ...(pathLen !== undefined ? { pathLen } : {}) };
}

export function normalizeSerial(hex: string): string {
  return hex.replace(/^(00)+(?=.)/, "").toUpperCase() || "0";
}
