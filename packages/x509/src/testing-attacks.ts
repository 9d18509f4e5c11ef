/**
 * Forged chains for adversarial tests (`@ce/x509/testing`). Each is what an attacker who holds only
 * keys of its own and the victim's PUBLIC certificate (sent in clear in every TLS 1.2 handshake)
 * can build.
 */
import { X509Certificate, type KeyObject } from "node:crypto";
import { derToPem } from "./pem.js";
import { buildCertificate, ext, nameFromDn, subjectNode, testKey, type TestCredential } from "./testing-pki.js";
import { OID } from "./cert.js";

export interface ForgedChain {
  /** Presented order: the certificate whose key the attacker proves comes first. */
  certs: X509Certificate[];
  /** The attacker's key for certs[0]. */
  key: KeyObject;
  keyPem: string;
  /** certs as a PEM bundle (leaf first). */
  pem: string;
}

const DAY = 86_400_000;

/**
 * `[X, Y, V]`: X carries the victim's subject DN and the attacker's key and is signed by Y; Y is a
 * proxy-looking certificate (victim DN + CN) signed by X's key; V is the victim's real certificate.
 * A verifier that picks "the certificate that issued no other" as leaf lands on V: the victim.
 */
export function victimLoopChain(victim: TestCredential): ForgedChain {
  const kx = testKey(2048, true);
  const ky = testKey(2048, true);
  const notBefore = new Date(Date.now() - 3_600_000);
  const notAfter = new Date(Date.now() + DAY);
  const yDn = `${victim.dn}/CN=4242`;
  const x = buildCertificate({
    issuerName: nameFromDn(yDn),
    subjectName: subjectNode(victim.cert),
    notBefore,
    notAfter,
    publicKey: kx,
    signKey: ky,
    extensions: [ext.basicConstraints(false), ext.keyUsage(["digitalSignature", "keyEncipherment"])],
  });
  const y = buildCertificate({
    issuerName: subjectNode(victim.cert),
    subjectName: nameFromDn(yDn),
    notBefore,
    notAfter,
    publicKey: ky,
    signKey: kx,
    extensions: [ext.proxyCertInfo(OID.inheritAll), ext.keyUsage(["digitalSignature", "keyEncipherment"])],
  });
  return bundle([x, y, victim.cert], kx);
}

function bundle(certs: X509Certificate[], key: KeyObject): ForgedChain {
  return {
    certs,
    key,
    keyPem: key.export({ type: "pkcs8", format: "pem" }) as string,
    pem: certs.map((c) => derToPem(c.raw)).join(""),
  };
}
