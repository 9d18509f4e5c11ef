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
      await beating;
      // A JEM that stops cleanly is gone, not hanging: its beat goes with it.
      await beats.forget(jem).catch(() => undefined);
    },
  };
}
