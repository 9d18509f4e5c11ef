/**
 * AUTH MATRIX through the real HTTPS gateway: every operation class × every kind of credential,
 * good and bad, with the exact expected status (401 no/invalid credential with a challenge, 403
 * authenticated but missing scope, 2xx otherwise) and, for refusals, a reason naming the check.
 */
import { X509Certificate } from "node:crypto";
import { Agent, request as httpsRequest } from "node:https";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { derToPem } from "@ce/x509";
import { startTokenIssuer, type MintOptions, type TokenIssuer } from "@ce/testing/token-issuer";
import { createPki, startTestGateway, XRSL, type TestGateway } from "./harness.js";
import { quietPeriod } from "@ce/testing";

interface Cred {
  tls?: { cert: string; key: string } | undefined;
  token?: () => Promise<string>;
  /** Expected outcome for every operation, and a pattern the refusal reason must match. */
  expect: "ok" | 401 | 403;
  reason?: RegExp;
}

let t: TestGateway;
let idp: TokenIssuer;
const now = () => Math.floor(Date.now() / 1000);
const mint =
  (claims: Record<string, unknown> = {}, o: MintOptions = {}) =>
  () =>
    idp.mint(claims, o);

/** The proxy chain with one bit of the proxy certificate's signature flipped. */
function tampered(chainPem: string): string {
  const first = chainPem.indexOf("-----END CERTIFICATE-----") + 25;
  const leaf = new X509Certificate(chainPem.slice(0, first));
  const der = Buffer.from(leaf.raw);
  der[der.length - 5]! ^= 0x01;
  return derToPem(der, "CERTIFICATE") + chainPem.slice(first).replace(/^\s+/, "");
}

const pki = createPki();
const CREDS: Record<string, Cred> = {
  "no credential": { expect: 401, reason: /No credential/ },
  "valid proxy": { tls: pki.creds.alice, expect: "ok" },
  "expired proxy": { tls: pki.creds.expired, expect: 401, reason: /expired/i },
  "proxy from an untrusted CA": { tls: pki.creds.untrusted, expect: 401, reason: /untrusted|issuer/i },
  "tampered proxy chain": { tls: { cert: tampered(pki.creds.alice!.cert), key: pki.creds.alice!.key }, expect: 401, reason: /signature/i },
  "valid token": { token: mint(), expect: "ok" },
  "expired token": { token: mint({ exp: now() - 600, iat: now() - 4200, nbf: now() - 4200 }), expect: 401, reason: /expired/ },
  "token nbf in the future": { token: mint({ nbf: now() + 3600 }), expect: 401, reason: /not yet valid/ },
  "token with wrong aud": { token: mint({ aud: "https://other-ce.example:8443" }), expect: 401, reason: /audience mismatch/ },
  "token from an unknown issuer": { token: mint({ iss: "https://idp.evil.example" }), expect: 401, reason: /unknown issuer/ },
  "token alg none": { token: mint({}, { alg: "none" }), expect: 401, reason: /algorithm not allowed/ },
  "token HS256 keyed with the public key": { token: mint({}, { alg: "HS256-pubkey" }), expect: 401, reason: /algorithm not allowed/ },
  "token without kid": { token: mint({}, { kid: null }), expect: 401, reason: /no kid/ },
  "token missing the scope": {
    token: mint({ scope: "storage.read:/ compute.nothing" }),
    expect: 403,
    reason: /needs token scope compute\./,
  },
};

/** Per identity that can act: a job and two delegations of its own. */
interface Own {
  job: string;
  delegGet: string;
  delegDel: string;
}
const owned: { x509?: Own; token?: Own } = {};

