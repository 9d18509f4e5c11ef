/**
 * Client chain verification with grid proxy support (RFC 3820, GT3 draft, legacy Globus), because
 * Node's TLS stack rejects proxy chains. Signatures are checked with Node crypto; forge only parses.
 *
 * Identity binding: the path starts at the FIRST certificate given, which the caller must have
 * bound to a proven key (the TLS leaf; the first certificate a trusted TLS proxy forwarded; the
 * certificate carrying a delegation's key). Each next link is a certificate whose key verifies
 * the previous one's signature: a trust-store CA or a presented certificate. Presented
 * certificates off that path are ignored; they can never become the leaf or the identity.
 *
 * Work for an unauthenticated chain is bounded before any signature check: number and size of
 * certificates, key types and sizes, DN length, path length, and signature verifications.
 */
import { Failure } from "@ce/model";
import { X509Certificate } from "node:crypto";
import { CertParseError, certInfo, KNOWN_CRITICAL, OID, type CertInfo } from "./cert.js";
import { parseCertificates } from "./pem.js";
import { classifyCertificate, proxyCnSuffix, type Classification } from "./proxy.js";
import type { TrustStore } from "./truststore.js";

export type VerifyErrorCode =
  | "EXPIRED"
  | "NOT_YET_VALID"
  | "UNTRUSTED_ISSUER"
  | "BAD_SIGNATURE"
  | "PROXY_RULES"
  | "REVOKED"
  | "MALFORMED"
  | "KEY_REJECTED"
  | "NAMESPACE"
  | "CRL_UNUSABLE"
  | "LIMITS"
  | "EMPTY";

export interface VerifyOk {
  ok: true;
  /** One-line subject DN of the end-entity certificate (the grid identity). */
  identity: string;
  endEntity: X509Certificate;
  /** Number of proxy certificates above the end-entity certificate. */
  proxies: number;
  limited: boolean;
  /** Earliest notAfter of all certificates in the path, trust anchors included. */
  notAfter: Date;
  /** One-line DN of the CA that issued the end-entity certificate. */
  issuerCA: string;
  /** The presented certificates that form the path, leaf first (trust-store CAs excluded). */
  chain: X509Certificate[];
}

export interface VerifyFail {
  ok: false;
  code: VerifyErrorCode;
  reason: string;
}

export type VerifyResult = VerifyOk | VerifyFail;

export interface VerifyOptions {
  now?: Date;
  /** Maximum path length (safety bound against crafted bundles). Default 12. */
  maxDepth?: number;
  /** Maximum number of presented certificates; bounds the issuer search. Default 16. */
  maxCerts?: number;
  /** Maximum signature verifications for one chain. Default 32. */
  maxSignatureChecks?: number;
  /** Largest RSA modulus accepted (bits); RSA verification cost grows with it. Default 8192. */
  maxRsaBits?: number;
  /** Smallest RSA modulus accepted (bits). Default 1024 (older grid proxies). */
  minRsaBits?: number;
}

export const VERIFY_LIMITS: Required<Omit<VerifyOptions, "now">> = {
  maxDepth: 12,
  maxCerts: 16,
  maxSignatureChecks: 32,
  maxRsaBits: 8192,
  minRsaBits: 1024,
};
/** Largest DER certificate accepted (VOMS attribute certificates make proxies a few KB). */
const MAX_CERT_BYTES = 64 * 1024;
/** Longest subject DN matched against namespace patterns. */
const MAX_DN_CHARS = 4096;
const EC_CURVES = new Set(["prime256v1", "secp384r1", "secp521r1"]);

class Fail extends Failure<VerifyErrorCode> {
  constructor(code: VerifyErrorCode, message: string) {
    super(code, message);
  }
}

const dnOf = (i: CertInfo) => JSON.stringify(i.subject.oneLine);

export function verifyChain(chain: X509Certificate[] | string, store: TrustStore, opts: VerifyOptions = {}): VerifyResult {
  try {
    return run(chain, store, opts);
  } catch (e) {
    if (e instanceof Fail) return { ok: false, code: e.code, reason: e.message };
    if (e instanceof CertParseError) return { ok: false, code: "MALFORMED", reason: e.message };
    return { ok: false, code: "MALFORMED", reason: `unparsable certificate chain: ${(e as Error).message}` };
  }
}

