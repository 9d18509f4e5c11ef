/**
 * Distinguished names in the OpenSSL one-line form (`X509_NAME_oneline`, `-nameopt compat`), which
 * is what ARC and other grid tools use as the user's identity:
 * `/DC=org/DC=nordugrid/O=Test+OU=Multi/CN=a\/b`. RDN order is the encoded order; members of a
 * multi-valued RDN are joined with `+`; `/` and `+` inside values are backslash-escaped; bytes
 * outside printable ASCII are written `\xHH` (OpenSSL 3 behaviour).
 */
import forge from "node-forge";
import { X509Certificate } from "node:crypto";

const asn1 = forge.asn1;

/** OpenSSL short names (OBJ_nid2sn) of the attribute types seen in grid DNs. */
export const SHORT_NAMES: Record<string, string> = {
  "2.5.4.3": "CN",
  "2.5.4.4": "SN",
  "2.5.4.5": "serialNumber",
  "2.5.4.6": "C",
  "2.5.4.7": "L",
  "2.5.4.8": "ST",
  "2.5.4.9": "street",
  "2.5.4.10": "O",
  "2.5.4.11": "OU",
  "2.5.4.12": "title",
  "2.5.4.13": "description",
  "2.5.4.15": "businessCategory",
  "2.5.4.17": "postalCode",
  "2.5.4.41": "name",
  "2.5.4.42": "GN",
  "2.5.4.43": "initials",
  "2.5.4.44": "generationQualifier",
  "2.5.4.45": "x500UniqueIdentifier",
  "2.5.4.46": "dnQualifier",
  "2.5.4.65": "pseudonym",
  "2.5.4.72": "role",
  "2.5.4.97": "organizationIdentifier",
  "0.9.2342.19200300.100.1.1": "UID",
  "0.9.2342.19200300.100.1.25": "DC",
  "1.2.840.113549.1.9.1": "emailAddress",
  "1.2.840.113549.1.9.2": "unstructuredName",
  "1.3.6.1.4.1.311.60.2.1.1": "jurisdictionL",
  "1.3.6.1.4.1.311.60.2.1.2": "jurisdictionST",
  "1.3.6.1.4.1.311.60.2.1.3": "jurisdictionC",
};
const OID_BY_NAME = new Map<string, string>(Object.entries(SHORT_NAMES).map(([o, n]) => [n.toLowerCase(), o]));
OID_BY_NAME.set("email", "1.2.840.113549.1.9.1");
OID_BY_NAME.set("userid", "0.9.2342.19200300.100.1.1");

export function attributeOid(name: string): string {
  if (/^\d+(\.\d+)+$/.test(name)) return name;
  const oid = OID_BY_NAME.get(name.toLowerCase());
  if (!oid) throw new Error(`unknown DN attribute type ${name}`);
  return oid;
}

export interface Ava {
  oid: string;
  /** ASN.1 universal tag of the value (12 UTF8String, 19 PrintableString, 22 IA5String, ...). */
  tag: number;
  /** Raw value bytes as a binary string (forge convention). */
  bytes: string;
}

export interface Name {
  rdns: Ava[][];
  /** OpenSSL one-line form. */
  oneLine: string;
  /** Comparison key: OpenSSL-like canonical form (case-folded, whitespace-collapsed). */
  key: string;
}

/** Decode a forge Name (SEQUENCE OF SET OF AttributeTypeAndValue). */
export function nameFromAsn1(node: forge.asn1.Asn1): Name {
  if (node.type !== asn1.Type.SEQUENCE || !Array.isArray(node.value)) throw new Error("bad Name");
  const rdns = node.value.map((set) => {
    if (set.type !== asn1.Type.SET || !Array.isArray(set.value) || set.value.length === 0) throw new Error("bad RDN");
    return set.value.map((atv): Ava => {
      const [t, v] = Array.isArray(atv.value) ? atv.value : [];
      if (!t || !v || t.type !== asn1.Type.OID || typeof t.value !== "string" || typeof v.value !== "string") {
        throw new Error("bad AttributeTypeAndValue");
      }
      return { oid: asn1.derToOid(t.value), tag: v.type, bytes: v.value };
    });
  });
  return { rdns, oneLine: formatRdns(rdns), key: nameKey(rdns) };
}

export function formatRdns(rdns: Ava[][]): string {
  let out = "";
  for (const rdn of rdns) rdn.forEach((ava, i) => (out += (i === 0 ? "/" : "+") + formatAva(ava)));
  return out;
}