interface Op {
  method: string;
  path: (o: Own) => string;
  body?: (o: Own) => string;
  headers?: Record<string, string>;
  ok: number;
  /** WLCG scope a token caller needs (scopes.ts). */
  scope: string;
}
const ids = (o: Own) => JSON.stringify({ job: [{ id: o.job }] });
const JSON_H = { "content-type": "application/json", accept: "application/json" };
const OPS: Record<string, Op> = {
  "list jobs": { method: "GET", path: () => "/1.1/jobs", ok: 200, scope: "compute.read" },
  submit: {
    method: "POST",
    path: () => "/1.1/jobs?action=new",
    body: () => XRSL("matrix"),
    headers: { "content-type": "application/rsl" },
    ok: 201,
    scope: "compute.create",
  },
  "bulk status": { method: "POST", path: () => "/1.1/jobs?action=status", body: ids, headers: JSON_H, ok: 201, scope: "compute.read" },
  "session GET": { method: "GET", path: (o) => `/1.1/jobs/${o.job}/session`, ok: 200, scope: "compute.read" },
  "session PUT": { method: "PUT", path: (o) => `/1.1/jobs/${o.job}/session/in.txt`, body: () => "data", ok: 200, scope: "compute.modify" },
  diagnose: { method: "GET", path: (o) => `/1.1/jobs/${o.job}/diagnose/description`, ok: 200, scope: "compute.read" },
  kill: { method: "POST", path: () => "/1.1/jobs?action=kill", body: ids, headers: JSON_H, ok: 201, scope: "compute.cancel" },
  clean: { method: "POST", path: () => "/1.1/jobs?action=clean", body: ids, headers: JSON_H, ok: 201, scope: "compute.cancel" },
  "delegation new": { method: "POST", path: () => "/1.1/delegations?action=new", ok: 201, scope: "compute.create" },
  "delegation list": { method: "GET", path: () => "/1.1/delegations", ok: 200, scope: "compute.read" },
  "delegation get": { method: "POST", path: (o) => `/1.1/delegations/${o.delegGet}?action=get`, ok: 200, scope: "compute.read" },
  "delegation delete": { method: "POST", path: (o) => `/1.1/delegations/${o.delegDel}?action=delete`, ok: 202, scope: "compute.cancel" },
};

const agents = new Map<string, Agent>();
function call(cred: Cred, method: string, path: string, opts: { body?: string; headers?: Record<string, string>; token?: string } = {}) {
  const key = cred.tls ? cred.tls.cert : "none";
  let agent = agents.get(key);
  if (!agent) agents.set(key, (agent = new Agent({ keepAlive: true, rejectUnauthorized: false, ...(cred.tls ?? {}) })));
  const headers: Record<string, string> = { accept: "application/json", ...opts.headers };
  if (opts.token) headers.authorization = `Bearer ${opts.token}`;
  if (opts.body !== undefined) headers["content-length"] = String(Buffer.byteLength(opts.body));
  return new Promise<{ status: number; headers: Record<string, string | string[] | undefined>; text: string }>((resolve, reject) => {
    const req = httpsRequest({ host: "127.0.0.1", port: t.gw.port, method, path: `${t.rest}${path}`, headers, agent }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (d: Buffer) => chunks.push(d));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(chunks).toString("utf8") }));
    });
    req.on("error", reject);
    req.end(opts.body);
  });
}

async function setup(cred: Cred): Promise<Own> {
  const token = cred.token ? await cred.token() : undefined;
  const sub = await call(cred, "POST", "/1.1/jobs?action=new", {
    body: XRSL("owned"),
    headers: { "content-type": "application/rsl" },
    ...(token ? { token } : {}),
  });
  expect(sub.status).toBe(201);
  const job = JSON.parse(sub.text).job[0].id as string;
  const deleg = async () => {
    const r = await call(cred, "POST", "/1.1/delegations?action=new", token ? { token } : {});
    expect(r.status).toBe(201);
    return String(r.headers.location).split("/").pop()!;
  };
  return { job, delegGet: await deleg(), delegDel: await deleg() };
}

const results: Record<string, Record<string, number>> = {};

beforeAll(async () => {
  idp = await startTokenIssuer({ audience: "https://localhost:8443" });
  t = await startTestGateway(inject("redisUrl"), { auth: { tokens: { issuers: [{ issuer: idp.issuer, caFile: idp.caFile }] } } });
  owned.x509 = await setup(CREDS["valid proxy"]!);
  owned.token = await setup(CREDS["valid token"]!);
}, 60_000);

