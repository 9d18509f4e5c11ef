/**
 * Bridge from a Node TLS connection to verifyChain. The gateway requests the client certificate
 * with `rejectUnauthorized: false` (OpenSSL would refuse proxy chains) and verifies here.
 */
import { X509Certificate } from "node:crypto";
import type { DetailedPeerCertificate, TLSSocket } from "node:tls";

/** Every certificate the peer presented, leaf first (order beyond the leaf is not guaranteed). */
export function peerCertificateChain(socket: TLSSocket): X509Certificate[] {
  const out: X509Certificate[] = [];
  const seen = new Set<string>();
  let cur: DetailedPeerCertificate | undefined = socket.getPeerCertificate(true);
  while (cur && cur.raw && cur.raw.length > 0) {
    const x = new X509Certificate(cur.raw);
    if (seen.has(x.fingerprint256)) break; // a self-signed root links to itself
    seen.add(x.fingerprint256);
    out.push(x);
    cur = cur.issuerCertificate;
  }
  return out;
}
