/**
 * VOMS attribute certificates (RFC 5755 ACs signed by a VO's VOMS server) carried in a proxy's
 * extension 1.3.6.1.4.1.8005.100.100.5. This file only parses: DER in, plain values out, no I/O.
 * The AC structure comes from @peculiar/asn1-x509-attr; the bytes that were signed are sliced
 * from the original DER (re-encoding could change them).
 */
import { Failure } from "@ce/model";
import { X509Certificate } from "node:crypto";
import { AsnArray, AsnParser, AsnProp, AsnPropTypes, AsnType, AsnTypeTypes, AsnConvert, OctetString } from "@peculiar/asn1-schema";
import { GeneralNames, Name as AsnName } from "@peculiar/asn1-x509";
import { AttributeCertificate } from "@peculiar/asn1-x509-attr";
import forge from "node-forge";
import { children, readTlv, signedParts, slice } from "./der.js";
import { nameFromAsn1 } from "./dn.js";
import { certInfo } from "./cert.js";

export const VOMS_OID = {
  /** Proxy extension: SEQUENCE OF SEQUENCE OF AttributeCertificate. */
  acSeq: "1.3.6.1.4.1.8005.100.100.5",
  /** AC attribute: IetfAttrSyntax, policyAuthority `vo://host:port`, values = FQANs. */
  fqans: "1.3.6.1.4.1.8005.100.100.4",
  /** AC extension: the VOMS server's certificate chain. */
  certList: "1.3.6.1.4.1.8005.100.100.10",
  /** AC extension: VOMS generic attributes (informational). */
  generic: "1.3.6.1.4.1.8005.100.100.11",
  /** AC extension: tags (old VOMS). */
  tags: "1.3.6.1.4.1.8005.100.100.6",
  targets: "2.5.29.55",
  noRevAvail: "2.5.29.56",
  authorityKeyId: "2.5.29.35",
} as const;

/** AC extensions we understand; a critical one outside this set makes the AC invalid. */
export const KNOWN_AC_EXTENSIONS = new Set<string>([
  VOMS_OID.certList,
  VOMS_OID.generic,
  VOMS_OID.tags,
  VOMS_OID.targets,
  VOMS_OID.noRevAvail,
  VOMS_OID.authorityKeyId,
]);

export class VomsParseError extends Failure<"VOMS_PARSE"> {
  constructor(message: string) {
    super("VOMS_PARSE", message);
  }
}

export interface VomsAc {
  /** AC version field as encoded (1 = v2, the only one RFC 5755 allows). */
  version: number;
  /** VO name from the policy authority `vo://host:port`. */
  vo: string;
  /** `host:port` of the VOMS server from the policy authority. */
  uri: string;
  /** FQANs in the order the server issued them; the first is the primary FQAN. */
  fqans: string[];
  /** The holder: issuer DN and serial of the certificate the AC was issued for. */
  holder: { issuerDn?: string; serialHex?: string };
  /** One-line DN of the VOMS server that signed the AC. */
  issuerDn: string;
  notBefore: Date;
  notAfter: Date;
  /** The VOMS server's certificate chain, if the AC carries it. */
  certs: X509Certificate[];
  /** Target names (DNS or URI), if the AC is targeted. */
  targets?: string[];
  /** Critical extensions this code does not understand. */
  unknownCritical: string[];
  tbs: Buffer;
  sigAlgOid: string;
  signature: Buffer;
}

// IetfAttrSyntax value CHOICE, declared here because the upstream class lacks the CHOICE type
// annotation (it parses as a SEQUENCE and rejects every real VOMS AC). Decorators applied by
// call, so no compiler decorator setting is needed.
class AttrValue {
  octets?: OctetString;
  oid?: string;
  string?: string;
}
AsnType({ type: AsnTypeTypes.Choice })(AttrValue);
AsnProp({ type: OctetString })(AttrValue.prototype, "octets");
AsnProp({ type: AsnPropTypes.ObjectIdentifier })(AttrValue.prototype, "oid");
AsnProp({ type: AsnPropTypes.Utf8String })(AttrValue.prototype, "string");

class IetfAttr {
  policyAuthority?: GeneralNames;
  values: AttrValue[] = [];
}
AsnProp({ type: GeneralNames, implicit: true, context: 0, optional: true })(IetfAttr.prototype, "policyAuthority");
AsnProp({ type: AttrValue, repeated: "sequence" })(IetfAttr.prototype, "values");

class CertSeq extends AsnArray<ArrayBuffer> {}
AsnType({ type: AsnTypeTypes.Sequence, itemType: AsnPropTypes.Any })(CertSeq);

/** Most ACs accepted from one proxy (a proxy normally carries one per VO). */
const MAX_ACS = 8;
const MAX_FQANS = 256;

