/**
 * Verification of VOMS attribute certificates and extraction of the FQANs a verified chain
 * carries. Trust comes from the CA store plus the vomsdir (VomsDir, voms-dir.ts): the AC's signer
 * is either the certificate chain inside the AC, accepted only if it verifies to a trusted CA AND
 * matches the `.lsc` file for that VO and host, or a certificate installed in vomsdir/<vo>/.
 * An AC never changes the identity; its FQANs only add groups.
 */
import { verify as cryptoVerify, type X509Certificate } from "node:crypto";
import { certInfo, normalizeSerial } from "./cert.js";
import { SIG_HASH } from "./der.js";
import type { TrustStore } from "./truststore.js";
import { verifyChain, type VerifyOk } from "./verify.js";
import { parseVomsExtension, VOMS_OID, VomsParseError, type VomsAc } from "./voms.js";

/** What the verifier needs from the vomsdir (an interface so tests can give it in memory). */
export interface VomsTrust {
  /** Allowed signer chains for (vo, host) from `<vomsdir>/<vo>/<host>.lsc`: DN lists, server first. */
  lsc(vo: string, host: string): string[][] | undefined;
  /** Certificates installed directly under `<vomsdir>/<vo>/` (older layout). */
  certificates(vo: string): X509Certificate[];
}

export interface VomsVerifyOptions {
  now?: Date;
  /** Clock leeway for the AC validity period, seconds. */
  leewaySeconds?: number;
  /** This CE's host names: a targeted AC must name one of them. */
  hostNames: readonly string[];
}

export interface VomsAttributes {
  vo: string;
  /** FQANs as issued, primary first. */
  fqans: string[];
  /** Who signed them (one-line DN) and until when they hold. */
  issuer: string;
  notAfter: Date;
}

export interface VomsResult {
  /** Attributes of every AC that verified, in the order carried. */
  valid: VomsAttributes[];
  /** One reason per AC that did not verify (the AC is ignored, or the proxy refused by policy). */
  invalid: string[];
}

export function verifyVomsAc(
  ac: VomsAc,
  holder: X509Certificate,
  store: TrustStore,
  trust: VomsTrust,
  opts: VomsVerifyOptions,
): VomsAttributes | string {
  try {
    return check(ac, holder, store, trust, opts);
  } catch (e) {
    // Client-controlled bytes: whatever a parser below throws is a refusal with a reason, never a 500.
    return `VOMS AC of VO ${JSON.stringify(ac.vo)}: unusable (${(e as Error).message.slice(0, 200)})`;
  }
}

