/**
 * A test OIDC token issuer served over HTTPS on 127.0.0.1: discovery document + JWKS (RSA and EC
 * keys), and `mint()` for good and deliberately bad tokens (alg none, HS256 keyed with the public
 * key, missing or unknown kid, foreign keys). Its host certificate comes from a throw-away openssl CA
 * whose PEM is `caFile`, which the gateway's `auth.tokens.issuers[].caFile` points at.
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:https";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { exportJWK, exportSPKI, generateKeyPair, SignJWT, type CryptoKey, type JWK, type JWTPayload } from "jose";

export type MintAlg = "RS256" | "ES256" | "none" | "HS256-pubkey";

export interface MintOptions {
  alg?: MintAlg;
  /** `null` omits the kid; a string overrides it (e.g. an unknown kid). */
  kid?: string | null;
  /** Sign with a key the issuer does not publish (while claiming a published kid). */
  foreignKey?: boolean;
  /** exp - iat (default 3600). Claims given as `undefined` in `claims` are left out. */
  lifetimeSeconds?: number;
}

export interface TokenIssuer {
  /** `iss` value, e.g. `https://127.0.0.1:40123/idp`. */
  issuer: string;
  caFile: string;
  /** Count of JWKS downloads (cache tests). */
  jwksFetches: number;
  /** Default audience put into minted tokens. */
  audience: string;
  mint(claims?: Record<string, unknown>, opts?: MintOptions): Promise<string>;
  /** Key rotation: publish an extra RSA key with this kid (mint with `{ kid }` to use it). */
  rotate(kid: string): Promise<void>;
  close(): Promise<void>;
}

interface SignKey {
  kid: string;
  alg: "RS256" | "ES256";
  privateKey: CryptoKey;
  publicJwk: JWK;
  spkiPem: string;
}

async function makeKey(kid: string, alg: "RS256" | "ES256"): Promise<SignKey> {
  const { publicKey, privateKey } = await generateKeyPair(alg, { extractable: true });
  return {
    kid,
    alg,
    privateKey,
    publicJwk: { ...(await exportJWK(publicKey)), kid, alg, use: "sig" },
    spkiPem: await exportSPKI(publicKey),
  };
}

/** CA + host certificate for 127.0.0.1/localhost, made with the openssl CLI. */
function hostPki(dir: string): { ca: string; cert: string; key: string } {
  const run = (...args: string[]) => execFileSync("openssl", args, { cwd: dir, stdio: "pipe" });
  run(
    "req",
    "-x509",
    "-newkey",
    "rsa:2048",
    "-nodes",
    "-keyout",
    "ca.key",
    "-out",
    "ca.pem",
    "-days",
    "2",
    "-subj",
    "/CN=Test Token Issuer CA",
  );
  run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "host.key", "-out", "host.csr", "-subj", "/CN=127.0.0.1");
  writeFileSync(join(dir, "ext.cnf"), "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n");
  run(
    "x509",
    "-req",
    "-in",
    "host.csr",
    "-CA",
    "ca.pem",
    "-CAkey",
    "ca.key",
    "-CAcreateserial",
    "-out",
    "host.pem",
    "-days",
    "2",
    "-extfile",
    "ext.cnf",
  );
  return { ca: join(dir, "ca.pem"), cert: readFileSync(join(dir, "host.pem"), "utf8"), key: readFileSync(join(dir, "host.key"), "utf8") };
}

const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString("base64url");

export async function startTokenIssuer(opts: { audience: string; path?: string }): Promise<TokenIssuer> {
  const dir = mkdtempSync(join(tmpdir(), "ce-token-issuer-"));
  const pki = hostPki(dir);
  const keys: SignKey[] = [await makeKey("rsa-1", "RS256"), await makeKey("ec-1", "ES256")];
  const stranger = { RS256: await makeKey("rsa-1", "RS256"), ES256: await makeKey("ec-1", "ES256") };
  const base = opts.path ?? "/idp";
  let issuer = "";
  const state = { jwksFetches: 0 };

  const server: Server = createServer({ cert: pki.cert, key: pki.key }, (req, res) => {
    const json = (v: unknown) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify(v));
    };
    if (req.url === `${base}/.well-known/openid-configuration`)
      return json({ issuer, jwks_uri: `${issuer}/jwks`, id_token_signing_alg_values_supported: ["RS256", "ES256"] });
    if (req.url === `${base}/jwks`) {
      state.jwksFetches++;
      return json({ keys: keys.map((k) => k.publicJwk) });
    }
    res.writeHead(404).end();
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  issuer = `https://127.0.0.1:${(server.address() as AddressInfo).port}${base}`;

  async function mint(claims: Record<string, unknown> = {}, o: MintOptions = {}): Promise<string> {
    const now = Math.floor(Date.now() / 1000);
    const payload: Record<string, unknown> = {
      iss: issuer,
      sub: "user-1",
      aud: opts.audience,
      iat: now,
      nbf: now,
      exp: now + (o.lifetimeSeconds ?? 3600),
      jti: Math.random().toString(36).slice(2),
      "wlcg.ver": "1.0",
      scope: "compute.read compute.create compute.cancel compute.modify",
      ...claims,
    };
    for (const [k, v] of Object.entries(payload)) if (v === undefined) delete payload[k];
    const alg = o.alg ?? "RS256";
    const key = keys.find((k) => k.kid === o.kid) ?? keys.find((k) => k.alg === (alg === "ES256" ? "ES256" : "RS256"))!;
    const kid = o.kid === null ? undefined : (o.kid ?? key.kid);
    if (alg === "none") return `${b64({ alg: "none", typ: "JWT", ...(kid ? { kid } : {}) })}.${b64(payload)}.`;
    if (alg === "HS256-pubkey") {
      // The classic confusion attack: HMAC keyed with the bytes of the published public key.
      return new SignJWT(payload as JWTPayload)
        .setProtectedHeader({ alg: "HS256", typ: "JWT", ...(kid ? { kid } : {}) })
        .sign(new TextEncoder().encode(key.spkiPem));
    }
    const signer = o.foreignKey ? stranger[alg] : key;
    return new SignJWT(payload as JWTPayload).setProtectedHeader({ alg, typ: "JWT", ...(kid ? { kid } : {}) }).sign(signer.privateKey);
  }

  return {
    issuer,
    caFile: pki.ca,
    audience: opts.audience,
    get jwksFetches() {
      return state.jwksFetches;
    },
    mint,
    async rotate(kid) {
      keys.push(await makeKey(kid, "RS256"));
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
      rmSync(dir, { recursive: true, force: true });
    },
  } as TokenIssuer;
}
