import { createHash, X509Certificate } from "node:crypto";
import { createServer, type Server } from "node:https";
import type { TLSSocket } from "node:tls";
import { certInfo, parseVomsExtension, VOMS_OID } from "@ce/x509";
import { issueHostCert } from "@ce/x509/testing";
import type { TestPki } from "./storage.js";

export interface OriginRequest {
  method: string;
  path: string;
  peer?: string | undefined;
}

/** Who asks, as a storage's authorization sees it: the certificate's CN and VOMS FQANs, or a token's claims. */
export interface OriginCaller {
  cn?: string | undefined;
  /** FQANs of the VOMS ACs in the client's (proxy) certificate. */
  fqans: string[];
  /** Claims of a bearer token (not verified: a stand-in for a storage's token check). */
  token?: Record<string, unknown> | undefined;
}

export interface Origin {
  url: string;
  files: Map<string, Buffer>;
  requests: OriginRequest[];
  /** Subjects (CN) refused on `/private/...` (the others are served). */
  refuse: Set<string>;
  /** Also refused on `/private/...`: callers this rule names (a VOMS role or a token scope the storage wants). */
  rule: { refuse?: ((who: OriginCaller) => boolean) | undefined };
  /** GET bodies are sent in this many slices, `sliceMs` apart (crash tests). */
  slow: { slices: number; sliceMs: number };
  /** Body bytes handed to the network so far (GET bodies; the benchmark's origin traffic). */
  sent: { bytes: number };
  count(method: string, path: string): number;
  close(): Promise<void>;
}

/**
 * A read-only HTTPS origin for the input cache: GET and HEAD with ETag/Last-Modified, a client
 * certificate or a bearer token required everywhere, `/private/...` refused (403) to the CNs in
 * `refuse` and to the callers `rule.refuse` names.
 */
export async function startOrigin(pki: TestPki): Promise<Origin> {
  const host = issueHostCert(pki.ca, { hostnames: ["127.0.0.1"] });
  const files = new Map<string, Buffer>();
  const requests: OriginRequest[] = [];
  const refuse = new Set<string>();
  const rule: Origin["rule"] = {};
  const slow = { slices: 1, sliceMs: 0 };
  const sent = { bytes: 0 };
  const server: Server = createServer(
    { key: host.keyPem, cert: host.certPem, ca: pki.ca.certPem, requestCert: true, rejectUnauthorized: false },
    (req, res) => {
      const path = decodeURIComponent(new URL(req.url ?? "/", "https://x").pathname);
      const cert = (req.socket as TLSSocket).getPeerCertificate();
      const cn = cert?.subject ? (cert.subject.CN as string | string[] | undefined) : undefined;
      const token = bearerClaims(req.headers.authorization);
      const peer = (Array.isArray(cn) ? cn[0] : cn) ?? (token ? `token:${String(token.sub)}` : undefined);
      requests.push({ method: req.method ?? "", path, peer });
      if (!peer) return void res.writeHead(403).end();
      if (path.startsWith("/private/") && refuse.has(peer)) return void res.writeHead(403).end("not for you");
      if (path.startsWith("/private/") && rule.refuse?.({ cn: peer, fqans: cert?.raw ? fqansOf(cert.raw) : [], token }))
        return void res.writeHead(403).end("not with this credential");
      const body = files.get(path);
      if (!body) return void res.writeHead(404).end();
      const headers = {
        "content-length": body.length,
        etag: `"${createHash("sha1").update(body).digest("hex")}"`,
        "last-modified": "Mon, 01 Jan 2024 00:00:00 GMT",
      };
      if (req.method === "HEAD") return void res.writeHead(200, headers).end();
      if (req.method !== "GET") return void res.writeHead(405).end();
      res.writeHead(200, headers);
      const n = Math.max(1, slow.slices);
      const step = Math.ceil(body.length / n);
      let i = 0;
      const next = () => {
        if (res.destroyed) return;
        const chunk = body.subarray(i * step, (i + 1) * step);
        i++;
        sent.bytes += chunk.length;
        if (i >= n) return void res.end(chunk);
        res.write(chunk);
        setTimeout(next, slow.sliceMs);
      };
      next();
    },
  );
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as { port: number }).port;
  return {
    url: `https://127.0.0.1:${port}`,
    files,
    requests,
    refuse,
    rule,
    slow,
    sent,
    count: (method, path) => requests.filter((r) => r.method === method && r.path === path).length,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function bearerClaims(header: string | undefined): Record<string, unknown> | undefined {
  const jwt = /^Bearer (\S+)$/i.exec(header ?? "")?.[1];
  if (!jwt) return undefined;
  try {
    return JSON.parse(Buffer.from(jwt.split(".")[1] ?? "", "base64url").toString("utf8")) as Record<string, unknown>;
  } catch {
    return undefined;
  }
}

function fqansOf(der: Buffer): string[] {
  const ext = certInfo(new X509Certificate(der)).extensions.get(VOMS_OID.acSeq);
  return ext ? parseVomsExtension(Buffer.from(ext.value, "binary")).flatMap((ac) => ac.fqans) : [];
}
