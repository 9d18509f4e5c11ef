import { randomUUID } from "node:crypto";
import type { MiddlewareHandler } from "hono";
import type { Redis } from "ioredis";
import type { Logger } from "pino";
import { negotiateFormat } from "@ce/glue2";
import { RateLimiter } from "@ce/store";
import type { AppEnv, Services } from "../../context.js";
import { TooManyRequests } from "../../errors.js";
import { outageOf } from "../../outage.js";
import { requestHeader } from "../../headers.js";
import { accessLogWriter, lazyChild, type AccessFields } from "./access-log.js";

/**
 * First middleware of every request: request id, child logger, services, negotiated format.
 * `rateLimit()` runs after authentication (it needs the identity) — see this folder's README.md.
 */
export function requestContext(services: Services): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    // An incoming id is only propagated into logs (never trusted for anything else).
    const incoming = requestHeader(c, "x-request-id");
    const requestId = incoming && REQUEST_ID_RE.test(incoming) ? incoming : randomUUID();
    const started = performance.now();
    const log = lazyChild(services.logger, { reqId: requestId });
    c.set("services", services);
    c.set("requestId", requestId);
    c.set("log", log);
    c.set("format", negotiateFormat(requestHeader(c, "accept")));
    // Before next(): reaches error responses built by onError; after: responses built by hand.
    // `nosniff`: a browser renders a session file, a diagnose file or an error body only as the
    // type it is sent with (a job's file served as text/plain or octet-stream never becomes HTML
    // or a script); session downloads written straight to the socket carry it too (download.ts).
    c.header("X-Request-Id", requestId);
    c.header("X-Content-Type-Options", "nosniff");
    await next();
    if (!c.res.headers.has("X-Request-Id")) c.header("X-Request-Id", requestId);
    if (!c.res.headers.has("X-Content-Type-Options")) c.header("X-Content-Type-Options", "nosniff");
    // Access log: no query string values beyond the path's own, no headers (credentials live there).
    if (services.logger.isLevelEnabled("info")) {
      const subject = c.get("identity")?.subject;
      accessLogOf(services.logger)({
        reqId: requestId,
        method: c.req.method,
        path: c.req.path,
        status: c.res.status,
        ms: Math.round(performance.now() - started),
        subject,
      });
    }
  };
}

export const REQUEST_ID_RE = /^[A-Za-z0-9._:-]{1,128}$/;

const accessLogs = new WeakMap<Logger, (f: AccessFields) => void>();

/**
 * The access log line has a fixed shape with no field a redaction path names, so it is written
 * without redaction, by hand, to the service logger's destination (access-log.ts): pino's
 * redaction was most of a line's cost, and its generic serializer most of the rest.
 */
function accessLogOf(logger: Logger): (f: AccessFields) => void {
  let a = accessLogs.get(logger);
  if (!a) accessLogs.set(logger, (a = accessLogWriter(logger)));
  return a;
}

/**
 * Per-identity limits (unauthenticated requests: per peer address), see README.md here, "Rate limit and in-flight cap":
 * - a token bucket shared by every gateway (@ce/store RateLimiter, lua/token-bucket.lua), leased
 *   in blocks so that it costs one Redis call per block of requests, not one per request;
 * - a cap on the requests one identity has in progress at once on this gateway, which is what
 *   keeps one busy client from starving the others.
 * Create it once per app and register the same handler on every path (the in-flight counts live here).
 */
export function rateLimit(): MiddlewareHandler<AppEnv> {
  const inFlight = new Map<string, number>();
  // One limiter (its leases) per Redis connection of this app.
  const limiters = new WeakMap<Redis, RateLimiter>();
  return async (c, next) => {
    const { config, redis, jobs } = c.get("services");
    const { requestsPerSecond: rate, requestBurst: burst, requestsInFlight: maxInFlight } = config.gateway.limits;
    const id = c.get("identity");
    const client = id ? { subject: id.subject } : { address: c.env?.incoming?.socket.remoteAddress ?? "local" };
    const who = id ? `i:${id.subject}` : `a:${(client as { address: string }).address}`;
    const running = inFlight.get(who) ?? 0;
    if (maxInFlight > 0 && running >= maxInFlight) {
      throw new TooManyRequests(
        1,
        `Too many concurrent requests: ${running} of this client in progress (gateway.limits.requestsInFlight ${maxInFlight})`,
        "TOO_MANY_IN_FLIGHT",
      );
    }
    // During a Redis outage the bucket is skipped (it fails open anyway): a hung Redis must not
    // cost each request a command timeout here before its own call meets the same timeout.
    if (rate > 0 && !outageOf(c.get("services")).down) {
      let limiter = limiters.get(redis);
      if (!limiter) limiters.set(redis, (limiter = new RateLimiter(redis, jobs.keys.prefix)));
      let waitMs: number | undefined;
      try {
        waitMs = await limiter.take(client, rate, burst);
      } catch (err) {
        // Fail open: the limiter protects the service, it must not become its single point of failure.
        // Redis trouble is logged once per episode (outage.ts), not per request.
        if (!outageOf(c.get("services")).report(err)) c.get("log").warn({ err }, "rate limiter unavailable");
      }
      if (waitMs !== undefined) throw new TooManyRequests(Math.max(1, Math.ceil(waitMs / 1000)));
    }
    // Counted from here: the request passed both checks and now holds a slot until its handler is done.
    inFlight.set(who, (inFlight.get(who) ?? 0) + 1);
    try {
      await next();
    } finally {
      const left = (inFlight.get(who) ?? 1) - 1;
      if (left <= 0) inFlight.delete(who);
      else inFlight.set(who, left);
    }
  };
}
