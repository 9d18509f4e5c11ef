import { createHash, createHmac, timingSafeEqual } from "node:crypto";
import { readFileSync } from "node:fs";
import type { Context, MiddlewareHandler } from "hono";
import { getCookie, setCookie } from "hono/cookie";
import type { CompiledConfig } from "@ce/config";
import { ADMIN_PAGE_HEADERS } from "./admin-index.js";

/** Cookie set after a valid `?token=` so the bull-board UI (a browser) can load its API calls. */
export const ADMIN_COOKIE = "ce_admin";

/**
 * The admin token: `admin.token`, else the trimmed content of `admin.tokenFile`. Undefined when
 * neither is set: the admin listener then refuses everything but /healthz.
 */
export function resolveAdminToken(config: { admin: Pick<CompiledConfig["admin"], "token" | "tokenFile"> }): string | undefined {
  if (config.admin.token) return config.admin.token;
  if (config.admin.tokenFile) {
    const t = readFileSync(config.admin.tokenFile, "utf8").trim();
    return t || undefined;
  }
  return undefined;
}

/** Digests first: timingSafeEqual needs equal lengths, and the length must not leak either. */
export function tokensEqual(given: string, expected: string): boolean {
  const a = createHash("sha256").update(given).digest();
  const b = createHash("sha256").update(expected).digest();
  return timingSafeEqual(a, b);
}

/** The cookie carries a value derived from the token, never the token itself. */
function cookieValue(token: string): string {
  return createHmac("sha256", token).update("ce-admin-cookie-v1").digest("base64url");
}

/** A person's browser (a page navigation) rather than a program or bull-board's own API calls. */
export const wantsPage = (c: Context) => c.req.method === "GET" && (c.req.header("accept") ?? "").includes("text/html");

function unauthorized(c: Context, page?: (wrong: boolean) => string, wrong = false) {
  c.header("WWW-Authenticate", 'Bearer realm="ce-admin"');
  if (page && wantsPage(c)) return c.body(page(wrong), 401, ADMIN_PAGE_HEADERS);
  return c.json({ error: "unauthorized" }, 401);
}

/**
 * Bearer authentication for the admin listener. Accepts `Authorization: Bearer <token>`, the
 * cookie, or `?token=` once: that sets an HttpOnly SameSite=Strict cookie and redirects to the
 * same URL without the token, so it does not stay in the browser history.
 */
export function adminAuth(
  token: string | undefined,
  opts: {
    skip?: (path: string) => boolean;
    /** The page a browser gets instead of the JSON 401 (`wrong`: a `?token=` that did not match). */
    page?: (wrong: boolean) => string;
  } = {},
): MiddlewareHandler {
  const expectedCookie = token ? cookieValue(token) : undefined;
  return async (c, next) => {
    if (opts.skip?.(c.req.path)) return next();
    if (!token || !expectedCookie) return c.json({ error: "admin token not configured (admin.token or admin.tokenFile)" }, 503);

    const header = c.req.header("authorization");
    if (header) {
      const m = /^Bearer\s+(.+)$/i.exec(header);
      return m && tokensEqual(m[1]!.trim(), token) ? next() : unauthorized(c);
    }
    const query = c.req.query("token");
    if (query !== undefined) {
      if (!tokensEqual(query, token)) return unauthorized(c, opts.page, true);
      const url = new URL(c.req.url);
      url.searchParams.delete("token");
      setCookie(c, ADMIN_COOKIE, expectedCookie, {
        httpOnly: true,
        sameSite: "Strict",
        path: "/",
        // Secure only when the browser reached us over HTTPS (TLS proxy); loopback is plain HTTP.
        secure: url.protocol === "https:" || c.req.header("x-forwarded-proto") === "https",
      });
      return c.redirect(url.pathname + url.search, 303);
    }
    const cookie = getCookie(c, ADMIN_COOKIE);
    if (cookie && tokensEqual(cookie, expectedCookie)) return next();
    return unauthorized(c, opts.page);
  };
}