function check(ac: VomsAc, holder: X509Certificate, store: TrustStore, trust: VomsTrust, opts: VomsVerifyOptions): VomsAttributes | string {
  const now = (opts.now ?? new Date()).getTime();
  const leeway = (opts.leewaySeconds ?? 300) * 1000;
  const what = `VOMS AC of VO ${JSON.stringify(ac.vo)} from ${JSON.stringify(ac.issuerDn)}`;
  if (ac.version !== 1) return `${what}: version ${ac.version + 1} is not v2`;
  if (ac.unknownCritical.length) return `${what}: unsupported critical extension ${ac.unknownCritical.join(", ")}`;
  if (ac.notBefore.getTime() - leeway > now) return `${what}: not valid before ${ac.notBefore.toISOString()}`;
  if (ac.notAfter.getTime() + leeway < now) return `${what}: expired at ${ac.notAfter.toISOString()}`;
  // Holder: the user certificate the proxy chain descends from. VOMS writes the holder's subject
  // where RFC 5755 puts the issuer, so either name is accepted; the serial must match exactly.
  const h = certInfo(holder);
  if (!ac.holder.serialHex || normalizeSerial(ac.holder.serialHex) !== normalizeSerial(h.serialHex)) {
    return `${what}: issued for another certificate (holder serial ${ac.holder.serialHex ?? "missing"}, not ${h.serialHex})`;
  }
  const hn = ac.holder.issuerDn?.toLowerCase();
  if (hn !== h.subject.oneLine.toLowerCase() && hn !== h.issuer.oneLine.toLowerCase()) {
    return `${what}: issued for another certificate (holder ${JSON.stringify(ac.holder.issuerDn)})`;
  }
  // The signer is trusted for this VO only (vomsdir/<vo>/): an FQAN of another VO is forged.
  const foreign = ac.fqans.find((f) => f !== `/${ac.vo}` && !f.startsWith(`/${ac.vo}/`));
  if (foreign) return `${what}: FQAN ${JSON.stringify(foreign)} is outside the VO ${JSON.stringify(ac.vo)} its signer is trusted for`;
  if (ac.targets && ac.targets.length > 0) {
    const ours = opts.hostNames.map((n) => n.toLowerCase());
    const named = ac.targets.map((t) =>
      t
        .replace(/^[a-z][a-z0-9+.-]*:\/\//i, "")
        .replace(/[:/].*$/, "")
        .toLowerCase(),
    );
    if (!named.some((t) => ours.includes(t))) return `${what}: targeted at ${ac.targets.join(", ")}, not at this CE`;
  }
  const signer = findSigner(ac, store, trust);
  if (typeof signer === "string") return `${what}: ${signer}`;
  return { vo: ac.vo, fqans: ac.fqans, issuer: ac.issuerDn, notAfter: ac.notAfter };
}

function findSigner(ac: VomsAc, store: TrustStore, trust: VomsTrust): X509Certificate | string {
  const hash = SIG_HASH[ac.sigAlgOid];
  if (!hash) return `unsupported signature algorithm ${ac.sigAlgOid}`;
  const sigOk = (c: X509Certificate) => {
    try {
      return cryptoVerify(hash, ac.tbs, c.publicKey, ac.signature);
    } catch {
      return false;
    }
  };
  const host = ac.uri.replace(/:\d+$/, "");
  if (ac.certs.length > 0) {
    const server = ac.certs[0]!;
    const info = certInfo(server);
    if (info.subject.oneLine.toLowerCase() !== ac.issuerDn.toLowerCase()) return "the certificate it carries is not its issuer's";
    const chain = verifyChain(ac.certs, store);
    if (!chain.ok) return `its signing certificate does not verify: ${chain.reason}`;
    const lsc = trust.lsc(ac.vo, host);
    if (lsc) {
      const dns = [info.subject.oneLine, ...chainIssuers(chain)].map((d) => d.toLowerCase());
      const match = lsc.some((allowed) => allowed.length <= dns.length && allowed.every((d, i) => d.toLowerCase() === dns[i]));
      if (!match) return `its signer ${JSON.stringify(info.subject.oneLine)} is not listed in the .lsc file for ${ac.vo}/${host}`;
    } else if (!trust.certificates(ac.vo).some((c) => c.fingerprint256 === server.fingerprint256)) {
      return `no .lsc file for ${ac.vo}/${host} and its signer is not installed in the vomsdir`;
    }
    return sigOk(server) ? server : "bad signature";
  }
  const installed = trust.certificates(ac.vo).filter((c) => certInfo(c).subject.oneLine.toLowerCase() === ac.issuerDn.toLowerCase());
  if (installed.length === 0)
    return `it carries no signing certificate and none for ${JSON.stringify(ac.issuerDn)} is installed in the vomsdir`;
  return installed.find(sigOk) ?? "bad signature";
}

/** Issuer DNs up the verified chain of the VOMS server certificate (its CA, then that CA's …). */
function chainIssuers(chain: VerifyOk): string[] {
  const out = [chain.issuerCA];
  for (const c of chain.chain.slice(1)) out.push(certInfo(c).issuer.oneLine);
  return out;
}

/**
 * The VOMS attributes a verified client chain carries: the ACs of the end-entity-most proxy that
 * has the extension (later proxies inherit it), each verified against the chain's user certificate.
 */
export function vomsAttributesOf(chain: VerifyOk, store: TrustStore, trust: VomsTrust, opts: VomsVerifyOptions): VomsResult {
  const out: VomsResult = { valid: [], invalid: [] };
  for (let i = chain.proxies - 1; i >= 0; i--) {
    const ext = certInfo(chain.chain[i]!).extensions.get(VOMS_OID.acSeq);
    if (!ext) continue;
    let acs: VomsAc[];
    try {
      acs = parseVomsExtension(Buffer.from(ext.value, "binary"));
    } catch (e) {
      out.invalid.push(e instanceof VomsParseError ? e.message : `unparsable VOMS extension: ${(e as Error).message}`);
      return out;
    }
    for (const ac of acs) {
      const r = verifyVomsAc(ac, chain.endEntity, store, trust, opts);
      if (typeof r === "string") out.invalid.push(r);
      else out.valid.push(r);
    }
    return out;
  }
  return out;
}
