import { randomBytes } from "node:crypto";
import { RedisOutage, TROUBLE_TEXT, redisTrouble, writeProbe } from "@ce/store";
import type { Services } from "./context.js";
import { StoreUnavailable } from "./errors.js";

/** What a client is told to wait while Redis is in trouble (s): about one probe interval. */
export const RETRY_AFTER_SECONDS = 5;

/** One outage episode per Redis connection (one per gateway process; harnesses may build several). */
const episodes = new WeakMap<object, RedisOutage>();

/**
 * The gateway's Redis outage episode (store outage.ts): one warning when Redis trouble starts,
 * one line when a write probe succeeds again — not one per failed request.
 */
export function outageOf(s: Pick<Services, "redis" | "config" | "logger">): RedisOutage {
  let o = episodes.get(s.redis);
  if (!o) {
    const log = s.logger;
    o = new RedisOutage({
      probe: writeProbe(s.redis, s.config.redis.prefix, `gateway-${process.pid}-${randomBytes(3).toString("hex")}`),
      onDown: ({ kind, err, aftershock }) =>
        log[aftershock ? "debug" : "warn"](
          { kind, err: (err as Error)?.message },
          `redis unavailable since ${new Date().toISOString()}: ${TROUBLE_TEXT[kind]}; requests that need it answer 503`,
        ),
      onUp: ({ downMs, kind, aftershock }) =>
        log[aftershock ? "debug" : "info"]({ kind, downMs }, `redis back after ${Math.round(downMs / 100) / 10} s`),
      maxDelayMs: RETRY_AFTER_SECONDS * 1000,
    });
    episodes.set(s.redis, o);
  }
  return o;
}

/** The 503 for `err` if it is Redis trouble (recorded in the episode), else undefined. */
export function storeUnavailable(
  s: Pick<Services, "redis" | "config" | "logger">,
  err: unknown,
  code?: string,
): StoreUnavailable | undefined {
  const kind = redisTrouble(err);
  if (!kind) return undefined;
  outageOf(s).report(err);
  return new StoreUnavailable(`Job store unavailable: ${TROUBLE_TEXT[kind]}`, RETRY_AFTER_SECONDS, code);
}
