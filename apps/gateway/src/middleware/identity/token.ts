import { createHash } from "node:crypto";
import { tokenGroupFields } from "./groups.js";
import type { Context } from "hono";
import type { AppEnv, Identity } from "../../context.js";
import { ServiceUnavailable, Unauthorized } from "../../errors.js";
import { JwksUnavailable } from "../../auth/jwks.js";
import { verifierFor } from "../../auth/verify-token.js";

/** `Authorization: Bearer <JWT>`; the scheme name is case-insensitive (RFC 7235 §2.1). */
export function bearerToken(header: string | undefined): string | undefined {
  const m = header ? /^bearer[ \t]+(\S+)[ \t]*$/i.exec(header) : null;
  return m?.[1];
}

/** RFC 6750 §3 challenge; the description is ours (never token material), quoted-string safe. */
export function invalidTokenChallenge(reason: string): string {
  return `Bearer error="invalid_token", error_description="${reason.replace(/["\\]/g, "'")}"`;
}

/**
 * Bearer-token identity: undefined when the request carries no bearer token; throws 401 with an
 * RFC 6750 challenge naming the failed check when it carries one that does not verify.
 * Identity subject = `<iss>/<sub>` (as A-REX maps token identities).
 */
export async function tokenIdentity(c: Context<AppEnv>): Promise<Identity | undefined> {
  const header = c.req.header("authorization");
  if (header === undefined) return undefined;
  const jwt = bearerToken(header);
  if (jwt === undefined) {
    if (/^bearer\b/i.test(header))
      throw new Unauthorized(
        "Invalid token: empty or malformed Bearer credential",
        invalidTokenChallenge("malformed Authorization header"),
        "INVALID_TOKEN",
      );
    return undefined; // another scheme (Basic...): treated as no credential
  }
  const { config } = c.get("services");
  if (!config.auth.tokens.enabled) {
    throw new Unauthorized("Bearer tokens are not accepted by this CE", invalidTokenChallenge("tokens are disabled"), "TOKENS_DISABLED");
  }
  const remembered = recall(config, jwt);
  if (remembered) return remembered;
  let res;
  try {
    res = await verifierFor(config).verify(jwt);
  } catch (e) {
    if (e instanceof JwksUnavailable) {
      c.get("log").warn({ err: e.message }, "token issuer keys unavailable");
      throw new ServiceUnavailable("Cannot verify the token now: the issuer's signing keys are unavailable", "ISSUER_UNAVAILABLE");
    }
    throw e;
  }
  if (!res.ok) {
    c.get("log").info({ check: res.code, reason: res.reason }, "token rejected");
    throw new Unauthorized(`Invalid token: ${res.reason}`, invalidTokenChallenge(res.reason), `TOKEN_${res.code}`);
  }
  const t = res.token;
  const id: Identity = {
    subject: t.subject,
    kind: "token",
    issuer: t.issuer,
    scopes: t.scopes,
    ...tokenGroupFields(t.groups ?? []),
    expires: t.expires,
  };
  remember(config, jwt, id);
  return id;
}

/**
 * A client sends the same token with every request: a verified token is remembered (by its
 * SHA-256, the exact bytes, so nothing a client can vary maps to another's entry) for at most
 * TOKEN_CACHE_MS and never past its `exp`, instead of a signature check per request. The price: a
 * key withdrawn from the issuer's JWKS stops admitting its tokens up to a minute later. Refusals
 * are not remembered.
 */
const verified = new WeakMap<object, Map<string, { id: Identity; until: number }>>();
const TOKEN_CACHE_MAX = 10_000;
const TOKEN_CACHE_MS = 60_000;

function recall(config: object, jwt: string): Identity | undefined {
  const hit = verified.get(config)?.get(digest(jwt));
  return hit && hit.until > Date.now() ? hit.id : undefined;
}

function remember(config: object, jwt: string, id: Identity): void {
  let m = verified.get(config);
  if (!m) verified.set(config, (m = new Map()));
  if (m.size >= TOKEN_CACHE_MAX) m.delete(m.keys().next().value as string);
  m.set(digest(jwt), { id, until: Math.min(Date.now() + TOKEN_CACHE_MS, id.expires ?? 0) });
}

const digest = (jwt: string) => createHash("sha256").update(jwt).digest("base64");
