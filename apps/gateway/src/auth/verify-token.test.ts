import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTokenIssuer, type TokenIssuer } from "@ce/testing/token-issuer";
import { JwksUnavailable } from "./jwks.js";
import { TokenVerifier, WLCG_ANY_AUDIENCE, type TokenVerifierOptions } from "./verify-token.js";

const AUD = "https://ce.example.org:8443";
let idp: TokenIssuer;

beforeAll(async () => {
  idp = await startTokenIssuer({ audience: AUD });
});
afterAll(async () => {
  await idp?.close();
});

function verifier(over: Partial<TokenVerifierOptions> = {}): TokenVerifier {
  return new TokenVerifier({
    issuers: [{ issuer: idp.issuer, caFile: idp.caFile }],
    audiences: [AUD],
    allowAnyAudience: false,
    algorithms: ["RS256", "ES256"],
    leewaySeconds: 60,
    jwksCacheSeconds: 3600,
    ...over,
  });
}

const now = () => Math.floor(Date.now() / 1000);

describe("TokenVerifier", () => {
  it("accepts RS256 and ES256 tokens and derives the identity", async () => {
    const v = verifier();
    for (const alg of ["RS256", "ES256"] as const) {
      const res = await v.verify(await idp.mint({ "wlcg.groups": ["/atlas", "/atlas/prod"] }, { alg }));
      expect(res).toMatchObject({ ok: true });
      if (!res.ok) continue;
      expect(res.token.subject).toBe(`${idp.issuer}/user-1`);
      expect(res.token.issuer).toBe(idp.issuer);
      expect([...res.token.scopes].sort()).toEqual(["compute.cancel", "compute.create", "compute.modify", "compute.read"]);
      expect(res.token.groups).toEqual(["/atlas", "/atlas/prod"]);
    }
  });

  it("accepts aud as an array containing our origin", async () => {
    const res = await verifier().verify(await idp.mint({ aud: ["https://other", AUD] }));
    expect(res.ok).toBe(true);
  });

  const bad: [string, () => Promise<string>, string, RegExp][] = [
    ["alg none", () => idp.mint({}, { alg: "none" }), "ALG_NOT_ALLOWED", /algorithm not allowed: "none"/],
    ["HS256 keyed with the public key", () => idp.mint({}, { alg: "HS256-pubkey" }), "ALG_NOT_ALLOWED", /"HS256"/],
    ["missing kid", () => idp.mint({}, { kid: null }), "MISSING_KID", /no kid/],
    ["unknown kid", () => idp.mint({}, { kid: "nope" }), "UNKNOWN_KID", /kid "nope"/],
    ["foreign key under a published kid", () => idp.mint({}, { foreignKey: true }), "BAD_SIGNATURE", /bad signature/],
    ["unknown issuer", () => idp.mint({ iss: "https://evil.example" }), "UNKNOWN_ISSUER", /unknown issuer "https:\/\/evil.example"/],
    ["expired", () => idp.mint({ exp: now() - 120, iat: now() - 3720, nbf: now() - 3720 }), "EXPIRED", /expired/],
    ["nbf in the future", () => idp.mint({ nbf: now() + 600 }), "NOT_YET_VALID", /not yet valid/],
    ["iat in the future", () => idp.mint({ iat: now() + 600, nbf: undefined }), "ISSUED_IN_FUTURE", /iat/],
    ["wrong aud", () => idp.mint({ aud: "https://ce.example.org" }), "AUDIENCE_MISMATCH", /audience mismatch/],
    ["aud differs in case only", () => idp.mint({ aud: AUD.toUpperCase() }), "AUDIENCE_MISMATCH", /audience mismatch/],
    ["any-audience not enabled", () => idp.mint({ aud: WLCG_ANY_AUDIENCE }), "AUDIENCE_MISMATCH", /audience mismatch/],
    ["no aud", () => idp.mint({ aud: undefined }), "MISSING_CLAIM", /no aud/],
    ["no exp", () => idp.mint({ exp: undefined }), "MISSING_CLAIM", /no numeric exp/],
    ["no sub", () => idp.mint({ sub: undefined }), "MISSING_CLAIM", /no sub/],
    ["wlcg.ver 2", () => idp.mint({ "wlcg.ver": "2.0" }), "UNSUPPORTED_VERSION", /wlcg.ver/],
  ];
  it.each(bad)("rejects %s", async (_name, make, code, reason) => {
    const token = await make();
    const res = await verifier().verify(token);
    expect(res.ok).toBe(false);
    if (res.ok) return;
    expect(res.code).toBe(code);
    expect(res.reason).toMatch(reason);
    expect(res.reason).not.toContain(token.split(".")[1]!.slice(0, 20));
  });

  it("rejects a tampered payload", async () => {
    const [h, , s] = (await idp.mint()).split(".");
    const forged = Buffer.from(JSON.stringify({ iss: idp.issuer, sub: "root", aud: AUD, exp: now() + 100 })).toString("base64url");
    const res = await verifier().verify(`${h}.${forged}.${s}`);
    expect(res).toMatchObject({ ok: false, code: "BAD_SIGNATURE" });
  });

  it("rejects garbage", async () => {
    expect(await verifier().verify("abc")).toMatchObject({ ok: false, code: "MALFORMED" });
    expect(await verifier().verify("a.b.c")).toMatchObject({ ok: false, code: "MALFORMED" });
  });

  it("accepts the WLCG any audience only when enabled", async () => {
    const res = await verifier({ allowAnyAudience: true }).verify(await idp.mint({ aud: WLCG_ANY_AUDIENCE }));
    expect(res.ok).toBe(true);
  });

  it("honours the leeway for exp and nbf", async () => {
    const v = verifier({ leewaySeconds: 120 });
    expect((await v.verify(await idp.mint({ exp: now() - 30 }))).ok).toBe(true);
    expect((await v.verify(await idp.mint({ nbf: now() + 30 }))).ok).toBe(true);
    expect((await verifier({ leewaySeconds: 0 }).verify(await idp.mint({ nbf: now() + 30 }))).ok).toBe(false);
  });

  it("can restrict algorithms to RS256", async () => {
    const res = await verifier({ algorithms: ["RS256"] }).verify(await idp.mint({}, { alg: "ES256" }));
    expect(res).toMatchObject({ ok: false, code: "ALG_NOT_ALLOWED" });
  });

  it("caches the JWKS and refreshes once for an unknown kid (rate limited)", async () => {
    const v = verifier({ minRefreshSeconds: 3600 });
    const before = idp.jwksFetches;
    for (let i = 0; i < 3; i++) expect((await v.verify(await idp.mint())).ok).toBe(true);
    expect(idp.jwksFetches - before).toBe(1);
    await idp.rotate("rsa-2");
    // The refresh window is still closed: the new key is not seen yet.
    expect(await v.verify(await idp.mint({}, { kid: "rsa-2" }))).toMatchObject({ ok: false, code: "UNKNOWN_KID" });
    expect(idp.jwksFetches - before).toBe(1);
  });

  it("picks up a rotated key on the first unknown kid", async () => {
    const v = verifier({ minRefreshSeconds: 0 });
    expect((await v.verify(await idp.mint())).ok).toBe(true);
    await idp.rotate("rsa-3");
    expect((await v.verify(await idp.mint({}, { kid: "rsa-3" }))).ok).toBe(true);
  });

  it("fails closed without the issuer's CA (hostname/CA verification is on)", async () => {
    const v = new TokenVerifier({ ...verifier().opts, issuers: [{ issuer: idp.issuer }] });
    await expect(v.verify(await idp.mint())).rejects.toBeInstanceOf(JwksUnavailable);
  });

  it("keeps serving cached keys when the issuer goes away", async () => {
    let t = Date.now();
    const other = await startTokenIssuer({ audience: AUD });
    const v = new TokenVerifier({
      ...verifier().opts,
      issuers: [{ issuer: other.issuer, caFile: other.caFile }],
      jwksCacheSeconds: 1,
      now: () => t,
    });
    const token = await other.mint();
    expect((await v.verify(token)).ok).toBe(true);
    await other.close();
    t += 60_000; // past the cache lifetime and the retry spacing: a refresh is tried and fails
    expect((await v.verify(token)).ok).toBe(true);
    t += 1000; // within the spacing: no new attempt, still served from the cache
    expect((await v.verify(token)).ok).toBe(true);
  });

  it("without cached keys, an unreachable issuer fails fast after the first attempt", async () => {
    let t = Date.now();
    const other = await startTokenIssuer({ audience: AUD });
    const token = await other.mint();
    await other.close();
    const v = new TokenVerifier({ ...verifier().opts, issuers: [{ issuer: other.issuer, caFile: other.caFile }], now: () => t });
    await expect(v.verify(token)).rejects.toBeInstanceOf(JwksUnavailable);
    const t0 = performance.now();
    await expect(v.verify(token)).rejects.toBeInstanceOf(JwksUnavailable);
    expect(performance.now() - t0).toBeLessThan(50);
    t += 31_000;
    await expect(v.verify(token)).rejects.toBeInstanceOf(JwksUnavailable);
  });
});
