import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { Agent, request as httpsRequest } from "node:https";
import type { IncomingHttpHeaders } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect as tlsConnect } from "node:tls";
import type { Redis } from "ioredis";
import pino, { type Logger } from "pino";
import { compileConfig, type CompiledConfig, type ConfigInput } from "@ce/config";
import { createCA, createProxy, issueHostCert, issueUserCert, writeCADir, type TestCredential } from "@ce/x509/testing";
import { startGateway, type GatewayHandle } from "../src/server.js";

/** A throwaway PKI: one trusted CA, one CA nobody trusts, two users with RFC 3820 proxies. */
export interface Pki {
  dir: string;
  caDir: string;
  ca: TestCredential;
  host: TestCredential;
  hostCertFile: string;
  hostKeyFile: string;
  creds: Record<CredName, { cert: string; key: string } | undefined>;
  dn: { alice: string; bob: string };
}
export type CredName = "alice" | "bob" | "aliceCert" | "expired" | "untrusted" | "none";

let pkiCache: Pki | undefined;

export function createPki(): Pki {
  if (pkiCache) return pkiCache;
  const dir = mkdtempSync(join(tmpdir(), "ce-gw-pki-"));
  const ca = createCA({ dn: "/DC=org/DC=cetest/CN=CE Test CA" });
  const rogue = createCA({ dn: "/DC=org/DC=rogue/CN=Rogue CA" });
  const caDir = writeCADir(join(dir, "ca"), [ca]);
  const host = issueHostCert(ca, { hostnames: ["localhost", "127.0.0.1"] });
  const alice = issueUserCert(ca, { dn: "/DC=org/DC=cetest/CN=Alice Tester" });
  const bob = issueUserCert(ca, { dn: "/DC=org/DC=cetest/CN=Bob Tester" });
  const mallory = issueUserCert(rogue, { dn: "/DC=org/DC=cetest/CN=Alice Tester" });
  const proxy = (u: TestCredential, o = {}) => createProxy(u, undefined, o);
  const expired = proxy(alice, { notBefore: new Date(Date.now() - 7200_000), notAfter: new Date(Date.now() - 3600_000) });
  const pair = (p: TestCredential) => ({ cert: p.chainPem, key: p.keyPem });
  const hostCertFile = join(dir, "hostcert.pem");
  const hostKeyFile = join(dir, "hostkey.pem");
  writeFileSync(hostCertFile, host.chainPem);
  writeFileSync(hostKeyFile, host.keyPem, { mode: 0o600 });
  pkiCache = {
    dir,
    caDir,
    ca,
    host,
    hostCertFile,
    hostKeyFile,
    creds: {
      alice: pair(proxy(alice)),
      bob: pair(proxy(bob)),
      aliceCert: pair(alice),
      expired: pair(expired),
      untrusted: pair(proxy(mallory)),
      none: undefined,
    },
    dn: { alice: alice.dn, bob: bob.dn },
  };
  return pkiCache;
}

/** Parsed JSON of responses under test: loosely typed on purpose, the assertions check the shape. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type J = any;

export interface Reply {
  status: number;
  statusMessage: string;
  headers: IncomingHttpHeaders;
  text: string;
  /** The body's bytes (for binary answers: archives, files). */
  body: Buffer;
  json<T = J>(): T;
}

export interface RequestOptions {
  as?: CredName;
  accept?: string;
  headers?: Record<string, string>;
  body?: string | Buffer;
}

export interface TestGateway {
  gw: GatewayHandle;
  config: CompiledConfig;
  pki: Pki;
  /** Where this gateway listens (`gw.url`). A browser on the CE's pages sends `config.origin` (endpoint.url's) as `Origin`. */
  origin: string;
  /** `<mount>/rest` path. */
  rest: string;
  prefix: string;
  stateDir: string;
  request(method: string, path: string, opts?: RequestOptions): Promise<Reply>;
  /** Raw HTTP/1.1 exchange over TLS with an arbitrary request line (absolute-form targets). */
  raw(requestText: string, as?: CredName): Promise<{ status: number; head: string; body: string }>;
  close(): Promise<void>;
}

export function testConfig(redisUrl: string, stateDir: string, prefix: string, pki: Pki, overrides: ConfigInput = {}): CompiledConfig {
  return compileConfig({
    ...overrides,
    endpoint: { url: "https://localhost:8443/arex", ...overrides.endpoint },
    paths: { stateDir, ...overrides.paths },
    redis: { ...overrides.redis, url: redisUrl, prefix },
    gateway: {
      host: "127.0.0.1",
      port: 0,
      tls: { certFile: pki.hostCertFile, keyFile: pki.hostKeyFile },
      ...overrides.gateway,
      limits: { requestsPerSecond: 0, ...overrides.gateway?.limits },
    },
    auth: { caDir: pki.caDir, ...overrides.auth },
    delegations: { keyPoolSize: 0, encryptionKey: randomBytes(32).toString("base64"), ...overrides.delegations },
    logging: { level: "silent" },
  });
}

export function newPrefix(): string {
  return `{t${randomBytes(6).toString("hex")}}`;
}