function formatAva(ava: Ava): string {
  let s = (SHORT_NAMES[ava.oid] ?? ava.oid) + "=";
  const q = ava.bytes;
  // OpenSSL quirk: a GeneralString that looks like UCS-4 Latin-1 prints only every 4th byte.
  let keep = [true, true, true, true];
  if (ava.tag === 27 && q.length % 4 === 0) {
    const nz = [false, false, false, false];
    for (let j = 0; j < q.length; j++) if (q.charCodeAt(j) !== 0) nz[j & 3] = true;
    keep = nz[0] || nz[1] || nz[2] ? [true, true, true, true] : [false, false, false, true];
  }
  for (let j = 0; j < q.length; j++) {
    if (!keep[j & 3]) continue;
    const c = q.charCodeAt(j);
    if (c < 0x20 || c > 0x7e) s += "\\x" + c.toString(16).toUpperCase().padStart(2, "0");
    else if (c === 0x2f || c === 0x2b) s += "\\" + q[j];
    else s += q[j];
  }
  return s;
}

/** Value as text, for comparison (not for display). */
export function avaText(ava: Ava): string {
  const b = Buffer.from(ava.bytes, "binary");
  switch (ava.tag) {
    case 12:
      return b.toString("utf8");
    case 30:
      return b.swap16().toString("utf16le");
    case 28: {
      let s = "";
      for (let i = 0; i + 3 < b.length; i += 4) s += String.fromCodePoint(b.readUInt32BE(i));
      return s;
    }
    default:
      return b.toString("latin1");
  }
}

function canonicalValue(ava: Ava): string {
  const t = avaText(ava);
  return [12, 19, 22, 20, 30, 28, 26].includes(ava.tag) ? t.trim().replace(/\s+/g, " ").toLowerCase() : t;
}

function nameKey(rdns: Ava[][]): string {
  return JSON.stringify(rdns.map((rdn) => rdn.map((a) => `${a.oid}=${canonicalValue(a)}`).sort()));
}

export function rdnsKey(rdns: Ava[][]): string {
  return nameKey(rdns);
}

/** Parse a one-line DN (`/A=b/C=d+E=f`, `\/` `\+` `\xHH` escapes) into attribute type/value pairs. */
export function parseDn(dn: string): { type: string; oid: string; value: string }[][] {
  if (!dn.startsWith("/")) throw new Error("one-line DN must start with '/'");
  const rdns: { type: string; oid: string; value: string }[][] = [];
  let i = 1;
  let cur: { type: string; oid: string; value: string }[] = [];
  while (i <= dn.length) {
    const eq = dn.indexOf("=", i);
    if (eq < 0) throw new Error("DN component without '='");
    const type = dn.slice(i, eq);
    const bytes: number[] = [];
    let j = eq + 1;
    for (; j < dn.length && dn[j] !== "/" && dn[j] !== "+"; j++) {
      if (dn[j] === "\\" && dn[j + 1] === "x" && /^[0-9a-fA-F]{2}$/.test(dn.slice(j + 2, j + 4))) {
        bytes.push(parseInt(dn.slice(j + 2, j + 4), 16));
        j += 3;
      } else if (dn[j] === "\\" && j + 1 < dn.length) {
        bytes.push(...Buffer.from(dn[++j]!, "utf8"));
      } else bytes.push(...Buffer.from(dn[j]!, "utf8"));
    }
    cur.push({ type, oid: attributeOid(type), value: Buffer.from(bytes).toString("utf8") });
    if (dn[j] !== "+") {
      rdns.push(cur);
      cur = [];
    }
    i = j + 1;
  }
  return rdns;
}

const derCache = new WeakMap<X509Certificate, { subject: Name; issuer: Name }>();

function names(cert: X509Certificate): { subject: Name; issuer: Name } {
  let n = derCache.get(cert);
  if (!n) {
    const root = asn1.fromDer(cert.raw.toString("binary"), { decodeBitStrings: false } as never);
    const tbs = (root.value as forge.asn1.Asn1[])[0]!.value as forge.asn1.Asn1[];
    const off = tbs[0]?.tagClass === asn1.Class.CONTEXT_SPECIFIC ? 1 : 0;
    n = { issuer: nameFromAsn1(tbs[off + 2]!), subject: nameFromAsn1(tbs[off + 4]!) };
    derCache.set(cert, n);
  }
  return n;
}

/** Subject DN of a certificate in OpenSSL one-line form. */
export function subjectDn(cert: X509Certificate | string): string {
  return names(cert instanceof X509Certificate ? cert : new X509Certificate(cert)).subject.oneLine;
}

/** Issuer DN of a certificate in OpenSSL one-line form. */
export function issuerDn(cert: X509Certificate | string): string {
  return names(cert instanceof X509Certificate ? cert : new X509Certificate(cert)).issuer.oneLine;
}