interface Link {
  info: CertInfo;
  fromStore: boolean;
}

function run(input: X509Certificate[] | string, store: TrustStore, opts: VerifyOptions): VerifyOk {
  const now = opts.now ?? new Date();
  const lim = { ...VERIFY_LIMITS, ...opts };
  const certs = typeof input === "string" ? parseCertificates(input) : input;
  if (certs.length === 0) throw new Fail("EMPTY", "no certificate presented");
  if (certs.length > lim.maxCerts) throw new Fail("LIMITS", `too many certificates presented (${certs.length}, at most ${lim.maxCerts})`);
  for (const c of certs) checkCheap(c, lim);
  const seen = new Set<string>();
  // Deduplicated in order, so the first certificate (the proven one) stays the leaf.
  const bundle = certs.filter((c) => !seen.has(c.fingerprint256) && seen.add(c.fingerprint256)).map(certInfo);
  for (const i of bundle) {
    if (i.subject.oneLine.length > MAX_DN_CHARS || i.issuer.oneLine.length > MAX_DN_CHARS) {
      throw new Fail("LIMITS", `a certificate name is longer than ${MAX_DN_CHARS} characters`);
    }
  }

  const budget: Budget = { left: lim.maxSignatureChecks };
  const path = buildPath(bundle, store, lim.maxDepth, budget);
  checkStructure(path);
  for (const { info } of path) {
    if (info.notBefore.getTime() > now.getTime()) {
      throw new Fail("NOT_YET_VALID", `certificate ${dnOf(info)} is not valid before ${info.notBefore.toISOString()}`);
    }
    if (info.notAfter.getTime() < now.getTime()) {
      throw new Fail("EXPIRED", `certificate ${dnOf(info)} expired at ${info.notAfter.toISOString()}`);
    }
  }
  const kinds = path.map((l) => classifyCertificate(l.info));
  const ee = kinds.findIndex((k) => k.kind !== "proxy");
  checkCaPolicy(path, ee, store, now, budget);
  const eeInfo = path[ee]!.info;
  return {
    ok: true,
    identity: eeInfo.subject.oneLine,
    endEntity: eeInfo.x509,
    proxies: ee,
    limited: kinds.some((k) => k.kind === "proxy" && k.limited),
    notAfter: new Date(Math.min(...path.map((l) => l.info.notAfter.getTime()))),
    issuerCA: eeInfo.issuer.oneLine,
    chain: path.filter((l) => !l.fromStore).map((l) => l.info.x509),
  };
}

/**
 * CRL and namespace rules for every certificate a CA in the path issued, from the anchor down so
 * that a refusal names the highest link at fault (proxies are bound by the proxy naming rules instead). An installed CA answers
 * with its own CRL and policy file. A CA the client presented that is not installed is held to
 * the same rules: its CRL must be in the directory (per `crlRequired`), and the policy file of the
 * nearest installed CA above it decides which subjects it may issue — so a sub-CA cannot vouch
 * for names its anchor could not.
 */
function checkCaPolicy(path: Link[], ee: number, store: TrustStore, now: Date, budget: Budget): void {
  for (let i = path.length - 2; i >= ee; i--) {
    const subject = path[i]!.info;
    const issuer = path[i + 1]!;
    const rev = store.revocation(issuer.info, issuer.fromStore, now, budget);
    if ("problem" in rev) throw new Fail("CRL_UNUSABLE", `${rev.problem}; certificates it issued are refused`);
    if (rev.revoked.has(subject.serialHex)) {
      throw new Fail("REVOKED", `certificate ${dnOf(subject)} (serial ${subject.serialHex}) is revoked by ${dnOf(issuer.info)}`);
    }
    let ns: string | undefined;
    if (issuer.fromStore) {
      ns = store.namespaceProblem(issuer.info, subject.subject.oneLine);
    } else {
      // buildPath only ends a path at an installed CA, so one is always above a presented one.
      const anchor = path.slice(i + 2).find((l) => l.fromStore)!;
      ns = store.presentedNamespaceProblem(anchor.info, issuer.info, subject.subject.oneLine);
    }
    if (ns) throw new Fail("NAMESPACE", ns);
  }
}