afterAll(async () => {
  for (const a of agents.values()) a.destroy();
  await t?.close();
  await idp?.close();
  const ops = Object.keys(OPS);
  const rows = Object.entries(results).map(([c, r]) => `${c.padEnd(38)} ${ops.map((o) => String(r[o] ?? "-").padStart(4)).join(" ")}`);
  // The matrix as a table in the test output (one column per operation, in OPS order).
  console.log(`AUTH MATRIX (columns: ${ops.join(" | ")})\n${rows.join("\n")}`);
});

describe.each(Object.entries(CREDS))("%s", (credName, cred) => {
  it.each(Object.entries(OPS))("%s", async (opName, op) => {
    const own = (cred.token ? owned.token : owned.x509)!;
    const token = cred.token ? await cred.token() : undefined;
    const res = await call(cred, op.method, op.path(own), {
      ...(op.body ? { body: op.body(own) } : {}),
      ...(op.headers ? { headers: op.headers } : {}),
      ...(token ? { token } : {}),
    });
    (results[credName] ??= {})[opName] = res.status;
    if (cred.expect === "ok") {
      expect(res.status, res.text).toBe(op.ok);
      return;
    }
    expect(res.status, res.text).toBe(cred.expect);
    const reason = JSON.parse(res.text).reason as string;
    expect(reason).toMatch(cred.reason!);
    if (token) expect(res.text).not.toContain(token.split(".")[1]!.slice(0, 24));
    if (cred.expect === 401) {
      expect(res.headers["www-authenticate"]).toMatch(/^Bearer /);
      if (token) expect(res.headers["www-authenticate"]).toMatch(/error="invalid_token", error_description=".+"/);
    } else {
      expect(res.headers["www-authenticate"]).toMatch(/error="insufficient_scope"/);
    }
  });
});

describe("one scope at a time: only the operations mapped to it pass", () => {
  const SCOPES = ["compute.read", "compute.create", "compute.cancel", "compute.modify"];
  it.each(SCOPES)("%s", async (scope) => {
    for (const [opName, op] of Object.entries(OPS)) {
      const own = owned.token!;
      const res = await call({ expect: "ok" }, op.method, op.path(own), {
        ...(op.body ? { body: op.body(own) } : {}),
        ...(op.headers ? { headers: op.headers } : {}),
        token: await idp.mint({ scope }),
      });
      // Allowed operations may still fail later (e.g. a delegation deleted above → 404), never with 401/403.
      if (op.scope === scope) expect([401, 403], `${opName}: ${res.text}`).not.toContain(res.status);
      else expect(res.status, `${opName} with ${scope}`).toBe(403);
    }
  });
});

