/**
 * VO-aware authorization through the real gateway: VOMS proxies made by voms-proxy-fake (real ACs
 * signed by a test VOMS server), and tokens with wlcg.groups hitting the same rules.
 * Queue `grid` is open to `/atlas/Role=production` and `/dteam` only; `/info` says so in GLUE2.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { request as httpsRequest } from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import {
  acsOf,
  createProxy,
  HAS_VOMS_FAKE,
  issueHostCert,
  issueUserCert,
  lscFor,
  proxyWithAcs,
  vomsProxy,
  type TestCredential,
} from "@ce/x509/testing";
import { startTokenIssuer, type TokenIssuer } from "@ce/testing/token-issuer";
import { createPki, startTestGateway, XRSL, type TestGateway } from "./harness.js";

interface Res {
  status: number;
  text: string;
  json: () => { [k: string]: unknown };
}

function call(
  t: TestGateway,
  method: string,
  path: string,
  auth: { pem: string } | { token: string },
  body?: string,
  accept = "application/json",
): Promise<Res> {
  return new Promise((resolve, reject) => {
    const tls = "pem" in auth ? { cert: auth.pem, key: auth.pem } : {};
    const headers: Record<string, string | number> = { accept };
    if ("token" in auth) headers.authorization = `Bearer ${auth.token}`;
    if (body)
      Object.assign(headers, {
        "content-type": body.startsWith("{") ? "application/json" : "application/rsl",
        "content-length": Buffer.byteLength(body),
      });
    const req = httpsRequest(
      { host: "127.0.0.1", port: t.gw.port, method, path, headers, rejectUnauthorized: false, agent: false, ...tls },
      (res) => {
        let text = "";
        res.on("data", (d: Buffer) => (text += d.toString()));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, text, json: () => JSON.parse(text) }));
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

const item = (r: Res) => (r.json().job as { id: string; "status-code": string; reason: string }[])[0]!;

const pki = createPki();
const dir = mkdtempSync(join(tmpdir(), "ce-voms-gw-"));
const vomsdir = join(dir, "vomsdir");
const server = issueHostCert(pki.ca, { hostnames: ["voms.example.org"], dn: "/DC=org/DC=cetest/CN=voms.example.org" });
const rogue = issueHostCert(pki.ca, { hostnames: ["rogue.example.org"], dn: "/DC=org/DC=cetest/CN=rogue.example.org" });
const carol = issueUserCert(pki.ca, { dn: "/DC=org/DC=cetest/CN=Carol VO" });
mkdirSync(join(vomsdir, "atlas"), { recursive: true });
mkdirSync(join(vomsdir, "dteam"), { recursive: true });
writeFileSync(join(vomsdir, "atlas", "voms.example.org.lsc"), lscFor(server));
writeFileSync(join(vomsdir, "dteam", "voms.example.org.lsc"), lscFor(server));
const proxy = (fqans: string[], o: { vo?: string; signer?: TestCredential; acHours?: number; pastAcSeconds?: number } = {}) => ({
  pem: vomsProxy(carol, o.signer ?? server, { vo: o.vo ?? "atlas", fqans, acHours: o.acHours, pastAcSeconds: o.pastAcSeconds }, pki.caDir),
});
const submit = (t: TestGateway, auth: { pem: string } | { token: string }, queue: string) =>
  call(t, "POST", `${t.rest}/1.1/jobs?action=new&queue=${queue}`, auth, XRSL(`voms-${queue}`));

describe.skipIf(!HAS_VOMS_FAKE)("VOMS proxies and token groups through the gateway", () => {
  let t: TestGateway;
  let lax: TestGateway;
  let idp: TokenIssuer;
  const queues = [
    { name: "main", allow: [] },
    { name: "grid", allow: ["fqan:/atlas/Role=production", "vo:dteam"] },
  ];

  beforeAll(async () => {
    idp = await startTokenIssuer({ audience: "https://localhost:8443" });
    const tokens = { issuers: [{ issuer: idp.issuer, caFile: idp.caFile }] };
    t = await startTestGateway(inject("redisUrl"), { jobs: { queues }, auth: { voms: { dir: vomsdir }, tokens } });
    lax = await startTestGateway(inject("redisUrl"), { jobs: { queues }, auth: { voms: { dir: vomsdir, invalidAc: "ignore" } } });
  });
  afterAll(async () => {
    await t?.close();
    await lax?.close();
    await idp?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("/atlas/Role=production may use queue grid; the job keeps its FQANs (primary first)", async () => {
    const r = await submit(t, proxy(["/atlas/Role=production", "/atlas"]), "grid");
    expect(r.status).toBe(201);
    const created = item(r);
    expect(created["status-code"]).toBe("201");
    const rec = await t.gw.services.jobs.get(created.id);
    expect(rec?.owner).toBe(carol.dn); // the AC never changes the identity
    expect(rec?.fqans).toEqual(["/atlas/Role=production", "/atlas"]);
    const info = await call(
      t,
      "POST",
      `${t.rest}/1.1/jobs?action=info`,
      proxy(["/atlas/Role=production"]),
      JSON.stringify({ job: [{ id: created.id }] }),
      "application/xml",
    );
    expect(info.text).toContain("<OtherInfo>FQAN=/atlas/Role=production</OtherInfo>");
    const local = await call(t, "GET", `${t.rest}/1.1/jobs/${created.id}/diagnose/local`, proxy(["/atlas"]), undefined, "text/plain");
    expect(local.text).toMatch(/^voms=\/atlas\/Role=production$/m);
  });

  it("plain /atlas, another atlas group, or no VOMS at all may not use queue grid, but may use main", async () => {
    for (const auth of [proxy(["/atlas"]), proxy(["/atlas/lcg1", "/atlas"]), { pem: createProxy(carol).filePem }]) {
      const r = await submit(t, auth, "grid");
      expect(r.status).toBe(201);
      expect(item(r)["status-code"]).toBe("403");
      expect((await submit(t, auth, "main")).status).toBe(201);
    }
    // A VO this site has no vomsdir entry for cannot be verified: refused (VOMS-aware default).
    const cms = await call(t, "GET", `${t.rest}/1.1/jobs`, proxy(["/cms"], { vo: "cms" }));
    expect(cms.status).toBe(401);
    expect(cms.text).toMatch(/no .lsc file for cms\/voms.example.org/);
    const dteam = await submit(t, proxy(["/dteam"], { vo: "dteam" }), "grid");
    expect(item(dteam)["status-code"]).toBe("201");
  });

  it("a token whose wlcg.groups holds /dteam hits the same rule; one without does not", async () => {
    const yes = await submit(t, { token: await idp.mint({ "wlcg.groups": ["/dteam"] }) }, "grid");
    expect(item(yes)["status-code"]).toBe("201");
    const no = await submit(t, { token: await idp.mint({ "wlcg.groups": ["/atlas"] }) }, "grid");
    expect(item(no)["status-code"]).toBe("403");
  });

  it("an expired AC, an AC from a server not in the .lsc, or a stolen AC is refused with a reason", async () => {
    const expired = await call(t, "GET", `${t.rest}/1.1/jobs`, proxy(["/atlas"], { acHours: 1, pastAcSeconds: 3 * 3600 }));
    expect(expired.status).toBe(401);
    expect(expired.text).toMatch(/invalid VOMS attributes.*expired at/);
    const untrusted = await call(t, "GET", `${t.rest}/1.1/jobs`, proxy(["/atlas"], { signer: rogue }));
    expect(untrusted.status).toBe(401);
    expect(untrusted.text).toMatch(/invalid VOMS attributes/);
    // Carol's AC copied into another user's proxy: the holder check fails.
    const dave = issueUserCert(pki.ca, { dn: "/DC=org/DC=cetest/CN=Dave" });
    const stolen = proxyWithAcs(dave, acsOf(proxy(["/atlas/Role=production"]).pem));
    const r = await call(t, "GET", `${t.rest}/1.1/jobs`, { pem: stolen.filePem });
    expect(r.status).toBe(401);
    expect(r.text).toMatch(/issued for another certificate/);
    // With invalidAc: ignore the AC is dropped, the identity stays, and the VO rule no longer admits it.
    const ign = await submit(lax, { pem: stolen.filePem }, "grid");
    expect(ign.status).toBe(201);
    expect(item(ign)["status-code"]).toBe("403");
  });

  it("GET /info publishes the share's MappingPolicy as vo: rules", async () => {
    const r = await call(t, "GET", `${t.rest}/1.1/info`, proxy(["/atlas"]), undefined, "application/xml");
    expect(r.status).toBe(200);
    const grid = r.text.slice(r.text.indexOf("<Name>grid</Name>") - 400);
    expect(grid).toMatch(/<MappingPolicy[^>]*>[\s\S]*<Rule>vo:atlas<\/Rule>[\s\S]*<Rule>vo:dteam<\/Rule>/);
  });
});
