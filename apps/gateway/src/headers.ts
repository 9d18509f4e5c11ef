import type { Context } from "hono";
import type { AppEnv } from "./context.js";

/**
 * A request header (lower-case name). Under @hono/node-server it is read from Node's own parsed
 * headers: the first `c.req.header()` of a request makes the adapter build a web `Headers` object
 * from every raw header (a sizeable share of a status request's CPU). Node joins repeated headers with ", "
 * as `Headers.get` does, except for the singletons it de-duplicates (Content-Type,
 * Content-Length, Authorization ...: the first wins). Not for credentials: the token path keeps
 * `c.req.header`, where a repeated Authorization stays visible as malformed.
 */
export function requestHeader(c: Context<AppEnv>, name: string): string | undefined {
  const incoming = c.env?.incoming;
  if (!incoming) return c.req.header(name);
  const v = incoming.headers[name];
  return Array.isArray(v) ? v.join(", ") : v;
}
