import { createHash, X509Certificate } from "node:crypto";
import { isIP } from "node:net";
import type { TLSSocket, DetailedPeerCertificate } from "node:tls";
import type { Context } from "hono";
import { verifyChain, vomsAttributesOf, type VerifyOptions, type VerifyResult } from "@ce/x509";
import { vomsGroupFields } from "./groups.js";
import type { AppEnv, Identity } from "../../context.js";
import { Unauthorized } from "../../errors.js";

/**
 * Identity from the TLS client chain (RFC 3820 proxies included). Node's TLS stack cannot verify
 * proxy chains, so the server runs with `rejectUnauthorized: false` and the chain is verified here
 * with @ce/x509 against the CA directory.
 *
 * Observed with Node's TLS on OpenSSL 3: `getPeerCertificate(true)` holds every certificate the client
 * sent, linked leaf → issuer (proxy → user certificate), but only on a full handshake: on a
 * resumed session only the leaf is left. The server therefore disables session tickets
 * (server.ts), and as a second line a chain verified earlier is remembered by leaf fingerprint:
 * a resumed session proves possession of the same leaf key.
 *
 * Identity binding: the path is verified from the certificate whose key the client proved — the
 * TLS leaf (`getPeerCertificate()` itself), or the first certificate of the trusted proxy's header
 * (the one it verified the handshake for). Other presented certificates only serve as issuers.
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
  const remembered = chain.length === 1 ? recall(leafFp) : undefined;
  if (remembered) {
    perSocket.set(socket, remembered);
    return checkExpiry(remembered);
  }
  const result = verifyChain(chain, c.get("services").trust, verifyOptions(c));
  const out = toIdentity(c, result);
  perSocket.set(socket, out);
  if (out instanceof Unauthorized) {
    logRejection(c, result);
    throw out;
  }
  remember(leafFp, out);
  return out;
}

function verifyOptions(c: Context<AppEnv>): VerifyOptions {
  const x = c.get("services").config.auth.x509;
  return { maxCerts: x.maxChainCertificates, minRsaBits: x.minRsaBits, maxRsaBits: x.maxRsaBits };
}

/** One line per refused chain, naming why (DNs and CA names only: a certificate holds no secret). */
function logRejection(c: Context<AppEnv>, r: VerifyResult): void {
  if (!r.ok) c.get("log").info({ code: r.code, reason: r.reason }, "client certificate rejected");
}

/**
 * Walks `.issuerCertificate` (self-reference ends the chain) collecting the DER of each link. The
 * first is the TLS leaf, whose key the handshake proved. One more than the limit is collected so
 * that an oversized chain is refused by the verifier rather than silently cut.
 */
function collectChain(peer: DetailedPeerCertificate, max = 65): X509Certificate[] {
  const out: X509Certificate[] = [];
  const seen = new Set<string>();
  let cur: DetailedPeerCertificate | undefined = peer;
  while (cur?.raw && !seen.has(cur.fingerprint256) && out.length < max) {
    seen.add(cur.fingerprint256);
    out.push(new X509Certificate(cur.raw));
    if (cur.issuerCertificate === cur) break;
    cur = cur.issuerCertificate;
  }
  return out;
}

function toIdentity(c: Context<AppEnv>, r: VerifyResult): Identity | Unauthorized {
  if (!r.ok) {
    return new Unauthorized(
      `Client certificate rejected (${r.code.toLowerCase().replace(/_/g, " ")}): ${r.reason}`,
      undefined,
      `CERT_${r.code}`,
    );
  }
  // VOMS attributes only add groups; the identity stays the end-entity DN.
  const { config, trust, voms } = c.get("services");
  const { leewaySeconds } = config.auth.tokens;
  const attrs = vomsAttributesOf(r, trust, voms, { hostNames: config.auth.voms.hostNames, leewaySeconds });
  for (const reason of attrs.invalid) c.get("log").info({ subject: r.identity, reason }, "VOMS attribute certificate rejected");
  if (attrs.invalid.length > 0 && config.auth.voms.invalidAc === "refuse") {
    return new Unauthorized(`Client certificate rejected (invalid VOMS attributes): ${attrs.invalid[0]}`, undefined, "CERT_VOMS_INVALID");
  }
  // The AC's validity bounds how long these groups may be used on a keep-alive connection.
  const acUntil = Math.min(...attrs.valid.map((a) => a.notAfter.getTime()));
  const expires = Math.min(r.notAfter.getTime(), acUntil);
  return {
    subject: r.identity,
    kind: "x509",
    issuer: r.issuerCA,
    expires,
    limited: r.limited,
    ...(attrs.valid.length ? vomsGroupFields(attrs.valid) : {}),
  };
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
  // Every request carries the header: a chain verified once is remembered by the header's hash
  // (the same bounded cache and lifetime as the TLS path); refusals are not cached.
  const key = `h:${createHash("sha256").update(raw).digest("base64")}`;
  const remembered = recall(key);
  if (remembered) return checkExpiry(remembered);
  // The proxy forwards the chain it verified the handshake for, leaf first: the path starts there.
  const result = verifyChain(pem, c.get("services").trust, verifyOptions(c));
  const out = toIdentity(c, result);
  if (out instanceof Unauthorized) {
    logRejection(c, result);
    throw out;
  }
  remember(key, out);
  return out;
}

function recall(key: string): Identity | undefined {
  const r = byLeaf.get(key);
  return r && r.until > Date.now() ? r.id : undefined;
}

function remember(key: string, id: Identity): void {
  if (byLeaf.size >= LEAF_CACHE_MAX) byLeaf.delete(byLeaf.keys().next().value as string);
  byLeaf.set(key, { id, until: Math.min(Date.now() + LEAF_CACHE_MS, id.expires ?? 0) });
}

export function isTrustedProxy(peer: string, trusted: readonly string[]): boolean {
  const addr = peer.startsWith("::ffff:") && isIP(peer.slice(7)) === 4 ? peer.slice(7) : peer;
  return trusted.some((t) => t === addr || t === peer);
}
