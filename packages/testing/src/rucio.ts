/**
 * A STAND-IN for a Rucio server, for tests only: Rucio itself cannot be installed here. It
 * implements exactly the calls the JEM makes, as Rucio's REST API documents them, on loopback:
 *   GET /auth/x509_proxy, /auth/x509   client certificate required (proxies accepted; the chain
 *                                      is checked by presence only; CNs in `refuse` get 401) → 200 with X-Rucio-Auth-Token
 *                                      and X-Rucio-Auth-Token-Expires; 401 without a certificate.
 *   GET /replicas/<scope>/<name>       X-Rucio-Auth-Token required (401 otherwise) → one JSON
 *                                      object per line (application/x-json-stream) with bytes,
 *                                      adler32, md5, pfns and rses; unknown DID → 404 with
 *                                      ExceptionClass: DataIdentifierNotFound, as Rucio answers.
 * Nothing else of Rucio (rules, accounts, metalink) is imitated.
 */
import { randomBytes } from "node:crypto";
import { createServer, type Server } from "node:https";
import type { TLSSocket } from "node:tls";
import { issueHostCert } from "@ce/x509/testing";
import type { TestPki } from "./storage.js";

export interface RucioDid {
  bytes: number;
  adler32?: string | undefined;
  md5?: string | undefined;
  /** PFN → RSE; listed with increasing priority in this order. */
  pfns: Array<{ pfn: string; rse: string; type?: "DISK" | "TAPE" }>;
}

export interface RucioRequest {
  method: string;
  path: string;
  peer?: string | undefined;
  account?: string | undefined;
  token?: string | undefined;
}

export interface RucioStandIn {
  url: string;
  /** `scope:name` → what Rucio knows of it. */
  dids: Map<string, RucioDid>;
  requests: RucioRequest[];
  /** Tokens issued so far, and to whom (the client certificate's CN). */
  issued: Map<string, string>;
  /** CNs (of the user, a proxy's first CN) refused at authentication, as Rucio refuses an unknown identity. */
  refuse: Set<string>;
  close(): Promise<void>;
}

export async function startRucioStandIn(pki: TestPki): Promise<RucioStandIn> {
  const host = issueHostCert(pki.ca, { hostnames: ["127.0.0.1", "localhost"] });
  const dids = new Map<string, RucioDid>();
  const requests: RucioRequest[] = [];
  const issued = new Map<string, string>();
  const refuse = new Set<string>();
  const server: Server = createServer(
    { key: host.keyPem, cert: host.certPem, ca: pki.ca.certPem, requestCert: true, rejectUnauthorized: false },
    (req, res) => {
      const path = new URL(req.url ?? "/", "https://x").pathname;
      const cert = (req.socket as TLSSocket).getPeerCertificate();
      const cn = cert && cert.subject ? (cert.subject.CN as string | string[] | undefined) : undefined;
      const peer = Array.isArray(cn) ? cn.join("/") : cn;
      const account = req.headers["x-rucio-account"] as string | undefined;
      const token = req.headers["x-rucio-auth-token"] as string | undefined;
      requests.push({ method: req.method ?? "", path, peer, account, token });
      const fail = (status: number, cls: string, msg: string) =>
        res.writeHead(status, { exceptionclass: cls, exceptionmessage: msg }).end();
      if (req.method !== "GET") return void fail(405, "MethodNotAllowed", "only GET here");
      if (path === "/auth/x509_proxy" || path === "/auth/x509") {
        if (!peer || refuse.has(peer.split("/")[0]!))
          return void fail(401, "CannotAuthenticate", "Cannot authenticate with given credentials");
        const t = `${account ?? "default"}-${randomBytes(16).toString("hex")}`;
        issued.set(t, peer);
        return void res
          .writeHead(200, { "x-rucio-auth-token": t, "x-rucio-auth-token-expires": new Date(Date.now() + 3_600_000).toUTCString() })
          .end();
      }
      const m = /^\/replicas\/([^/]+)\/([^/]+)$/.exec(path);
      if (!m) return void fail(404, "NotFound", "no such resource in the stand-in");
      if (!token || !issued.has(token))
        return void fail(401, "CannotAuthenticate", "Cannot authenticate to account with given credentials");
      const [scope, name] = [decodeURIComponent(m[1]!), decodeURIComponent(m[2]!)];
      const did = dids.get(`${scope}:${name}`);
      if (!did) return void fail(404, "DataIdentifierNotFound", `Data identifier '${scope}:${name}' not found`);
      const pfns: Record<string, object> = {};
      const rses: Record<string, string[]> = {};
      did.pfns.forEach((p, i) => {
        pfns[p.pfn] = { rse: p.rse, type: p.type ?? "DISK", priority: i + 1, domain: "wan" };
        (rses[p.rse] ??= []).push(p.pfn);
      });
      const line = JSON.stringify({
        scope,
        name,
        bytes: did.bytes,
        adler32: did.adler32 ?? null,
        md5: did.md5 ?? null,
        pfns,
        rses,
        states: {},
      });
      res.writeHead(200, { "content-type": "application/x-json-stream" }).end(`${line}\n`);
    },
  );
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as { port: number }).port;
  return {
    url: `https://127.0.0.1:${port}`,
    dids,
    requests,
    issued,
    refuse,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
