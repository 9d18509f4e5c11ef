/**
 * X.509 delegation (docs/interface.md E8/E9): pre-generated RSA-2048 keys, version-0 PKCS#10 requests
 * with an empty subject, and acceptance of the signed proxy chain the client PUTs back.
 */
import { createPublicKey, generateKeyPair, sign, X509Certificate, type KeyObject } from "node:crypto";
import forge from "node-forge";
import { derToPem, parseCertificates, TooManyCertificatesError } from "./pem.js";
import type { TrustStore } from "./truststore.js";
import { VERIFY_LIMITS, verifyChain, type VerifyErrorCode, type VerifyOptions } from "./verify.js";

export interface KeyPair {
  publicKey: KeyObject;
  privateKey: KeyObject;
}

export interface KeyPoolOptions {
  /** Keys kept ready. Default 4. */
  size?: number;
  /** RSA modulus length. Default 2048 (what ARC generates). */
  modulusLength?: number;
}

const genRsa = (bits: number) =>
  new Promise<KeyPair>((resolve, reject) =>
    generateKeyPair("rsa", { modulusLength: bits, publicExponent: 0x10001 }, (err, publicKey, privateKey) =>
      err ? reject(err) : resolve({ publicKey, privateKey }),
    ),
  );

/**
 * Pool of ready RSA key pairs. Generation runs on libuv's thread pool, one key at a time so that
 * refilling never starves file-system and DNS work sharing that pool.
 */
export class KeyPool {
  private readonly size: number;
  private readonly bits: number;
  private readonly ready: KeyPair[] = [];
  private filling: Promise<void> | undefined;
  private closed = false;

  constructor(opts: KeyPoolOptions = {}) {
    this.size = Math.max(0, opts.size ?? 4);
    this.bits = opts.modulusLength ?? 2048;
    this.refill();
  }

  get available(): number {
    return this.ready.length;
  }

  /** A key pair: immediate when one is ready, otherwise generated now. */
  async take(): Promise<KeyPair> {
    if (this.closed) throw new Error("KeyPool is closed");
    const kp = this.ready.shift();
    this.refill();
    return kp ?? genRsa(this.bits);
  }

  /** Resolves once the pool is full (useful at start-up and in tests). */
  async warm(): Promise<void> {
    while (!this.closed && this.ready.length < this.size) {
      this.refill();
      await this.filling;
    }
  }

  /** Stop refilling; waits for an in-flight generation so no work outlives the pool. */
  async close(): Promise<void> {
    this.closed = true;
    await this.filling?.catch(() => undefined);
    this.ready.length = 0;
  }

  private refill(): void {
    if (this.filling || this.closed || this.ready.length >= this.size) return;
    this.filling = (async () => {
      try {
        while (!this.closed && this.ready.length < this.size) this.ready.push(await genRsa(this.bits));
      } finally {
        this.filling = undefined;
      }
    })();
    this.filling.catch(() => undefined); // a failed round is retried by the next take()
  }
}

const asn1 = forge.asn1;

/**
 * PKCS#10 request: version 0, empty subject, the public key, no attributes, SHA-256 with RSA.
 * forge builds the CertificationRequestInfo; Node signs it (forge's JS RSA is slow).
 */
export function createCsr(keyPair: KeyPair): string {
  const spki = keyPair.publicKey.export({ type: "spki", format: "der" });
  const cri = asn1.create(asn1.Class.UNIVERSAL, asn1.Type.SEQUENCE, true, [
    asn1.create(asn1.Class.UNIVERSAL, asn1.Type.INTEGER, false, "\x00"), // version 0
    asn1.create(asn1.Class.UNIVERSAL, asn1.Type.SEQUENCE, true, []), // empty subject
    asn1.fromDer(spki.toString("binary")),
    asn1.create(asn1.Class.CONTEXT_SPECIFIC, 0, true, []), // attributes: none
  ]);
  const criDer = Buffer.from(asn1.toDer(cri).getBytes(), "binary");
  const signature = sign("sha256", criDer, keyPair.privateKey);
  const csr = asn1.create(asn1.Class.UNIVERSAL, asn1.Type.SEQUENCE, true, [
    cri,
    asn1.create(asn1.Class.UNIVERSAL, asn1.Type.SEQUENCE, true, [
      asn1.create(asn1.Class.UNIVERSAL, asn1.Type.OID, false, asn1.oidToDer("1.2.840.113549.1.1.11").getBytes()),
      asn1.create(asn1.Class.UNIVERSAL, asn1.Type.NULL, false, ""),
    ]),
    asn1.create(asn1.Class.UNIVERSAL, asn1.Type.BITSTRING, false, "\x00" + signature.toString("binary")),
  ]);
  return derToPem(Buffer.from(asn1.toDer(csr).getBytes(), "binary"), "CERTIFICATE REQUEST");
}

