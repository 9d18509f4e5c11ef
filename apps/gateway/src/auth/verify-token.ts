/**
 * Bearer-token verification after the WLCG Common JWT Profile (middleware/identity/README.md): trusted `iss`,
 * `kid` required, asymmetric algorithms only (never `none` or HMAC — the algorithm list is ours,
 * not the token's), `aud` required and matched case-sensitively, exp/nbf/iat with leeway,
 * `wlcg.ver` major 1. Every failure names the check that failed and never echoes the token.
 */
import { compactVerify, decodeJwt, decodeProtectedHeader, errors } from "jose";
import type { CompiledConfig } from "@ce/config";
import { tokenOwner } from "@ce/model";
import { JwksCache, type IssuerConfig, type SigningAlg } from "./jwks.js";

export const WLCG_ANY_AUDIENCE = "https://wlcg.cern.ch/jwt/v1/any";

export interface TokenVerifierOptions {
  issuers: readonly IssuerConfig[];
  /** Accepted `aud` values (exact, case-sensitive). */
  audiences: readonly string[];
  allowAnyAudience: boolean;
  algorithms: readonly SigningAlg[];
  leewaySeconds: number;
  jwksCacheSeconds: number;
  minRefreshSeconds?: number;
  timeoutMs?: number;
  now?: () => number;
}

export interface VerifiedToken {
  issuer: string;
  sub: string;
  /** `<iss>/<sub>` with `sub` escaped (@ce/model tokenOwner): `sub` is unique only per issuer (A-REX README.OIDC), and the escaping keeps two issuers apart. */
  subject: string;
  scopes: Set<string>;
  groups: string[];
  /** exp in ms. */
  expires: number;
}

export type TokenFailureCode =
  | "MALFORMED"
  | "ALG_NOT_ALLOWED"
  | "MISSING_KID"
  | "UNKNOWN_ISSUER"
  | "UNKNOWN_KID"
  | "BAD_SIGNATURE"
  | "MISSING_CLAIM"
  | "EXPIRED"
  | "NOT_YET_VALID"
  | "ISSUED_IN_FUTURE"
  | "AUDIENCE_MISMATCH"
  | "UNSUPPORTED_VERSION";

export type TokenResult = { ok: true; token: VerifiedToken } | { ok: false; code: TokenFailureCode; reason: string };

const fail = (code: TokenFailureCode, reason: string): TokenResult => ({ ok: false, code, reason });

/** Claim values we quote back are issuer-controlled but not secret; keep them short and printable. */
export function quoteValue(v: unknown): string {
  const s = typeof v === "string" ? v : (JSON.stringify(v) ?? String(v));
  return JSON.stringify(s.replace(/[^\x20-\x7e]/g, "?").slice(0, 120));
}

export class TokenVerifier {
  readonly jwks: JwksCache;
  private readonly now: () => number;

  constructor(readonly opts: TokenVerifierOptions) {
    this.now = opts.now ?? Date.now;
    this.jwks = new JwksCache(opts.issuers, {
      cacheSeconds: opts.jwksCacheSeconds,
      now: this.now,
      ...(opts.minRefreshSeconds !== undefined ? { minRefreshSeconds: opts.minRefreshSeconds } : {}),
      ...(opts.timeoutMs !== undefined ? { timeoutMs: opts.timeoutMs } : {}),
    });
  }

  /** Throws JwksUnavailable when the issuer's keys cannot be fetched (a server-side problem). */
  async verify(jwt: string): Promise<TokenResult> {
    if (!/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/.test(jwt)) return fail("MALFORMED", "malformed token: not a compact JWS");
    let header: ReturnType<typeof decodeProtectedHeader>;
    let unverified: ReturnType<typeof decodeJwt>;
    try {
      header = decodeProtectedHeader(jwt);
      unverified = decodeJwt(jwt);
    } catch {
      return fail("MALFORMED", "malformed token: header or payload is not base64url JSON");
    }
    const alg = header.alg;
    if (typeof alg !== "string" || !(this.opts.algorithms as readonly string[]).includes(alg)) {
      return fail(
        "ALG_NOT_ALLOWED",
        `algorithm not allowed: ${quoteValue(alg ?? "(none)")} (accepted: ${this.opts.algorithms.join(", ")})`,
      );
    }
    if (typeof header.kid !== "string" || header.kid === "") return fail("MISSING_KID", "token header has no kid");
    // Selecting the key set by the unverified `iss` is safe: a lie only selects keys that will not verify.
    const iss = unverified.iss;
    if (typeof iss !== "string" || !this.jwks.issuerConfig(iss))
      return fail("UNKNOWN_ISSUER", `unknown issuer ${quoteValue(iss ?? "(none)")}`);
    const key = await this.jwks.key(iss, header.kid, alg as SigningAlg);
    if (!key) return fail("UNKNOWN_KID", `issuer publishes no ${alg} key with kid ${quoteValue(header.kid)}`);
    let payload: Record<string, unknown>;
    try {
      const res = await compactVerify(jwt, key, { algorithms: [alg] });
      payload = JSON.parse(new TextDecoder().decode(res.payload)) as Record<string, unknown>;
    } catch (e) {
      if (e instanceof errors.JWSSignatureVerificationFailed) return fail("BAD_SIGNATURE", "bad signature");
      if (e instanceof errors.JOSEAlgNotAllowed) return fail("ALG_NOT_ALLOWED", `algorithm not allowed: ${quoteValue(alg)}`);
      return fail("MALFORMED", `malformed token: ${e instanceof errors.JOSEError ? e.code : "payload is not JSON"}`);
    }
    return this.checkClaims(payload, iss);
  }

