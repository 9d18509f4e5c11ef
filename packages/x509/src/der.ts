/**
 * Minimal DER TLV walker that keeps byte offsets: signatures cover exact encoded bytes (TBS of a
 * CRL or CSR), which a decode/re-encode round-trip through forge could alter.
 */
export interface Tlv {
  tag: number;
  start: number;
  headerLen: number;
  len: number;
  end: number;
}

export function readTlv(buf: Buffer, off: number): Tlv {
  if (off + 2 > buf.length) throw new Error("truncated DER");
  const tag = buf[off]!;
  if ((tag & 0x1f) === 0x1f) throw new Error("multi-byte DER tags not supported");
  let len = buf[off + 1]!;
  let headerLen = 2;
  if (len & 0x80) {
    const n = len & 0x7f;
    if (n === 0 || n > 4 || off + 2 + n > buf.length) throw new Error("bad DER length");
    len = 0;
    for (let i = 0; i < n; i++) len = len * 256 + buf[off + 2 + i]!;
    headerLen += n;
  }
  const end = off + headerLen + len;
  if (end > buf.length) throw new Error("truncated DER");
  return { tag, start: off, headerLen, len, end };
}

export function children(buf: Buffer, parent: Tlv): Tlv[] {
  const out: Tlv[] = [];
  for (let off = parent.start + parent.headerLen; off < parent.end;) {
    const t = readTlv(buf, off);
    out.push(t);
    off = t.end;
  }
  return out;
}

export const slice = (buf: Buffer, t: Tlv): Buffer => buf.subarray(t.start, t.end);
export const content = (buf: Buffer, t: Tlv): Buffer => buf.subarray(t.start + t.headerLen, t.end);

/** Signature algorithm OID -> digest name for crypto.verify (null = digest implied, e.g. Ed25519). */
export const SIG_HASH: Record<string, string | null> = {
  "1.2.840.113549.1.1.5": "sha1",
  "1.2.840.113549.1.1.14": "sha224",
  "1.2.840.113549.1.1.11": "sha256",
  "1.2.840.113549.1.1.12": "sha384",
  "1.2.840.113549.1.1.13": "sha512",
  "1.2.840.10045.4.1": "sha1",
  "1.2.840.10045.4.3.1": "sha224",
  "1.2.840.10045.4.3.2": "sha256",
  "1.2.840.10045.4.3.3": "sha384",
  "1.2.840.10045.4.3.4": "sha512",
  "1.3.101.112": null,
  "1.3.101.113": null,
};

/** Outer structure shared by certificates, CRLs and CSRs: SEQUENCE { tbs, algId, BIT STRING }. */
export function signedParts(der: Buffer): { tbs: Buffer; tbsTlv: Tlv; sigAlgOid: string; signature: Buffer } {
  const outer = readTlv(der, 0);
  const [tbsTlv, alg, sig] = children(der, outer);
  if (!tbsTlv || !alg || !sig || sig.tag !== 0x03) throw new Error("not a signed ASN.1 structure");
  const oidTlv = children(der, alg)[0];
  if (!oidTlv || oidTlv.tag !== 0x06) throw new Error("bad AlgorithmIdentifier");
  const signature = content(der, sig).subarray(1); // skip unused-bits octet
  return { tbs: slice(der, tbsTlv), tbsTlv, sigAlgOid: decodeOid(content(der, oidTlv)), signature };
}

export function decodeOid(b: Buffer): string {
  const parts: number[] = [];
  let v = 0;
  for (const byte of b) {
    v = v * 128 + (byte & 0x7f);
    if (!(byte & 0x80)) {
      parts.push(v);
      v = 0;
    }
  }
  const first = parts.shift() ?? 0;
  const a = first < 80 ? Math.floor(first / 40) : 2;
  return [a, first - a * 40, ...parts].join(".");
}
