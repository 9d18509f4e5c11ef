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
    if (/^bearer\b/i.test(header)) throw new Unauthorized("Invalid token: empty or malformed Bearer credential", invalidTokenChallenge("malformed Authorization header"), "INVALID_TOKEN");
    return undefined; // another scheme (Basic...): treated as no credential
  }
  const { config } = c.get("services");
  if (!config.auth.tokens.enabled) {
    throw new Unauthorized("Bearer tokens are not accepted by this CE", invalidTokenChallenge("tokens are disabled"), "TOKENS_DISABLED");
  }
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
  return { subject: t.subject, kind: "token", issuer: t.issuer, scopes: t.scopes, ...tokenGroupFields(t.groups ?? []), expires: t.expires };
}