/** Starts a gateway with its own Redis prefix and state directory (or shared ones, for multi-gateway tests). */
export async function startTestGateway(
  redisUrl: string,
  overrides: ConfigInput = {},
  shared?: { prefix: string; stateDir: string; encryptionKey: string },
  /** The gateway's logger (tests that read its lines); silent by default. */
  logger: Logger = pino({ level: "silent" }),
): Promise<TestGateway> {
  const pki = createPki();
  const stateDir = shared?.stateDir ?? mkdtempSync(join(tmpdir(), "ce-gw-"));
  const prefix = shared?.prefix ?? newPrefix();
  const withKey = shared ? { ...overrides, delegations: { ...overrides.delegations, encryptionKey: shared.encryptionKey } } : overrides;
  const config = testConfig(redisUrl, stateDir, prefix, pki, withKey);
  const gw = await startGateway(config, { logger, drainMs: 200 });
  const agents = new Map<CredName, Agent>();
  const agent = (as: CredName) => {
    let a = agents.get(as);
    if (!a) {
      const c = pki.creds[as];
      a = new Agent({ keepAlive: true, rejectUnauthorized: false, ...(c ? { cert: c.cert, key: c.key } : {}) });
      agents.set(as, a);
    }
    return a;
  };

  const request = (method: string, path: string, opts: RequestOptions = {}): Promise<Reply> =>
    new Promise((resolve, reject) => {
      const headers: Record<string, string> = { ...opts.headers };
      if (opts.accept) headers.accept = opts.accept;
      if (opts.body !== undefined) headers["content-length"] = String(Buffer.byteLength(opts.body));
      const req = httpsRequest({ host: "127.0.0.1", port: gw.port, method, path, headers, agent: agent(opts.as ?? "alice") }, (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (d: Buffer) => chunks.push(d));
        res.on("end", () => {
          const body = Buffer.concat(chunks);
          const text = body.toString("utf8");
          resolve({
            status: res.statusCode ?? 0,
            statusMessage: res.statusMessage ?? "",
            headers: res.headers,
            text,
            body,
            json: () => JSON.parse(text),
          });
        });
        res.on("error", reject);
      });
      req.on("error", reject);
      req.end(opts.body);
    });

  const raw = (requestText: string, as: CredName = "alice") =>
    new Promise<{ status: number; head: string; body: string }>((resolve, reject) => {
      const c = pki.creds[as];
      const sock = tlsConnect(
        { host: "127.0.0.1", port: gw.port, rejectUnauthorized: false, ...(c ? { cert: c.cert, key: c.key } : {}) },
        () => {
          sock.write(requestText);
        },
      );
      let buf = "";
      sock.on("data", (d) => {
        buf += d.toString("utf8");
        const end = buf.indexOf("\r\n\r\n");
        if (end < 0) return;
        const head = buf.slice(0, end);
        const len = Number(/content-length:\s*(\d+)/i.exec(head)?.[1] ?? 0);
        if (buf.length - end - 4 >= len) {
          sock.end();
          resolve({ status: Number(head.split(" ")[1]), head, body: buf.slice(end + 4, end + 4 + len) });
        }
      });
      sock.on("error", reject);
    });

  return {
    gw,
    config,
    pki,
    origin: gw.url,
    rest: `${config.mountPath}/rest`,
    prefix,
    stateDir,
    request,
    raw,
    async close() {
      for (const a of agents.values()) a.destroy();
      // Remove this suite's keys; the Redis server is shared by the whole run.
      if (!shared) {
        const keys = await scanKeys(gw.services.redis, `${prefix}*`).catch(() => [] as string[]);
        for (let i = 0; i < keys.length; i += 500) await gw.services.redis.del(...keys.slice(i, i + 500));
      }
      await gw.close();
      if (!shared) rmSync(stateDir, { recursive: true, force: true });
    },
  };
}

async function scanKeys(redis: Redis, match: string): Promise<string[]> {
  const out: string[] = [];
  let cursor = "0";
  do {
    const [next, keys] = await redis.scan(cursor, "MATCH", match, "COUNT", 1000);
    out.push(...keys);
    cursor = next;
  } while (cursor !== "0");
  return out;
}

/** Tiny XML helpers for assertions. */
export function xmlAll(xml: string, tag: string): string[] {
  return [...xml.matchAll(new RegExp(`<${tag}(?:\\s[^>]*)?>([\\s\\S]*?)</${tag}>`, "g"))].map((m) => m[1]!);
}

export const XRSL = (name = "job", extra = "") =>
  `&(executable="/bin/echo")(arguments="hello")(jobname="${name}")(stdout="out.txt")${extra}`;

export const ADL = (name = "adl-job", extra = "") =>
  `<adl:ActivityDescription xmlns:adl="http://www.eu-emi.eu/es/2010/12/adl" xmlns:nordugrid-adl="http://www.nordugrid.org/es/2011/12/nordugrid-adl">
  <adl:ActivityIdentification><adl:Name>${name}</adl:Name></adl:ActivityIdentification>
  <adl:Application><adl:Executable><adl:Path>/bin/echo</adl:Path><adl:Argument>hi</adl:Argument></adl:Executable><adl:Output>out.txt</adl:Output></adl:Application>
  ${extra}
</adl:ActivityDescription>`;