describe("precedence and identity", () => {
  it("the certificate identity wins over a token, even an invalid one", async () => {
    const res = await call(CREDS["valid proxy"]!, "GET", "/1.1/delegations", { token: "not.a.token" });
    expect(res.status).toBe(200);
    const mine = JSON.parse(res.text).delegation.map((d: { id: string }) => d.id);
    expect(mine).toContain(owned.x509!.delegGet);
    expect(mine).not.toContain(owned.token!.delegGet);
  });

  it("a token identity is <iss>/<sub> and sees only its own jobs", async () => {
    const token = await idp.mint();
    const res = await call({ expect: "ok" }, "GET", "/1.1/jobs", { token });
    const jobs = JSON.parse(res.text).job.map((j: { id: string }) => j.id);
    expect(jobs).toContain(owned.token!.job);
    expect(jobs).not.toContain(owned.x509!.job);
    const rec = await t.gw.services.jobs.get(owned.token!.job);
    expect(rec?.owner).toBe(`${idp.issuer}/user-1`);
  });

  it("a verified token is remembered only for its exact bytes and never past its expiry", async () => {
    const token = await idp.mint();
    expect((await call({ expect: "ok" }, "GET", "/1.1/jobs", { token })).status).toBe(200);
    // Same header and payload, one signature character changed, right after the original was admitted.
    const [h, p, sig] = token.split(".");
    const forged = `${h}.${p}.${sig!.slice(0, 10)}${sig![10] === "A" ? "B" : "A"}${sig!.slice(11)}`;
    const bad = await call({ expect: 401 }, "GET", "/1.1/jobs", { token: forged });
    expect(bad.status).toBe(401);
    expect(JSON.parse(bad.text).reason).toMatch(/Invalid token/);
    // Still valid within the 60 s leeway for a second or two: admitted now, refused once past it.
    const ending = await idp.mint({ exp: now() - 58 });
    expect((await call({ expect: "ok" }, "GET", "/1.1/jobs", { token: ending })).status).toBe(200);
    await quietPeriod(3_000, "the token's expiry plus the 60 s leeway must pass");
    const late = await call({ expect: 401 }, "GET", "/1.1/jobs", { token: ending });
    expect(late.status).toBe(401);
    expect(JSON.parse(late.text).reason).toMatch(/expired/);
  });

  it("the Bearer prefix is case-insensitive; other schemes are no credential", async () => {
    const token = await idp.mint();
    expect((await call({ expect: "ok" }, "GET", "/1.1/jobs", { headers: { authorization: `bEaReR ${token}` } })).status).toBe(200);
    expect((await call({ expect: "ok" }, "GET", "/1.1/jobs", { headers: { authorization: "Basic dXNlcjpwdw==" } })).status).toBe(401);
  });

  it("pyarcrest-style JWT delegation: X-Token-Delegation: Bearer T with Authorization: Bearer T", async () => {
    const token = await idp.mint();
    const res = await call({ expect: "ok" }, "POST", "/1.1/delegations?action=new&type=jwt", {
      token,
      headers: { "x-token-delegation": `Bearer ${token}` },
    });
    expect(res.status).toBe(201);
    const loc = String(res.headers.location);
    expect(loc).toMatch(/^\/arex\/rest\/1\.1\/delegations\/[0-9a-f]+$/);
    const got = await call({ expect: "ok" }, "POST", `${loc.slice(t.rest.length)}?action=get`, {
      token,
      headers: { accept: "application/json" },
    });
    // The stored token (E9 get), to the token caller with compute.create that delegated it.
    expect(got.status).toBe(200);
    expect(got.headers["content-type"]).toBe("application/jwt");
    expect(got.text).toBe(token);
    // Another identity (the proxy user) cannot read it.
    expect((await call(CREDS["valid proxy"]!, "POST", `${loc.slice(t.rest.length)}?action=get`)).status).toBe(404);
  });

  it("the site policy answers 403 naming the rule (deny wins; allow list by kind)", async () => {
    const g = await startTestGateway(inject("redisUrl"), {
      auth: {
        allow: ["kind:x509", `iss:${idp.issuer}`],
        deny: [`dn:*Bob*`, `sub:${idp.issuer}/banned`],
        tokens: { issuers: [{ issuer: idp.issuer, caFile: idp.caFile }] },
      },
    });
    try {
      const ok = await g.request("GET", `${g.rest}/1.1/jobs`, { accept: "application/json" });
      expect(ok.status).toBe(200);
      const bob = await g.request("GET", `${g.rest}/1.1/jobs`, { as: "bob", accept: "application/json" });
      expect(bob.status).toBe(403);
      expect(bob.json().reason).toMatch(/deny rule dn:\*Bob\*/);
      const banned = await g.request("GET", `${g.rest}/1.1/jobs`, {
        as: "none",
        accept: "application/json",
        headers: { authorization: `Bearer ${await idp.mint({ sub: "banned" })}` },
      });
      expect([banned.status, banned.json().reason]).toEqual([403, expect.stringMatching(/deny rule sub:/)]);
      const fine = await g.request("GET", `${g.rest}/1.1/jobs`, {
        as: "none",
        accept: "application/json",
        headers: { authorization: `Bearer ${await idp.mint()}` },
      });
      expect(fine.status).toBe(200);
    } finally {
      await g.close();
    }
  });

  it("the versions list stays public", async () => {
    expect((await call({ expect: "ok" }, "GET", "")).status).toBe(200);
  });
});