/** Size, key type and key size of a presented certificate: checked before any signature work. */
function checkCheap(c: X509Certificate, lim: typeof VERIFY_LIMITS): void {
  if (c.raw.length > MAX_CERT_BYTES) throw new Fail("LIMITS", `a certificate of ${c.raw.length} bytes exceeds ${MAX_CERT_BYTES}`);
  const key = c.publicKey;
  const d = key.asymmetricKeyDetails ?? {};
  const what = `certificate ${JSON.stringify(c.subject.replace(/\n/g, "/"))}`;
  switch (key.asymmetricKeyType) {
    case "rsa":
    case "rsa-pss": {
      const bits = d.modulusLength ?? 0;
      if (bits > lim.maxRsaBits || bits < lim.minRsaBits) {
        throw new Fail("KEY_REJECTED", `${what} has a ${bits}-bit RSA key (accepted: ${lim.minRsaBits}–${lim.maxRsaBits})`);
      }
      return;
    }
    case "ec":
      if (!EC_CURVES.has(d.namedCurve ?? ""))
        throw new Fail("KEY_REJECTED", `${what} uses EC curve ${d.namedCurve ?? "?"} (accepted: P-256, P-384, P-521)`);
      return;
    case "ed25519":
    case "ed448":
      return;
    default:
      throw new Fail("KEY_REJECTED", `${what} has an unsupported key type ${key.asymmetricKeyType ?? "?"}`);
  }
}

interface Budget {
  left: number;
}

function verifies(child: CertInfo, issuer: CertInfo, budget: Budget): boolean {
  if (budget.left-- <= 0) throw new Fail("LIMITS", "too many signature checks for one certificate chain");
  try {
    return child.x509.verify(issuer.x509.publicKey);
  } catch {
    return false;
  }
}

const selfIssued = (i: CertInfo) => i.subject.key === i.issuer.key;

function buildPath(bundle: CertInfo[], store: TrustStore, maxDepth: number, budget: Budget): Link[] {
  const leaf = bundle[0]!;
  const path: Link[] = [{ info: leaf, fromStore: store.contains(leaf.x509) }];
  const used = new Set([leaf.x509.fingerprint256]);
  for (;;) {
    const cur = path[path.length - 1]!;
    if (cur.info.sigAlgOid !== cur.info.tbsSigAlgOid) {
      throw new Fail("MALFORMED", `certificate ${dnOf(cur.info)}: signature algorithm differs from the one in its TBS`);
    }
    if (selfIssued(cur.info) && (cur.fromStore || verifies(cur.info, cur.info, budget))) {
      if (cur.fromStore) return path; // reached a trusted root
      throw new Fail("UNTRUSTED_ISSUER", `self-signed certificate ${dnOf(cur.info)} is not in the trust store`);
    }
    if (path.length >= maxDepth) throw new Fail("MALFORMED", `certificate path longer than ${maxDepth}`);
    // A store CA is preferred over a presented copy, so a presented root never becomes an anchor.
    const fromStore = store.findBySubject(cur.info.issuer.key).filter((c) => !used.has(c.x509.fingerprint256));
    const fromBundle = bundle.filter(
      (c) => c.subject.key === cur.info.issuer.key && !used.has(c.x509.fingerprint256) && !store.contains(c.x509),
    );
    const candidates: Link[] = [
      ...fromStore.map((info) => ({ info, fromStore: true })),
      ...fromBundle.map((info) => ({ info, fromStore: false })),
    ];
    const next = candidates.find((c) => verifies(cur.info, c.info, budget));
    if (!next) {
      if (cur.fromStore) return path; // a trusted intermediate whose root is not installed
      if (candidates.length > 0) {
        throw new Fail(
          "BAD_SIGNATURE",
          `signature of ${dnOf(cur.info)} does not verify with the key of its issuer ${JSON.stringify(cur.info.issuer.oneLine)}`,
        );
      }
      throw new Fail(
        "UNTRUSTED_ISSUER",
        `issuer ${JSON.stringify(cur.info.issuer.oneLine)} of ${dnOf(cur.info)} is neither a trusted CA nor in the presented chain`,
      );
    }
    used.add(next.info.x509.fingerprint256);
    path.push(next);
  }
}

