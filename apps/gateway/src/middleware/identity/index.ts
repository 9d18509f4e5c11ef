import type { Context, MiddlewareHandler } from "hono";
import type { AppEnv, Identity } from "../../context.js";
import { Forbidden, Unauthorized } from "../../errors.js";
import { x509Identity } from "./x509.js";
import { tokenIdentity } from "./token.js";
import { checkAccessPolicy } from "./policy.js";

/**
 * Authentication for every /rest request. Identity comes only from the verified TLS client chain
 * (x509.ts) or a verified bearer token (token.ts); when both are present the certificate wins, as
 * on the established server. Then the site's access policy (policy.ts) decides 403.
 * Public resources (versions, and /info when `auth.infoPublic`) pass without credentials.
 */
export function identity(): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const id = await authenticate(c);
    if (id) {
      const denied = checkAccessPolicy(c.get("services").config, id);
      if (denied) throw new Forbidden(`Not authorized: ${denied}`, "POLICY_DENIED");
      c.set("identity", id);
      c.get("log").debug({ subject: id.subject, kind: id.kind }, "authenticated");
    } else if (!isPublic(c)) {
      throw new Unauthorized(
        "No credential: present a client certificate (X.509 or RFC 3820 proxy) or an Authorization: Bearer token",
        CHALLENGE,
        "NO_CREDENTIAL",
      );
    }
    await next();
  };
}

const CHALLENGE = 'Bearer realm="ce"';

async function authenticate(c: Context<AppEnv>): Promise<Identity | undefined> {
  try {
    const cert = await x509Identity(c);
    if (cert) return cert;
    return await tokenIdentity(c);
  } catch (e) {
    // Every 401 carries a challenge (RFC 7235 §3.1); certificate failures have no scheme of their own.
    if (e instanceof Unauthorized && !e.headers["WWW-Authenticate"]) throw new Unauthorized(e.message, CHALLENGE, e.code);
    throw e;
  }
}

function isPublic(c: Context<AppEnv>): boolean {
  const { config } = c.get("services");
  const rest = `${config.mountPath}/rest`;
  const path = new URL(c.req.url).pathname.replace(/\/{2,}/g, "/").replace(/\/$/, "");
  if (path === rest) return true;
  return config.auth.infoPublic && /^\/1\.[01]\/info$/.test(path.slice(rest.length));
}
