export { derToPem, normalizeCsrPem, parseCertificates, pemBlocks, pemToDer, splitPem, type PemBlock, type PemBundle } from "./pem.js";
export { attributeOid, formatRdns, issuerDn, parseDn, subjectDn, SHORT_NAMES, type Ava, type Name } from "./dn.js";
export { certInfo, CertParseError, OID, type CertInfo, type KeyUsage, type ProxyCertInfo } from "./cert.js";
export { classifyCertificate, isProxy, type Classification, type ProxyPolicy, type ProxyType } from "./proxy.js";
export { TrustStore, parseCrl, type Crl } from "./truststore.js";
export { verifyChain, type VerifyErrorCode, type VerifyFail, type VerifyOk, type VerifyOptions, type VerifyResult } from "./verify.js";
export {
  acceptDelegatedChain,
  createCsr,
  KeyPool,
  type AcceptOptions,
  type AcceptResult,
  type DelegationErrorCode,
  type KeyPair,
  type KeyPoolOptions,
} from "./delegation.js";
export { peerCertificateChain } from "./tls.js";
export { parseVomsExtension, parseAc, VOMS_OID, VomsParseError, type VomsAc } from "./voms.js";
export {
  verifyVomsAc,
  vomsAttributesOf,
  type VomsAttributes,
  type VomsResult,
  type VomsTrust,
  type VomsVerifyOptions,
} from "./voms-verify.js";
export { VomsDir, parseLsc } from "./voms-dir.js";
export { DEFAULT_TRUST_POLICY, type TrustPolicy } from "./truststore.js";
