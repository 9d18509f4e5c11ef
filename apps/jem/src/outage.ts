import { randomBytes } from "node:crypto";
import type { Redis } from "ioredis";
import type { Logger } from "pino";
import { RedisOutage, TROUBLE_TEXT, writeProbe } from "@ce/store";

/**
 * The JEM's Redis outage episode (store outage.ts): "redis unavailable since …" once when trouble
 * starts, "redis back after N s" once when a write probe succeeds again. Every loop reports its
 * failures here and waits for the episode to end instead of logging and retrying per job.
 */
export function createOutage(redis: Redis, prefix: string, log: Logger, hooks: { afterEpisode?: () => void } = {}): RedisOutage {
  const outage = new RedisOutage({
    probe: writeProbe(redis, prefix, `jem-${process.pid}-${randomBytes(3).toString("hex")}`),
    onDown: ({ kind, err, aftershock }) =>
      log[aftershock ? "debug" : "warn"](
        { kind, err: errText(err) },
        `redis unavailable since ${new Date().toISOString()}: ${TROUBLE_TEXT[kind]}; every loop backs off until it accepts writes again`,
      ),
    onUp: ({ downMs, kind, aftershock }) => {
      log[aftershock ? "debug" : "info"]({ kind, downMs }, `redis back after ${Math.round(downMs / 100) / 10} s`);
      hooks.afterEpisode?.();
    },
  });
  // A reconnect that opened no episode — a graceful failover (+switch-master, a demoted primary's
  // READONLY answered by reconnecting), a connection keepConnected brought back — may have lost the
  // last asynchronously replicated writes just the same: it gets the episode's ring too. During an
  // episode its end rings instead.
  let connectedBefore = redis.status === "ready";
  redis.on("ready", () => {
    if (connectedBefore && !outage.down) {
      log.info("redis connection re-established: every active job is looked at again");
      hooks.afterEpisode?.();
    }
    connectedBefore = true;
  });
  return outage;
}

/** Logs `msg` for `err` unless it is Redis trouble, which the outage episode logs once instead. */
export function warnUnlessOutage(outage: RedisOutage, log: Logger, err: unknown, msg: string, fields: Record<string, unknown> = {}): void {
  if (outage.report(err)) log.debug({ ...fields, err: errText(err) }, msg);
  else log.warn({ ...fields, err }, msg);
}

function errText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
