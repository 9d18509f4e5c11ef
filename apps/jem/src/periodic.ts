import type { Logger } from "pino";
import type { RedisOutage } from "@ce/store";
import { warnUnlessOutage } from "./outage.js";

export interface Periodic {
  /** No more turns; resolves when the turn in progress (if any) has ended. */
  stop(): Promise<void>;
}

/**
 * A pass run every `ms` (recovery, expiry): a turn is skipped while Redis is in trouble (the next
 * turn after the episode redoes the work) and while the previous turn still runs, so a slow pass
 * never piles up; a failed turn is logged with its reason and the next one runs as usual.
 */
export function every(ms: number, what: string, pass: () => Promise<unknown>, deps: { outage: RedisOutage; log: Logger }): Periodic {
  let current: Promise<unknown> | undefined;
  const timer = setInterval(() => {
    if (deps.outage.down || current) return;
    current = pass()
      .catch((e: unknown) => warnUnlessOutage(deps.outage, deps.log, e, `${what} failed`))
      .finally(() => (current = undefined));
  }, ms);
  // A pass never keeps a process alive by itself.
  timer.unref();
  return {
    async stop() {
      clearInterval(timer);
      await current;
    },
  };
}
