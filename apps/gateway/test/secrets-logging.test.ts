/**
 * Secrets never reach the log: bearer tokens (good and bad), delegated tokens, delegated proxies
 * and private keys, with the gateway logging at `trace` through its real redaction settings.
 */
import { mkdtempSync } from "node:fs";
import { Agent, request as httpsRequest } from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import pino from "pino";
import { afterAll, beforeAll, expect, inject, it } from "vitest";
import { signCsrAsProxy } from "@ce/x509/testing";
import { startTokenIssuer, type TokenIssuer } from "@ce/testing/token-issuer";
import { REDACT_PATHS, startGateway, type GatewayHandle } from "../src/server.js";
import { createPki, newPrefix, testConfig } from "./harness.js";

const lines: string[] = [];
let gw: GatewayHandle;
let idp: TokenIssuer;
const pki = createPki();
const agent = new Agent({ keepAlive: false, rejectUnauthorized: false, ...pki.creds.alice! });

beforeAll(async () => {
  idp = await startTokenIssuer({ audience: "https://localhost:8443" });
  const config = testConfig(inject("redisUrl"), mkdtempSync(join(tmpdir(), "ce-gw-log-")), newPrefix(), pki, {
    auth: { tokens: { issuers: [{ issuer: idp.issuer, caFile: idp.caFile }] } },
  });
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      lines.push(chunk.toString("utf8"));
      cb();
    },
  });
  const logger = pino({ level: "trace", redact: { paths: REDACT_PATHS, censor: "[redacted]" } }, sink);
  gw = await startGateway(config, { logger, drainMs: 100 });
});
afterAll(async () => {
  agent.destroy();
  await gw?.close();
  await idp?.close();
});

function call(method: string, path: string, opts: { headers?: Record<string, string>; body?: string; cert?: boolean } = {}) {
  return new Promise<{ status: number; location?: string; text: string }>((resolve, reject) => {
    const headers = { ...opts.headers, ...(opts.body !== undefined ? { "content-length": String(Buffer.byteLength(opts.body)) } : {}) };
    const req = httpsRequest(
      {
        host: "127.0.0.1",
        port: gw.port,
        method,
        path: `/arex/rest${path}`,
        headers,
        ...(opts.cert === false ? { rejectUnauthorized: false, agent: false } : { agent }),
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (d: Buffer) => chunks.push(d));
        res.on("end", () =>
          resolve({
            status: res.statusCode ?? 0,
            ...(res.headers.location ? { location: res.headers.location } : {}),
            text: Buffer.concat(chunks).toString("utf8"),
          }),
        );
      },
    );
    req.on("error", reject);
    req.end(opts.body);
  });
}

it("no token, delegated token, proxy or key material is logged", async () => {
  const good = await idp.mint();
  const expired = await idp.mint({ exp: Math.floor(Date.now() / 1000) - 600 });
  const delegated = await idp.mint({ sub: "delegated-secret" });
  expect((await call("GET", "/1.1/jobs", { cert: false, headers: { authorization: `Bearer ${good}` } })).status).toBe(200);
  expect((await call("GET", "/1.1/jobs", { cert: false, headers: { authorization: `Bearer ${expired}` } })).status).toBe(401);
  const j = await call("POST", "/1.1/delegations?action=new&type=jwt", {
    cert: false,
    headers: { authorization: `Bearer ${good}`, "x-token-delegation": `Bearer ${delegated}` },
  });
  expect(j.status).toBe(201);
  expect(
    (
      await call("POST", `${j.location!.slice("/arex/rest".length)}?action=renew`, {
        cert: false,
        headers: { authorization: `Bearer ${good}`, "x-delegation": delegated },
      })
    ).status,
  ).toBe(200);
  // Handing the token out (action=get, decisions #36) logs the delegation, never the token.
  const got = await call("POST", `${j.location!.slice("/arex/rest".length)}?action=get`, {
    cert: false,
    headers: { authorization: `Bearer ${good}` },
  });
  expect([got.status, got.text]).toEqual([200, delegated]);

  const n = await call("POST", "/1.0/delegations?action=new");
  expect(n.status).toBe(201);
  const chain = signCsrAsProxy(
    n.text,
    pki.creds.alice!.cert.split(/(?=-----BEGIN CERTIFICATE-----)/)[0]!,
    pki.creds.alice!.key,
    pki.creds
      .alice!.cert.split(/(?=-----BEGIN CERTIFICATE-----)/)
      .slice(1)
      .join(""),
  );
  expect((await call("PUT", n.location!.slice("/arex/rest".length), { body: chain })).status).toBe(200);
  const id = n.location!.split("/").pop()!;
  const cred = await gw.services.delegations.credential(pki.dn.alice, id);
  if (cred?.type !== "x509") throw new Error("proxy expected");
  const keyBody = cred.proxyPem
    .split(/-----BEGIN [A-Z ]*PRIVATE KEY-----/)[1]!
    .slice(0, 64)
    .replace(/\s/g, "");

  const log = lines.join("");
  if (process.env.CE_DUMP_LOG) console.log(log);
  expect(lines.length).toBeGreaterThan(5);
  for (const secret of [good, expired, delegated]) expect(log).not.toContain(secret.split(".")[2]!.slice(0, 32));
  expect(log).not.toContain(keyBody.slice(0, 40));
  expect(log).not.toMatch(/PRIVATE KEY/);
});