/** Every AC in a proxy's VOMS extension (its extnValue contents). Throws VomsParseError. */
export function parseVomsExtension(ext: Buffer): VomsAc[] {
  try {
    const outer = readTlv(ext, 0);
    const out: VomsAc[] = [];
    for (const seq of children(ext, outer)) {
      for (const acTlv of children(ext, seq)) {
        if (out.length >= MAX_ACS) throw new VomsParseError(`more than ${MAX_ACS} attribute certificates in one proxy`);
        out.push(parseAc(slice(ext, acTlv)));
      }
    }
    return out;
  } catch (e) {
    if (e instanceof VomsParseError) throw e;
    throw new VomsParseError(`unparsable VOMS extension: ${(e as Error).message}`);
  }
}

export function parseAc(der: Buffer): VomsAc {
  const ac = AsnParser.parse(der, AttributeCertificate);
  const { tbs, sigAlgOid, signature } = signedParts(der);
  const info = ac.acinfo;
  const base = info.holder.baseCertificateID;
  const holderIssuer = base ? dirName(base.issuer) : undefined;
  const issuerNames = info.issuer.v2Form?.issuerName ?? info.issuer.v1Form;
  const issuerDn = issuerNames ? dirName(issuerNames) : undefined;
  if (!issuerDn) throw new VomsParseError("AC issuer has no directory name");
  let vo = "";
  let uri = "";
  const fqans: string[] = [];
  for (const attr of info.attributes) {
    if (attr.type !== VOMS_OID.fqans) continue;
    for (const v of attr.values) {
      const syn = AsnParser.parse(v, IetfAttr);
      const auth =
        syn.policyAuthority?.find((g) => g.uniformResourceIdentifier)?.uniformResourceIdentifier ??
        syn.policyAuthority?.find((g) => g.dNSName)?.dNSName;
      const m = auth ? /^([^:/]+):\/\/(.+)$/.exec(auth) : null;
      if (m) {
        vo = m[1]!;
        uri = m[2]!;
      }
      for (const val of syn.values) {
        const text = val.octets ? Buffer.from(val.octets.buffer).toString("utf8") : val.string;
        if (text !== undefined) fqans.push(text);
        if (fqans.length > MAX_FQANS) throw new VomsParseError(`more than ${MAX_FQANS} FQANs in one AC`);
      }
    }
  }
  if (!vo) throw new VomsParseError("AC carries no VOMS attribute with a vo://host policy authority");
  const certs: X509Certificate[] = [];
  let targets: string[] | undefined;
  const unknownCritical: string[] = [];
  for (const e of info.extensions ?? []) {
    const value = Buffer.from(e.extnValue.buffer);
    if (e.extnID === VOMS_OID.certList) {
      // VOMS encodes SEQUENCE { SEQUENCE OF Certificate }; accept the bare SEQUENCE OF as well.
      let list = readTlv(value, 0);
      const first = children(value, list)[0];
      if (
        first &&
        children(value, first).length > 0 &&
        children(value, children(value, first)[0]!).length === 3 &&
        readTlv(value, children(value, children(value, first)[0]!)[0]!.start).tag === 0x30
      ) {
        list = first;
      }
      for (const c of children(value, list)) {
        const x = new X509Certificate(slice(value, c));
        certInfo(x); // parsed here, so a malformed carried certificate is a parse error, not a later throw
        certs.push(x);
      }
    } else if (e.extnID === VOMS_OID.targets) {
      targets = targetNames(value);
    } else if (e.critical && !KNOWN_AC_EXTENSIONS.has(e.extnID)) {
      unknownCritical.push(e.extnID);
    }
  }
  return {
    version: info.version,
    vo,
    uri,
    fqans,
    holder: { issuerDn: holderIssuer, serialHex: base ? Buffer.from(base.serial).toString("hex") : undefined },
    issuerDn,
    notBefore: info.attrCertValidityPeriod.notBeforeTime,
    notAfter: info.attrCertValidityPeriod.notAfterTime,
    certs,
    ...(targets ? { targets } : {}),
    unknownCritical,
    tbs,
    sigAlgOid,
    signature,
  };
}

/**
 * Names in a targetInformation extension. Encoders differ in how they wrap Targets (VOMS adds a
 * SEQUENCE level and tags GeneralName explicitly), so the walk collects every dNSName ([2]) and
 * URI ([6]) GeneralName at any depth: both are the only name forms a target can usefully carry.
 */
function targetNames(der: Buffer, tlv = readTlv(der, 0), depth = 0, out: string[] = []): string[] {
  if (depth > 8 || out.length > 64) throw new VomsParseError("targetInformation too deeply nested or too long");
  const constructed = (der[tlv.start]! & 0x20) !== 0;
  if (!constructed) {
    if (tlv.tag === 0x82 || tlv.tag === 0x86) out.push(der.subarray(tlv.start + tlv.headerLen, tlv.end).toString("latin1"));
    return out;
  }
  for (const c of children(der, tlv)) targetNames(der, c, depth + 1, out);
  return out;
}

/** One-line DN of the first directoryName in GeneralNames (OpenSSL form, as for certificates). */
function dirName(names: GeneralNames): string | undefined {
  const dn = names.find((g) => g.directoryName)?.directoryName;
  if (!dn) return undefined;
  const der = Buffer.from(AsnConvert.serialize(dn as AsnName));
  return nameFromAsn1(forge.asn1.fromDer(der.toString("binary"))).oneLine;
}
