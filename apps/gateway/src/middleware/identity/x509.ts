import { X509Certificate } from "node:crypto";
import { isIP } from "node:net";
import type { TLSSocket, DetailedPeerCertificate } from "node:tls";
import type { Context } from "hono";
import { verifyChain, type VerifyResult } from "@ce/x509";
import type { AppEnv, Identity } from "../../context.js";
import { Unauthorized } from "../../errors.js";

/**
 * Identity from the TLS client chain (RFC 3820 proxies included). Node's TLS stack cannot verify
 * proxy chains, so the server runs with `rejectUnauthorized: false` and the chain is verified here
 * with @ce/x509 against the CA directory.
 *
 * Empirically (Node 20, OpenSSL 3): `getPeerCertificate(true)` holds every certificate the client
 * sent, linked leaf → issuer (proxy → user certificate), but only on a full handshake: on a
 * resumed session only the leaf is left. The server therefore disables session tickets
 * (server.ts), and as a second line a chain verified earlier is remembered by leaf fingerprint:
 * a resumed session proves possession of the same leaf key.
 */
const perSocket = new WeakMap<object, Identity | Unauthorized>();
const byLeaf = new Map<string, { id: Identity; until: number }>();
const LEAF_CACHE_MAX = 10_000;
const LEAF_CACHE_MS = 10 * 60_000;

export async function x509Identity(c: Context<AppEnv>): Promise<Identity | undefined> {
  const incoming = c.env?.incoming;
  const socket = incoming?.socket as (TLSSocket & { encrypted?: boolean }) | undefined;
  if (!socket) return undefined;
  if (socket.encrypted) return fromTlsSocket(c, socket);
  return fromProxyHeader(c, socket.remoteAddress);
}

function fromTlsSocket(c: Context<AppEnv>, socket: TLSSocket): Identity | undefined {
  const cached = perSocket.get(socket);
  if (cached instanceof Unauthorized) throw cached;
  if (cached) return checkExpiry(cached);
  const peer = socket.getPeerCertificate(true);
  if (!peer || !peer.raw) return undefined;
  const chain = collectChain(peer);
  const leafFp = chain[0]!.fingerprint256;
  const remembered = byLeaf.get(leafFp);
  if (chain.length === 1 && remembered && remembered.until > Date.now()) {
    perSocket.set(socket, remembered.id);
    return checkExpiry(remembered.id);
  }
  const result = verifyChain(chain, c.get("services").trust);
  const out = toIdentity(result);
  perSocket.set(socket, out);
  if (out instanceof Unauthorized) {
    c.get("log").info({ code: result.ok ? undefined : result.code }, "client certificate rejected");
    throw out;
  }
  if (byLeaf.size >= LEAF_CACHE_MAX) byLeaf.delete(byLeaf.keys().next().value as string);
  byLeaf.set(leafFp, { id: out, until: Math.min(Date.now() + LEAF_CACHE_MS, out.expires ?? 0) });
  return out;
}

/** Walks `.issuerCertificate` (self-reference ends the chain) collecting the DER of each link. */
function collectChain(peer: DetailedPeerCertificate): X509Certificate[] {
  const out: X509Certificate[] = [];
  const seen = new Set<string>();
  let cur: DetailedPeerCertificate | undefined = peer;
  while (cur?.raw && !seen.has(cur.fingerprint256) && out.length < 16) {
    seen.add(cur.fingerprint256);
    out.push(new X509Certificate(cur.raw));
    if (cur.issuerCertificate === cur) break;
    cur = cur.issuerCertificate;
  }
  return out;
}

function toIdentity(r: VerifyResult): Identity | Unauthorized {
  if (!r.ok) {
    return new Unauthorized(`Client certificate rejected (${r.code.toLowerCase().replace(/_/g, " ")}): ${r.reason}`, undefined, `CERT_${r.code}`);
  }
  return { subject: r.identity, kind: "x509", issuer: r.issuerCA, expires: r.notAfter.getTime() };
}

/** A keep-alive connection can outlive its proxy certificate. */
function checkExpiry(id: Identity): Identity {
  if (id.expires !== undefined && id.expires < Date.now()) {
    throw new Unauthorized("Client certificate rejected (expired): the proxy expired during this connection", undefined, "CERT_EXPIRED");
  }
  return id;
}

/**
 * Plain-HTTP mode behind a TLS-terminating proxy: the URL-encoded PEM chain in the configured
 * header is believed only from a trusted proxy address; from anyone else the header is ignored.
 */
function fromProxyHeader(c: Context<AppEnv>, peer: string | undefined): Identity | undefined {
  const { plainHttp } = c.get("services").config.gateway;
  if (!plainHttp.enabled || !peer || !isTrustedProxy(peer, plainHttp.trustedProxies)) return undefined;
  const raw = c.req.header(plainHttp.clientCertHeader);
  if (!raw) return undefined;
  let pem: string;
  try {
    pem = decodeURIComponent(raw);
  } catch {
    throw new Unauthorized("Client certificate header is not URL-encoded PEM", undefined, "CERT_MALFORMED");
  }
  const out = toIdentity(verifyChain(pem, c.get("services").trust));
  if (out instanceof Unauthorized) throw out;
  return out;
}

export function isTrustedProxy(peer: string, trusted: readonly string[]): boolean {
  const addr = peer.startsWith("::ffff:") && isIP(peer.slice(7)) === 4 ? peer.slice(7) : peer;
  return trusted.some((t) => t === addr || t === peer);
}
