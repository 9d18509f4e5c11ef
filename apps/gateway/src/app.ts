import { Hono } from "hono";
import type { AppEnv, Services } from "./context.js";
import { CeError, NotFound } from "./errors.js";
import { rateLimit, requestContext } from "./middleware/request-context/index.js";
import { identity } from "./middleware/identity/index.js";
import { durability } from "./middleware/durability/index.js";
import { crossSite } from "./middleware/cross-site/index.js";
import { storeUnavailable } from "./outage.js";
import { isPageRequest, renderError } from "./render.js";
import { httpMetrics } from "@ce/ops";
import { versionRoutes } from "./routes/versions.js";
import { infoRoutes } from "./routes/info.js";
import { jobRoutes } from "./routes/jobs.js";
import { sessionRoutes } from "./routes/session.js";
import { diagnoseRoutes } from "./routes/diagnose.js";
import { delegationRoutes } from "./routes/delegations.js";
import { nodeRoutes } from "./routes/node.js";
import { applyRuntimeInternals } from "./runtime-internals.js";
import { resolveDotSegments } from "./services/session/index.js";
import { landingPage } from "./pages/landing.js";

export const SUPPORTED_VERSIONS = ["1.0", "1.1"] as const;

/**
 * Where a request goes: <mount>/rest → versions (E1); <mount>/rest/<ver>/info (E2);
 * /jobs (E3–E5); /jobs/<id>/session (E6); /jobs/<id>/diagnose (E7); /delegations (E8–E9).
 */
/**
 * The path Hono routes on: runs of slashes are one slash and a trailing slash is ignored, as
 * A-REX does (docs/interface.md, General rules 1). (Hono ignores a custom getPath under `strict: false`.)
 */
export function routingPath(req: Request): string {
  const url = req.url;
  const start = url.indexOf("/", url.indexOf("://") + 3);
  // The query and a fragment (a raw client may send `#`; the URL keeps it) are not routed on.
  const rest = url.slice(start);
  const q = rest.search(/[?#]/);
  // Dot segments are resolved here too: Node's URL parser (Ada) leaves them in after a segment that
  // starts with "." (`/a/.x/b/../c` stays as is), so routing must not rely on it.
  const raw = rest.slice(0, q === -1 ? undefined : q).replace(/\/{2,}/g, "/");
  // Only a segment that starts with "." or "%2e" can be a dot segment: most paths skip the walk.
  const path = /\/(?:\.|%2e)/i.test(raw) ? resolveDotSegments(raw) : raw;
  return path.length > 1 ? path.replace(/\/$/, "") : path;
}

export function createApp(services: Services): Hono<AppEnv> {
  applyRuntimeInternals(services.config.gateway.internals);
  const app = new Hono<AppEnv>({ getPath: routingPath });
  const rest = `${services.config.mountPath}/rest`;

  if (services.metrics) app.use("*", httpMetrics(services.metrics));
  app.use("*", requestContext(services));
  // Before authentication: another site's request is refused whoever's certificate it carries.
  app.use("*", crossSite(services.config));
  app.use(rest, identity());
  app.use(`${rest}/*`, identity());
  // After authentication: the limits are per identity (per address for public requests). One
  // handler for both paths: it holds the per-identity in-flight counts.
  const limits = rateLimit();
  app.use(rest, limits);
  app.use(`${rest}/*`, limits);
  // Innermost: a 201/202 waits for `redis.waitReplicas` replicas to hold the request's writes.
  app.use(`${rest}/*`, durability(services));

  const r = new Hono<AppEnv>({ strict: false });
  versionRoutes(r);
  r.use("/:version/*", async (c, next) => {
    const v = c.req.param("version");
    if (v !== "1.0" && v !== "1.1") throw new NotFound("Version Not Supported", "VERSION_NOT_SUPPORTED");
    c.set("version", v);
    await next();
  });
  r.all("/:version", (c) => {
    // People get the landing page (pages/landing.tsx); programs the 404 they always got.
    if (isPageRequest(c)) return landingPage(c);
    throw new NotFound("Not Found: no functionality given");
  });
  infoRoutes(r);
  jobRoutes(r);
  sessionRoutes(r);
  diagnoseRoutes(r);
  delegationRoutes(r);
  r.all("/:version/*", () => {
    throw new NotFound("Functionality Not Supported", "FUNCTIONALITY_NOT_SUPPORTED");
  });
  app.route(rest, r);
  // Batch jobs on nodes that share no file system with the CE, with their job's capability (routes/node.ts).
  app.route(`${services.config.mountPath}/node/1`, nodeRoutes());
  // The endpoint URL itself (what /info publishes): a browser is sent on to the landing page.
  app.get(services.config.mountPath || "/", (c, next) =>
    isPageRequest(c) ? c.redirect(`${rest}/${SUPPORTED_VERSIONS.at(-1)}`, 302) : next(),
  );

  app.notFound((c) => renderError(c, new NotFound(`No resource at ${new URL(c.req.url).pathname}`)));
  app.onError((err, c) => {
    // A response already made (a 201 that the durability check then refused) would lend its headers
    // to the error response (Hono's c.res setter copies them): its Content-Length too, and the
    // client would wait for bytes never sent — the unanswered request of a Sentinel failover.
    if (c.finalized) c.res = undefined;
    if (err instanceof CeError) return renderError(c, err);
    // Redis down, restarting, out of memory or refusing writes: 503 + Retry-After, logged once per episode.
    const unavailable = storeUnavailable(services, err);
    if (unavailable) return renderError(c, unavailable);
    c.get("log")?.error({ err }, "unhandled error");
    return renderError(c, new CeError(500, "INTERNAL", "Internal server error"));
  });
  return app;
}