export type DelegationErrorCode = VerifyErrorCode | "KEY_MISMATCH" | "IDENTITY_MISMATCH" | "NOT_A_PROXY" | "TOO_MANY_CERTIFICATES";

/** Certificates a delegation body may carry: the verifier's own bound (more would be refused by it anyway). */
export const MAX_DELEGATED_CERTS = VERIFY_LIMITS.maxCerts;

export type AcceptResult =
  | { ok: true; proxyPem: string; notAfter: Date; identity: string; limited: boolean }
  | { ok: false; code: DelegationErrorCode; reason: string };

export interface AcceptOptions extends VerifyOptions {
  /** Require the delegated certificate to be a proxy (default true). */
  requireProxy?: boolean;
}

/**
 * Accept the PUT body of a delegation: the first certificate must carry the slot's public key, the
 * whole chain must verify, and its end-entity identity must be the caller's (when known), so a
 * delegation slot can only be completed with the caller's own credentials.
 *
 * The returned proxy file is `leaf cert + private key + chain`, the key as PKCS#1
 * `RSA PRIVATE KEY` (what ARC stores; PKCS#8 `PRIVATE KEY` for non-RSA keys).
 */
export function acceptDelegatedChain(
  pemBody: string,
  privateKey: KeyObject,
  store: TrustStore,
  callerIdentity: string | undefined,
  opts: AcceptOptions = {},
): AcceptResult {
  let certs;
  try {
    certs = parseCertificates(pemBody, opts.maxCerts ?? MAX_DELEGATED_CERTS);
  } catch (e) {
    return { ok: false, code: e instanceof TooManyCertificatesError ? "TOO_MANY_CERTIFICATES" : "MALFORMED", reason: (e as Error).message };
  }
  const leaf = certs[0];
  if (!leaf) return { ok: false, code: "EMPTY", reason: "no certificate in delegation body" };
  const ours = spkiOf(privateKey);
  const theirs = spkiOf(leaf);
  if (!theirs) return { ok: false, code: "MALFORMED", reason: "the delegated certificate carries a public key that cannot be read" };
  if (!ours || !ours.equals(theirs)) {
    return { ok: false, code: "KEY_MISMATCH", reason: "the delegated certificate does not carry this delegation's public key" };
  }
  const res = verifyChain(certs, store, opts);
  if (!res.ok) return res;
  if (res.chain[0] !== leaf) {
    return { ok: false, code: "MALFORMED", reason: "the delegated certificate is not the leaf of the presented chain" };
  }
  if ((opts.requireProxy ?? true) && res.proxies === 0) {
    return { ok: false, code: "NOT_A_PROXY", reason: "the delegated certificate is not a proxy certificate" };
  }
  if (callerIdentity !== undefined && res.identity !== callerIdentity) {
    return {
      ok: false,
      code: "IDENTITY_MISMATCH",
      reason: `delegated chain belongs to ${JSON.stringify(res.identity)}, not to the caller ${JSON.stringify(callerIdentity)}`,
    };
  }
  const keyPem =
    privateKey.asymmetricKeyType === "rsa"
      ? (privateKey.export({ type: "pkcs1", format: "pem" }) as string)
      : (privateKey.export({ type: "pkcs8", format: "pem" }) as string);
  const proxyPem = [
    derToPem(leaf.raw),
    keyPem.endsWith("\n") ? keyPem : keyPem + "\n",
    ...res.chain.slice(1).map((c) => derToPem(c.raw)),
  ].join("");
  return { ok: true, proxyPem, notAfter: res.notAfter, identity: res.identity, limited: res.limited };
}

/** SPKI DER of a key or of a certificate's key; undefined when Node cannot read it (unknown algorithm). */
function spkiOf(key: KeyObject | X509Certificate): Buffer | undefined {
  try {
    const pub = key instanceof X509Certificate ? key.publicKey : key.type === "private" ? createPublicKey(key) : key;
    return pub.export({ type: "spki", format: "der" });
  } catch {
    return undefined;
  }
}