  private checkClaims(p: Record<string, unknown>, iss: string): TokenResult {
    const now = Math.floor(this.now() / 1000);
    const leeway = this.opts.leewaySeconds;
    if (p.iss !== iss) return fail("UNKNOWN_ISSUER", "issuer changed between header check and verification");
    if (typeof p.sub !== "string" || p.sub === "") return fail("MISSING_CLAIM", "token has no sub");
    if (typeof p.exp !== "number") return fail("MISSING_CLAIM", "token has no numeric exp");
    if (now - leeway >= p.exp) return fail("EXPIRED", `token expired at ${isoTime(p.exp)}`);
    if (p.nbf !== undefined) {
      if (typeof p.nbf !== "number") return fail("MISSING_CLAIM", "token nbf is not numeric");
      if (now + leeway < p.nbf) return fail("NOT_YET_VALID", `token not yet valid (nbf ${isoTime(p.nbf)})`);
    }
    if (p.iat !== undefined) {
      if (typeof p.iat !== "number") return fail("MISSING_CLAIM", "token iat is not numeric");
      if (now + leeway < p.iat) return fail("ISSUED_IN_FUTURE", `token issued in the future (iat ${isoTime(p.iat)})`);
    }
    const aud =
      typeof p.aud === "string" ? [p.aud] : Array.isArray(p.aud) ? p.aud.filter((a): a is string => typeof a === "string") : undefined;
    if (!aud || aud.length === 0) return fail("MISSING_CLAIM", "token has no aud");
    const accepted = this.opts.allowAnyAudience ? [...this.opts.audiences, WLCG_ANY_AUDIENCE] : this.opts.audiences;
    if (!aud.some((a) => accepted.includes(a))) {
      return fail(
        "AUDIENCE_MISMATCH",
        `audience mismatch: token aud ${quoteValue(aud.join(" "))} does not name this CE (accepted: ${accepted.join(" ")})`,
      );
    }
    const ver = p["wlcg.ver"];
    if (ver !== undefined && !(typeof ver === "string" && /^1(\.\d+)*$/.test(ver))) {
      return fail("UNSUPPORTED_VERSION", `unsupported wlcg.ver ${quoteValue(ver)} (major version 1 required)`);
    }
    const scopes = typeof p.scope === "string" ? p.scope.split(/\s+/).filter(Boolean) : [];
    const rawGroups = p["wlcg.groups"];
    const groups = Array.isArray(rawGroups) ? rawGroups.filter((g): g is string => typeof g === "string") : [];
    return {
      ok: true,
      token: { issuer: iss, sub: p.sub, subject: tokenOwner(iss, p.sub), scopes: new Set(scopes), groups, expires: p.exp * 1000 },
    };
  }
}

function isoTime(sec: number): string {
  const d = new Date(sec * 1000);
  return Number.isNaN(d.getTime()) ? String(sec) : d.toISOString().replace(/\.\d{3}Z$/, "Z");
}

export function verifierOptionsFrom(config: CompiledConfig): TokenVerifierOptions {
  const t = config.auth.tokens;
  return {
    issuers: t.issuers,
    audiences: t.audiences.length > 0 ? t.audiences : [config.origin],
    allowAnyAudience: t.allowAnyAudience,
    algorithms: t.algorithms,
    leewaySeconds: t.leewaySeconds,
    jwksCacheSeconds: t.jwksCacheSeconds,
  };
}

// One verifier (and so one key cache) per compiled configuration; no wiring in server.ts needed.
const verifiers = new WeakMap<CompiledConfig, TokenVerifier>();

export function verifierFor(config: CompiledConfig): TokenVerifier {
  let v = verifiers.get(config);
  if (!v) {
    v = new TokenVerifier(verifierOptionsFrom(config));
    verifiers.set(config, v);
  }
  return v;
}
