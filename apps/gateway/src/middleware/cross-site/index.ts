import type { MiddlewareHandler } from "hono";
import type { CompiledConfig } from "@ce/config";
import type { AppEnv } from "../../context.js";
import { Forbidden } from "../../errors.js";
import { requestHeader } from "../../headers.js";

/** Methods that change nothing: a browser may send them from anywhere (links, images, prefetch). */
const SAFE_METHODS = new Set(["GET", "HEAD", "OPTIONS"]);
/** `Sec-Fetch-Site` values of a request this CE's own pages made, or a person typed. */
const OWN_SITES = new Set(["same-origin", "none"]);

export class CrossSiteRefused extends Forbidden {
  constructor(reason: string) {
    super(reason, "CROSS_SITE_REFUSED");
  }
}

/**
 * The origins a state-changing request may come from: endpoint.url's, which every gateway behind
 * the CE's one name shares, and `gateway.extraOrigins`. Normalised as a browser writes `Origin`
 * (lower-case host, no default port).
 */
export function ownOrigins(config: Pick<CompiledConfig, "origin" | "gateway">): ReadonlySet<string> {
  return new Set([config.origin, ...config.gateway.extraOrigins].map((o) => new URL(o).origin));
}

/**
 * One cross-site rule for every route that may change something (README.md here). A browser
 * presents the user's client certificate on any request to this CE, a form another site
 * auto-submits included, so such a request is told apart only by the headers the browser adds
 * and a page cannot forge: `Sec-Fetch-Site` and `Origin`. Either one naming another site refuses
 * the request; programs send neither and pass.
 */
export function crossSite(config: Pick<CompiledConfig, "origin" | "gateway">): MiddlewareHandler<AppEnv> {
  const own = ownOrigins(config);
  const ownList = [...own].join(", ");
  return async (c, next) => {
    if (SAFE_METHODS.has(c.req.method.toUpperCase())) return next();
    const refusal = crossSiteReason(requestHeader(c, "sec-fetch-site"), requestHeader(c, "origin"), own, ownList);
    if (refusal) {
      c.get("log").warn({ method: c.req.method, path: c.req.path, reason: refusal }, "cross-site request refused");
      throw new CrossSiteRefused(refusal);
    }
    return next();
  };
}

/** The reason a request with these headers is refused, or undefined when it may pass. */
export function crossSiteReason(
  site: string | undefined,
  origin: string | undefined,
  own: ReadonlySet<string>,
  ownList = [...own].join(", "),
): string | undefined {
  // A repeated header arrives joined with ", " and so matches no single value: refused too.
  if (site !== undefined && !OWN_SITES.has(site)) {
    return `Cross-site request refused: Sec-Fetch-Site: ${shown(site)} (only same-origin or none may change anything); use this CE's own pages or a program`;
  }
  // `Origin: null` is an opaque origin (a sandboxed frame, a data: URL, a redirect from another
  // site): nobody can say where it comes from, so it is never our own.
  if (origin !== undefined && !own.has(origin)) {
    return `Cross-site request refused: Origin: ${shown(origin)} is not this CE's origin (${ownList})`;
  }
  return undefined;
}

/** A header value quoted back in a reason: printable ASCII, at most 100 characters. */
function shown(v: string): string {
  const clean = v.replace(/[^\x20-\x7e]/g, "?");
  return clean.length > 100 ? `${clean.slice(0, 100)}…` : clean;
}
