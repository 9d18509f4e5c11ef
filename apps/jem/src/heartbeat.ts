import { hostname } from "node:os";
import { JemHeartbeats } from "@ce/store";
import type { JemContext } from "./context.js";
import { warnUnlessOutage } from "./outage.js";

/**
 * The JEM's heartbeat: its instance name and the time, written into Redis every
 * `jem.heartbeatIntervalMs` from the event loop that does the work, so a JEM that hangs or is
 * stopped stops beating while its process still exists. Any process's /metrics shows it
 * (`ce_jem_heartbeat_timestamp_seconds`); the alert rules call it stale after three missed beats.
 */
export function startHeartbeat(ctx: Pick<JemContext, "redis" | "config" | "log" | "outage">): { jem: string; stop(): Promise<void> } {
  const jem = `${hostname()}:${process.pid}`;
  const every = ctx.config.jem.heartbeatIntervalMs;
  const beats = new JemHeartbeats(ctx.redis, ctx.config.redis.prefix);
  let beating: Promise<unknown> = Promise.resolve();
  const beat = () => {
    if (ctx.outage.down) return;
    beating = beats.beat(jem, every).catch((e: unknown) => warnUnlessOutage(ctx.outage, ctx.log, e, "heartbeat not written"));
  };
  beat();
  const timer = setInterval(beat, every);
  return {
    jem,
    async stop() {
      clearInterval(timer);
      // Bounded: during a Redis outage a write waits for Redis, and a stop must not.
      await settleWithin(beating, STOP_WAIT_MS);
      // A JEM that stops cleanly is gone, not hanging: its beat goes with it.
      await settleWithin(beats.forget(jem), STOP_WAIT_MS);
    },
  };
}

const STOP_WAIT_MS = 1_000;

function settleWithin(p: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    p.then(
      () => undefined,
      () => undefined,
    ),
    new Promise<void>((r) => (timer = setTimeout(r, ms))),
  ]).finally(() => clearTimeout(timer));
}
