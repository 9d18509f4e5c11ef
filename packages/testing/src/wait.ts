import { setTimeout as delay } from "node:timers/promises";
import { Failure } from "@ce/model";

/** What a probe returns while the condition does not hold yet. */
type NotYet = undefined | null | false;

export interface WaitOptions {
  /** Pause between probes (default 100 ms): short enough not to slow a test, long enough not to spin. */
  everyMs?: number;
  /**
   * A probe that throws counts as "not yet" (a server still starting, a file not written yet); the
   * last error goes into the timeout message. Without it the first error fails the wait.
   */
  retryErrors?: boolean;
  /** Appended to the timeout error, e.g. the tail of a server's log. */
  detail?: () => string;
}

/** Thrown when a `waitFor` condition did not come true in time; names what was awaited. */
export class WaitTimeoutError extends Failure<"WAIT_TIMEOUT"> {
  constructor(message: string) {
    super("WAIT_TIMEOUT", message);
  }
}

/**
 * Polls `probe` until it returns a value (anything but undefined, null or false) and resolves with
 * it; fails with a `WaitTimeoutError` naming `what` once `timeoutMs` have passed. Tests wait for
 * the thing they need rather than for a fixed time, so a fast machine does not wait longer than it
 * must and a slow one does not fail on a guess.
 */
export async function waitFor<T>(
  what: string,
  probe: () => T | NotYet | Promise<T | NotYet>,
  timeoutMs: number,
  opts: WaitOptions = {},
): Promise<T> {
  const end = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await probe();
      if (v !== undefined && v !== null && v !== false) return v;
    } catch (e) {
      if (!opts.retryErrors) throw e;
      last = e;
    }
    if (Date.now() > end) {
      const why = last === undefined ? "" : `: ${last instanceof Error ? last.message : String(last)}`;
      const detail = opts.detail ? `\n${opts.detail()}` : "";
      throw new WaitTimeoutError(`timed out after ${timeoutMs} ms waiting for ${what}${why}${detail}`);
    }
    await delay(opts.everyMs ?? 100);
  }
}

/**
 * Lets `ms` pass on purpose, and says why. For the cases where time passing is the point: a negative
 * test that waits and then asserts that nothing happened, a client that trickles bytes, an expiry
 * that must elapse. Anything that waits for something to happen uses `waitFor` instead.
 */
export async function quietPeriod(ms: number, why: string): Promise<void> {
  if (!why) throw new Error("quietPeriod needs a reason");
  await delay(ms);
}
