import type { JemContext } from "./context.js";
import { advanceJob } from "./states/index.js";

export interface AdvanceLoop {
  /** Wake the loop now (a bell, a finished look). */
  kick(): void;
  stop(): Promise<void>;
  /** Jobs this JEM is looking at right now. */
  readonly running: ReadonlySet<string>;
}

/** Idle JEMs look at the due set at least this often (the bell usually wakes them sooner). */
const IDLE_POLL_MS = 1_000;
const MAX_BACKOFF_MS = 5 * 60_000;

/**
 * The JEM's main loop: claims due jobs from the advance set in batches (one Lua call for up to
 * `jem.concurrency` jobs), runs each job's state handlers (states/index.ts) with at most
 * `jem.concurrency` at once, and releases the finished ones together. Leases of running jobs are
 * extended in one call per third of the lease, so a JEM that dies loses nothing: its leases expire
 * and any JEM's next claim makes those jobs due again. A look that throws is retried with
 * exponential back-off (the job stays owned by the due set, never dropped).
 */
export function startAdvanceLoop(ctx: JemContext, opts: { leaseMs: number }): AdvanceLoop {
  const running = new Set<string>();
  const finished: string[] = [];
  const failures = new Map<string, number>();
  const capacity = ctx.config.jem.concurrency;
  let stopped = false;
  let wake: (() => void) | undefined;
  const kick = () => {
    const w = wake;
    wake = undefined;
    w?.();
  };
  const sleep = (ms: number) =>
    new Promise<void>((resolve) => {
      const t = setTimeout(() => {
        wake = undefined;
        resolve();
      }, ms);
      wake = () => {
        clearTimeout(t);
        resolve();
      };
    });

  const look = async (id: string) => {
    try {
      // Redis trouble: wait for the episode to end and redo the look (every step is idempotent).
      await ctx.outage.retry(() => advanceJob(ctx, id));
      failures.delete(id);
    } catch (e) {
      const n = (failures.get(id) ?? 0) + 1;
      failures.set(id, n);
      const delay = Math.min(MAX_BACKOFF_MS, 500 * 2 ** Math.min(n - 1, 10));
      ctx.log.warn({ err: e, jobId: id, attempt: n, retryInMs: delay }, "job step failed; will look again");
      await ctx.outage.retry(() => ctx.advance.ring([id], Date.now() + delay)).catch(() => undefined);
    } finally {
      running.delete(id);
      finished.push(id);
      kick();
    }
  };

  const extendTimer = setInterval(() => {
    if (running.size === 0) return;
    void ctx.advance.extend([...running], opts.leaseMs).catch((e: unknown) => {
      if (!ctx.outage.report(e)) ctx.log.warn({ err: e }, "lease extension failed");
    });
  }, Math.max(200, Math.floor(opts.leaseMs / 3)));

  const loop = (async () => {
    while (!stopped) {
      try {
        if (finished.length > 0) {
          const done = finished.splice(0);
          // Not released (Redis trouble): kept for the next turn, or their leases would hold the
          // jobs (and any ring they got meanwhile) until they expire.
          await ctx.advance.release(done).catch((e: unknown) => {
            finished.push(...done);
            throw e;
          });
        }
        const free = capacity - running.size;
        const ids = free > 0 ? await ctx.advance.claim(free, opts.leaseMs) : [];
        for (const id of ids) {
          running.add(id);
          void look(id);
        }
        if (ids.length > 0 && ids.length === free) {
          // Full: wait for a slot (a finished look kicks).
          await sleep(IDLE_POLL_MS);
        } else if (ids.length === 0) {
          const next = await ctx.advance.nextDueAt();
          const lease = await ctx.advance.nextLeaseEnd();
          const soonest = Math.min(next ?? Infinity, lease ?? Infinity);
          await sleep(Math.max(5, Math.min(IDLE_POLL_MS, soonest - Date.now())));
        }
      } catch (e) {
        if (ctx.outage.report(e)) await ctx.outage.waitUntilUp();
        else {
          ctx.log.warn({ err: e }, "advance loop: claim failed");
          await sleep(IDLE_POLL_MS);
        }
      }
    }
  })();

  return {
    kick,
    running,
    async stop() {
      stopped = true;
      clearInterval(extendTimer);
      kick();
      await loop;
      while (running.size > 0) await new Promise((r) => setTimeout(r, 20));
      // Unfinished looks of a stopping JEM become due again for the next one.
      await ctx.advance.release(finished.splice(0)).catch(() => undefined);
    },
  };
}