function checkStructure(path: Link[]): void {
  const kinds: Classification[] = path.map((l) => classifyCertificate(l.info));
  for (const { info } of path) {
    for (const ext of info.extensions.values()) {
      if (ext.critical && !KNOWN_CRITICAL.has(ext.oid)) {
        throw new Fail("MALFORMED", `certificate ${dnOf(info)} has unsupported critical extension ${ext.oid}`);
      }
    }
  }
  const ee = kinds.findIndex((k) => k.kind !== "proxy");
  if (ee < 0) throw new Fail("PROXY_RULES", "chain contains proxies but no end-entity certificate");
  const eeInfo = path[ee]!.info;
  if (eeInfo.basicConstraints?.ca) {
    throw new Fail("PROXY_RULES", `end-entity certificate ${dnOf(eeInfo)} is a CA (basicConstraints CA:true)`);
  }
  if (ee + 1 >= path.length) {
    throw new Fail("UNTRUSTED_ISSUER", `end-entity certificate ${dnOf(eeInfo)} is not issued by a trusted CA`);
  }
  // CAs above the end-entity certificate.
  let intermediates = 0;
  for (let i = ee + 1; i < path.length; i++) {
    const info = path[i]!.info;
    if (info.proxyCertInfo) throw new Fail("PROXY_RULES", `proxy certificate ${dnOf(info)} used as a CA`);
    if (!info.basicConstraints?.ca) {
      throw new Fail("UNTRUSTED_ISSUER", `issuer ${dnOf(info)} is not a CA (basicConstraints CA:true missing)`);
    }
    if (info.keyUsage && !info.keyUsage.has("keyCertSign")) {
      throw new Fail("UNTRUSTED_ISSUER", `CA ${dnOf(info)} keyUsage lacks keyCertSign`);
    }
    const pl = info.basicConstraints.pathLen;
    if (pl !== undefined && intermediates > pl) {
      throw new Fail("UNTRUSTED_ISSUER", `CA ${dnOf(info)} pathLenConstraint ${pl} exceeded`);
    }
    if (!selfIssued(info)) intermediates++;
  }
  // Proxies, from the one next to the end-entity certificate down to the leaf.
  for (let i = ee - 1; i >= 0; i--) {
    const info = path[i]!.info;
    const k = kinds[i]!;
    const issuer = path[i + 1]!.info;
    if (k.kind !== "proxy") continue;
    const what = `proxy ${dnOf(info)}`;
    if (k.policy === "other") throw new Fail("PROXY_RULES", `${what} has unsupported proxy policy language ${k.policyLanguage}`);
    const cn = proxyCnSuffix(info);
    if (cn === undefined) {
      throw new Fail("PROXY_RULES", `${what}: subject must be the issuer subject plus exactly one CN component`);
    }
    if (k.proxyType === "legacy" && cn !== "proxy" && cn !== "limited proxy") {
      throw new Fail("PROXY_RULES", `${what}: legacy proxy CN must be "proxy" or "limited proxy"`);
    }
    if (info.basicConstraints?.ca) throw new Fail("PROXY_RULES", `${what} has basicConstraints CA:true`);
    if (info.extensions.has(OID.subjectAltName) || info.extensions.has(OID.issuerAltName)) {
      throw new Fail("PROXY_RULES", `${what} carries subjectAltName/issuerAltName (RFC 3820 3.5/3.6)`);
    }
    if (info.keyUsage?.has("keyCertSign")) throw new Fail("PROXY_RULES", `${what} keyUsage contains keyCertSign`);
    if (issuer.keyUsage && !issuer.keyUsage.has("digitalSignature")) {
      throw new Fail("PROXY_RULES", `${what}: issuer ${dnOf(issuer)} keyUsage lacks digitalSignature`);
    }
    const below = i; // proxies issued beneath this one
    if (k.pathLen !== undefined && below > k.pathLen) {
      throw new Fail("PROXY_RULES", `${what} pathLenConstraint ${k.pathLen} exceeded by ${below} proxies below it`);
    }
    const parent = kinds[i + 1]!;
    if (parent.kind === "proxy" && parent.limited && !k.limited) {
      throw new Fail("PROXY_RULES", `${what} is not limited but is issued by a limited proxy`);
    }
  }
}
