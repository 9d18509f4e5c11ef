/**
 * PEM handling: split bundles (proxy files = cert + key + chain), DER<->PEM, and the lenient CSR
 * armour normalisation the ARC client applies (bare base64 is accepted).
 */
import { Failure } from "@ce/model";
import { X509Certificate } from "node:crypto";

export interface PemBlock {
  label: string;
  /** Normalised PEM text (LF line endings, 64-column body, trailing newline). */
  pem: string;
  der: Buffer;
}

export interface PemBundle {
  certificates: string[];
  privateKeys: string[];
  other: PemBlock[];
}

/** Markers are matched one by one (never BEGIN…END with a backreference, which is quadratic). */
const MARKER_RE = /-----(BEGIN|END) ([A-Z0-9 ]{1,64})-----/g;
const CERT_LABELS = new Set(["CERTIFICATE", "X509 CERTIFICATE", "TRUSTED CERTIFICATE"]);
const KEY_LABELS = new Set(["RSA PRIVATE KEY", "PRIVATE KEY", "EC PRIVATE KEY", "ENCRYPTED PRIVATE KEY"]);

interface Marker {
  begin: boolean;
  label: string;
  start: number;
  end: number;
}

/**
 * All PEM blocks in `text`, ignoring junk around them and CRLF line endings: each BEGIN pairs with
 * the nearest later END of the same label, and scanning resumes after that END. One pass over the
 * markers plus one backwards pass for "nearest END per label", so the work is linear in the input
 * however many unmatched BEGINs a hostile body carries.
 */
export function pemBlocks(text: string): PemBlock[] {
  const src = text.replace(/\r\n?/g, "\n");
  const markers: Marker[] = [];
  for (const m of src.matchAll(MARKER_RE))
    markers.push({ begin: m[1] === "BEGIN", label: m[2] ?? "", start: m.index, end: m.index + m[0].length });
  const nextEnd = new Array<Marker | undefined>(markers.length);
  const nearest = new Map<string, Marker>();
  for (let i = markers.length - 1; i >= 0; i--) {
    const mk = markers[i]!;
    if (mk.begin) nextEnd[i] = nearest.get(mk.label);
    else nearest.set(mk.label, mk);
  }
  const out: PemBlock[] = [];
  let pos = 0;
  markers.forEach((mk, i) => {
    const end = nextEnd[i];
    if (!mk.begin || mk.start < pos || !end) return;
    out.push(block(mk.label, src.slice(mk.end, end.start)));
    pos = end.end;
  });
  return out;
}

function block(label: string, text: string): PemBlock {
  let body = text;
  // Legacy encrypted keys carry RFC 1421 headers ("Proc-Type: ..."): keep them verbatim.
  const headerEnd = body.indexOf("\n\n");
  const hasHeaders = /^\s*[A-Za-z-]+:/.test(body) && headerEnd >= 0;
  const headers = hasHeaders ? body.slice(0, headerEnd).trim() + "\n\n" : "";
  if (hasHeaders) body = body.slice(headerEnd + 2);
  const b64 = body.replace(/[^A-Za-z0-9+/=]/g, "");
  const der = Buffer.from(b64, "base64");
  return { label, der, pem: armour(label, b64, headers) };
}

function armour(label: string, b64: string, headers = ""): string {
  const lines = b64.match(/.{1,64}/g) ?? [];
  return `-----BEGIN ${label}-----\n${headers}${lines.join("\n")}\n-----END ${label}-----\n`;
}

/** Split a PEM bundle into certificates and private keys (in file order); other blocks kept aside. */
export function splitPem(text: string): PemBundle {
  const bundle: PemBundle = { certificates: [], privateKeys: [], other: [] };
  for (const b of pemBlocks(text)) {
    if (CERT_LABELS.has(b.label)) bundle.certificates.push(b.label === "CERTIFICATE" ? b.pem : derToPem(b.der));
    else if (KEY_LABELS.has(b.label)) bundle.privateKeys.push(b.pem);
    else bundle.other.push(b);
  }
  return bundle;
}

/**
 * Parse every certificate of a PEM bundle. Throws (without echoing input) on an unparsable block,
 * and before parsing any when the bundle holds more than `max` certificates.
 */
/** A bundle with more certificates than the caller accepts (checked before any is parsed). */
export class TooManyCertificatesError extends Failure<"TOO_MANY_CERTIFICATES"> {
  constructor(message: string) {
    super("TOO_MANY_CERTIFICATES", message);
  }
}

export function parseCertificates(text: string, max = Infinity): X509Certificate[] {
  const pems = splitPem(text).certificates;
  if (pems.length > max) throw new TooManyCertificatesError(`PEM bundle holds ${pems.length} certificates; at most ${max} are accepted`);
  return pems.map((pem, i) => {
    try {
      return new X509Certificate(pem);
    } catch {
      throw new Error(`certificate #${i + 1} in PEM bundle is not a valid X.509 certificate`);
    }
  });
}

export function derToPem(der: Buffer | Uint8Array, label = "CERTIFICATE"): string {
  return armour(label, Buffer.from(der).toString("base64"));
}

/** DER of the first PEM block (optionally with a given label), or of bare base64 text. */
export function pemToDer(text: string, label?: string): Buffer {
  const blocks = pemBlocks(text).filter((b) => label === undefined || b.label === label);
  if (blocks[0]) return blocks[0].der;
  if (/-----BEGIN/.test(text)) throw new Error(`no PEM block${label ? ` labelled ${label}` : ""} found`);
  const b64 = text.replace(/\s+/g, "");
  if (!/^[A-Za-z0-9+/]+=*$/.test(b64)) throw new Error("input is neither PEM nor base64");
  return Buffer.from(b64, "base64");
}

/** Normalise CSR armour: PEM (either CSR label) or bare base64 -> `CERTIFICATE REQUEST` PEM. */
export function normalizeCsrPem(text: string): string {
  const block = pemBlocks(text).find((b) => b.label === "CERTIFICATE REQUEST" || b.label === "NEW CERTIFICATE REQUEST");
  const der = block ? block.der : pemToDer(text);
  return derToPem(der, "CERTIFICATE REQUEST");
}

export function toX509(c: X509Certificate | string | Buffer): X509Certificate {
  return c instanceof X509Certificate ? c : new X509Certificate(c);
}
