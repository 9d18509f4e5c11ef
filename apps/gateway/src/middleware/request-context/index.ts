import { randomUUID } from "node:crypto";
import type { MiddlewareHandler } from "hono";
import type { Redis } from "ioredis";
import { negotiateFormat } from "@ce/glue2";
import { ownerKey } from "@ce/store";
import type { AppEnv, Services } from "../../context.js";
import { TooManyRequests } from "../../errors.js";

/**
 * First middleware of every request: request id, child logger, services, negotiated format.
 * `rateLimit()` runs after authentication (it needs the identity) — see README.md.
 */
export function requestContext(services: Services): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    // An incoming id is only propagated into logs (never trusted for anything else).
    const incoming = c.req.header("x-request-id");
    const requestId = incoming && REQUEST_ID_RE.test(incoming) ? incoming : randomUUID();
    const started = performance.now();
    const log = services.logger.child({ reqId: requestId });
    c.set("services", services);
    c.set("requestId", requestId);
    c.set("log", log);
    c.set("format", negotiateFormat(c.req.header("accept")));
    // Before next(): reaches error responses built by onError; after: responses built by hand.
    c.header("X-Request-Id", requestId);
    await next();
    if (!c.res.headers.has("X-Request-Id")) c.header("X-Request-Id", requestId);
    // Access log: no query string values beyond the path's own, no headers (credentials live there).
    if (log.isLevelEnabled("info")) {
      const subject = c.get("identity")?.subject;
      log.info({ method: c.req.method, path: c.req.path, status: c.res.status, ms: Math.round(performance.now() - started), subject }, "request");
    }
  };
}

export const REQUEST_ID_RE = /^[A-Za-z0-9._:-]{1,128}$/;

/**
 * Token bucket per identity (unauthenticated requests: per peer address), kept in Redis so every
 * gateway shares it. The bucket refills at `rate` tokens/s up to `burst`; Redis TIME is the clock.
 * Returns {allowed (1/0), milliseconds until one token is available}.
 */
const BUCKET_LUA = `
local key, rate, burst = KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local h = redis.call('HMGET', key, 'tokens', 'ts')
local tokens = tonumber(h[1]) or burst
local ts = tonumber(h[2]) or now
tokens = math.min(burst, tokens + math.max(0, now - ts) * rate / 1000)
local allowed, wait = 0, 0
if tokens >= 1 then allowed = 1; tokens = tokens - 1 else wait = math.ceil((1 - tokens) * 1000 / rate) end
redis.call('HSET', key, 'tokens', tostring(tokens), 'ts', tostring(now))
redis.call('PEXPIRE', key, math.ceil(burst * 1000 / rate) + 1000)
return {allowed, wait}
`;

interface BucketRedis extends Redis {
  ceTokenBucket(key: string, rate: number, burst: number): Promise<[number, number]>;
}

export function defineRateLimiter(redis: Redis): void {
  if (!(redis as unknown as Partial<BucketRedis>).ceTokenBucket) redis.defineCommand("ceTokenBucket", { numberOfKeys: 1, lua: BUCKET_LUA });
}

export function rateLimit(): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const { config, redis, jobs } = c.get("services");
    const { requestsPerSecond: rate, requestBurst: burst } = config.gateway.limits;
    if (rate > 0) {
      const id = c.get("identity");
      const who = id ? `i:${ownerKey(id.subject)}` : `a:${c.env?.incoming?.socket.remoteAddress ?? "local"}`;
      defineRateLimiter(redis);
      let res: [number, number] | undefined;
      try {
        res = await (redis as unknown as BucketRedis).ceTokenBucket(`${jobs.keys.prefix}:rl:${who}`, rate, burst);
      } catch (err) {
        // Fail open: the limiter protects the service, it must not become its single point of failure.
        c.get("log").warn({ err }, "rate limiter unavailable");
      }
      if (res && Number(res[0]) !== 1) throw new TooManyRequests(Math.max(1, Math.ceil(Number(res[1]) / 1000)));
    }
    await next();
  };
}
