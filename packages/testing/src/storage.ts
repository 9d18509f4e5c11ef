import { createServer, type Server } from "node:https";
import type { TLSSocket } from "node:tls";
import { createCA, createProxy, issueHostCert, issueUserCert, type TestCredential } from "@ce/x509/testing";

export interface StorageRequest {
  method: string;
  path: string;
  /** Subject of the TLS client certificate (a proxy for X.509 jobs). */
  peer?: string | undefined;
  authorization?: string | undefined;
}

export interface Storage {
  url: string;
  caPem: string;
  files: Map<string, Buffer>;
  requests: StorageRequest[];
  /** The bearer token `/token/...` accepts: a JWT whose `aud` is this storage's origin. */
  token: string;
  /** The next `n` requests for `path` answer 503 (retry tests). */
  flaky(path: string, n: number): void;
  close(): Promise<void>;
}

/**
 * A JWT-shaped token with the given audience. The JEM reads only `aud` (the gateway verified the
 * signature when the token was delegated), so a fixed test signature is enough here.
 */
export function testJwt(aud: string | string[]): string {
  const part = (o: object) => Buffer.from(JSON.stringify(o)).toString("base64url");
  return `${part({ alg: "RS256", typ: "JWT" })}.${part({ sub: "test-user", iss: "https://issuer.test", aud, exp: Math.floor(Date.now() / 1000) + 3600 })}.c2ln`;
}

export interface TestPki {
  ca: TestCredential;
  user: TestCredential;
  proxy: TestCredential;
}

export function testPki(): TestPki {
  const ca = createCA({ dn: "/DC=org/DC=test/CN=Test CA" });
  const user = issueUserCert(ca, { dn: "/DC=org/DC=test/CN=Test User" });
  return { ca, user, proxy: createProxy(user, user.key, { lifetimeSeconds: 3600 }) };
}

/**
 * A tiny WebDAV-ish HTTPS storage on 127.0.0.1: `/x509/...` needs a client certificate (proxies
 * accepted: OpenSSL would refuse them, so the chain is checked by presence only), `/token/...`
 * needs `Bearer <token>` (a JWT for this origin); GET, PUT (parent collection must exist → 409), MKCOL.
 */
export async function startStorage(pki: TestPki): Promise<Storage> {
  const host = issueHostCert(pki.ca, { hostnames: ["127.0.0.1", "localhost"] });
  const files = new Map<string, Buffer>();
  const collections = new Set<string>(["/", "/x509/", "/token/", "/open/"]);
  const requests: StorageRequest[] = [];
  const flakes = new Map<string, number>();
  let token = "";
  const server: Server = createServer(
    { key: host.keyPem, cert: host.certPem, ca: pki.ca.certPem, requestCert: true, rejectUnauthorized: false },
    (req, res) => {
      const path = decodeURIComponent(new URL(req.url ?? "/", "https://x").pathname);
      const cert = (req.socket as TLSSocket).getPeerCertificate();
      const cn = cert && cert.subject ? (cert.subject.CN as string | string[] | undefined) : undefined;
      const peer = Array.isArray(cn) ? cn.join("/") : cn;
      requests.push({ method: req.method ?? "", path, peer, authorization: req.headers.authorization });
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const left = flakes.get(path) ?? 0;
        if (left > 0) {
          flakes.set(path, left - 1);
          return void res.writeHead(503).end("try later");
        }
        if (path.startsWith("/x509/") && !peer) return void res.writeHead(403).end("client certificate required");
        if (path.startsWith("/token/") && req.headers.authorization !== `Bearer ${token}`)
          return void res.writeHead(401).end("token required");
        const parent = path.replace(/[^/]+\/?$/, "");
        switch (req.method) {
          case "GET": {
            const body = files.get(path);
            return void (body ? res.writeHead(200, { "content-length": body.length }).end(body) : res.writeHead(404).end());
          }
          case "PUT":
            if (!collections.has(parent)) return void res.writeHead(409).end("parent collection missing");
            files.set(path, Buffer.concat(chunks));
            return void res.writeHead(201).end();
          case "MKCOL": {
            const col = path.endsWith("/") ? path : `${path}/`;
            if (collections.has(col)) return void res.writeHead(405).end();
            if (!collections.has(col.replace(/[^/]+\/$/, ""))) return void res.writeHead(409).end();
            collections.add(col);
            return void res.writeHead(201).end();
          }
          default:
            return void res.writeHead(405).end();
        }
      });
    },
  );
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as { port: number }).port;
  token = testJwt(`https://127.0.0.1:${port}`);
  return {
    url: `https://127.0.0.1:${port}`,
    token,
    caPem: pki.ca.certPem,
    files,
    requests,
    flaky: (p, n) => flakes.set(p, n),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
