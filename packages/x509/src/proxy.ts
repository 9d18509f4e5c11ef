/**
 * Certificate classification: CA, end-entity, RFC 3820 proxy, pre-RFC (GT3 draft) proxy, or legacy
 * Globus proxy (no extension; subject = issuer + `CN=proxy` / `CN=limited proxy`).
 */
import { X509Certificate } from "node:crypto";
import { avaText, rdnsKey } from "./dn.js";
import { certInfo, OID, type CertInfo } from "./cert.js";

export type ProxyType = "rfc3820" | "draft" | "legacy";
export type ProxyPolicy = "inheritAll" | "independent" | "limited" | "other";

export type Classification =
  | { kind: "ca"; pathLen?: number }
  | { kind: "end-entity" }
  | {
      kind: "proxy";
      proxyType: ProxyType;
      policy: ProxyPolicy;
      /** Policy language OID (for legacy proxies the equivalent RFC 3820 language). */
      policyLanguage: string;
      limited: boolean;
      pathLen?: number;
    };

const POLICY_BY_OID: Record<string, ProxyPolicy> = {
  [OID.inheritAll]: "inheritAll",
  [OID.independent]: "independent",
  [OID.limited]: "limited",
};

const CN = "2.5.4.3";

/** The extra CN value if `info`'s subject is its issuer name plus exactly one single-valued CN RDN. */
export function proxyCnSuffix(info: CertInfo): string | undefined {
  const s = info.subject.rdns;
  const last = s[s.length - 1];
  if (!last || last.length !== 1 || last[0]!.oid !== CN) return undefined;
  if (rdnsKey(s.slice(0, -1)) !== info.issuer.key) return undefined;
  return avaText(last[0]!);
}

export function classifyCertificate(cert: X509Certificate | CertInfo): Classification {
  const info = cert instanceof X509Certificate ? certInfo(cert) : cert;
  const pci = info.proxyCertInfo;
  if (pci) {
    const policy = POLICY_BY_OID[pci.policyLanguage] ?? "other";
    return {
      kind: "proxy",
      proxyType: pci.oid === OID.proxyCertInfo ? "rfc3820" : "draft",
      policy,
      policyLanguage: pci.policyLanguage,
      limited: policy === "limited",
      ...(pci.pathLen !== undefined ? { pathLen: pci.pathLen } : {}),
    };
  }
  if (info.basicConstraints?.ca) {
    return { kind: "ca", ...(info.basicConstraints.pathLen !== undefined ? { pathLen: info.basicConstraints.pathLen } : {}) };
  }
  const cn = proxyCnSuffix(info);
  if (cn === "proxy" || cn === "limited proxy") {
    const limited = cn === "limited proxy";
    return {
      kind: "proxy",
      proxyType: "legacy",
      policy: limited ? "limited" : "inheritAll",
      policyLanguage: limited ? OID.limited : OID.inheritAll,
      limited,
    };
  }
  return { kind: "end-entity" };
}

export function isProxy(cert: X509Certificate | CertInfo): boolean {
  return classifyCertificate(cert).kind === "proxy";
}
