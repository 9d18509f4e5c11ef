import { mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { splitPem } from "@ce/x509";
import { issueHostCert, vomsProxy, writeCADir } from "@ce/x509/testing";
import { startOrigin, type Origin } from "@ce/testing/origin";
import { testPki, type TestPki } from "@ce/testing/storage";
import type { Jem } from "../src/daemon.js";
import { credentialKey } from "../src/staging/cache/policy.js";
import { OWNER, output, shellJob, submitTestJob, testEnv, testJem, waitForRest, type TestEnv } from "./helpers.js";

// The cache remembers an origin's yes per credential, not per DN: the same user with another
// VOMS role or another token scope is asked again, and the origin's no stands. A real HTTPS origin
// that authorizes by the proxy's VOMS role or the token's scope, real VOMS proxies (voms-proxy-fake).
let env: TestEnv;
let jem: Jem | undefined;
let origin: Origin;
let pki: TestPki;
let caDir: string;

beforeAll(async () => {
  pki = testPki();
  origin = await startOrigin(pki);
  const dir = await mkdtemp(join(tmpdir(), "jem-cachecred-"));
  const caFile = join(dir, "ca.pem");
  await writeFile(caFile, pki.ca.certPem);
  caDir = writeCADir(join(dir, "ca"), [pki.ca]);
  env = await testEnv({
    staging: { caFile, cache: { dirs: [{ path: join(dir, "c") }], cleanIntervalSeconds: 3600 } },
  });
  jem = await testJem(env);
});
afterAll(async () => {
  await jem?.stop();
  await env?.close();
  await origin?.close();
});

const server = () => issueHostCert(pki.ca, { hostnames: ["voms.example.org"], dn: "/DC=org/DC=test/CN=voms.example.org" });

async function x509Delegation(fqans: string[]): Promise<string> {
  const pem = vomsProxy(pki.user, server(), { vo: "atlas", fqans }, caDir);
  const parts = splitPem(pem);
  const id = await env.delegations!.create(OWNER, "x509", { privateKeyPem: parts.privateKeys[0]! });
  await env.delegations!.storeProxy(id, OWNER, pem, Date.now() + 3_600_000, parts.certificates.join(""));
  return id;
}

const b64 = (o: object) => Buffer.from(JSON.stringify(o)).toString("base64url");
const token = (scope: string) =>
  `${b64({ alg: "RS256", kid: "k" })}.${b64({ iss: "https://iss.example", sub: "u1", aud: origin.url, scope, exp: Math.floor(Date.now() / 1000) + 3600 })}.c2ln`;

async function run(path: string, delegation: string, fqans: string[], cache = "yes") {
  const id = await submitTestJob(
    env,
    shellJob("cat in.dat > got.txt", {
      inputFiles: [{ name: "in.dat", source: `${origin.url}${path}`, executable: false, options: { cache } }],
      outputFiles: [output("got.txt")],
    }),
    { owner: OWNER, mainDelegation: delegation, delegations: [delegation], fqans },
  );
  return waitForRest(env, id, ["FINISHED", "FAILED"], 30_000);
}

describe("the cache asks again when the credential changed", () => {
  it("a VOMS role the origin refuses gets no cached copy after the same DN's production role was served", async () => {
    origin.files.set("/private/role.dat", Buffer.from("production only\n"));
    origin.rule.refuse = (who) => who.fqans.length > 0 && !who.fqans.includes("/atlas/Role=production");
    const production = await x509Delegation(["/atlas/Role=production"]);
    expect((await run("/private/role.dat", production, ["/atlas/Role=production"]))?.failure).toBeUndefined();
    expect(origin.count("GET", "/private/role.dat")).toBe(1);

    const plain = await x509Delegation(["/atlas"]);
    for (const mode of ["yes", "invariant"]) {
      const r = await run("/private/role.dat", plain, ["/atlas"], mode);
      expect(r?.rest, mode).toBe("FAILED");
      expect(r?.failure).toMatch(/origin refuses .*role\.dat to this user \(HTTP 403\)/);
    }
    expect(origin.count("GET", "/private/role.dat")).toBe(1);
    // The production proxy again: remembered, not asked.
    const heads = origin.count("HEAD", "/private/role.dat");
    expect((await run("/private/role.dat", production, ["/atlas/Role=production"]))?.failure).toBeUndefined();
    expect(origin.count("HEAD", "/private/role.dat")).toBe(heads);
  }, 60_000);

  it("a token without the storage scope gets no cached copy after the same iss/sub with the scope was served", async () => {
    origin.files.set("/private/scope.dat", Buffer.from("storage.read only\n"));
    origin.rule.refuse = (who) => who.token !== undefined && !String(who.token.scope).split(" ").includes("storage.read:/private");
    const wide = await env.delegations!.create(OWNER, "jwt", {
      token: token("compute.read storage.read:/private"),
      expires: Date.now() + 3_600_000,
    });
    expect((await run("/private/scope.dat", wide, []))?.failure).toBeUndefined();
    const narrow = await env.delegations!.create(OWNER, "jwt", { token: token("compute.read"), expires: Date.now() + 3_600_000 });
    const r = await run("/private/scope.dat", narrow, []);
    expect(r?.rest).toBe("FAILED");
    expect(r?.failure).toMatch(/origin refuses .*scope\.dat to this user \(HTTP 403\)/);
    expect(origin.count("GET", "/private/scope.dat")).toBe(1);
  }, 60_000);

  it("the key: proxy chain and FQANs, or the token's iss, sub, scopes, audiences and groups; never the key material", () => {
    const t = (claims: object) => ({ type: "jwt" as const, delegationId: "d", token: `${b64({})}.${b64(claims)}.x` });
    const base = { iss: "https://i", sub: "s", scope: "a b", aud: ["x"], "wlcg.groups": ["/g"], exp: 1 };
    const k = credentialKey(t(base), [], OWNER);
    expect(credentialKey(t({ ...base, scope: "b a", exp: 2, jti: "other" }), [], OWNER)).toBe(k);
    for (const change of [{ scope: "a" }, { sub: "t" }, { iss: "https://j" }, { aud: ["y"] }, { "wlcg.groups": ["/g", "/h"] }])
      expect(credentialKey(t({ ...base, ...change }), [], OWNER), JSON.stringify(change)).not.toBe(k);
    const proxy = { type: "x509" as const, delegationId: "d", proxyPem: pki.proxy.certPem + pki.proxy.keyPem + pki.user.certPem };
    const p = credentialKey(proxy, ["/atlas"], OWNER);
    expect(credentialKey({ ...proxy, proxyPem: pki.proxy.certPem + pki.user.certPem }, ["/atlas"], OWNER)).toBe(p);
    expect(credentialKey(proxy, ["/atlas/Role=production"], OWNER)).not.toBe(p);
    expect(credentialKey(undefined, undefined, OWNER)).not.toBe(credentialKey(undefined, undefined, "/CN=other"));
  });
});
