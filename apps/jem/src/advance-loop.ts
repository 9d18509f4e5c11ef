import type { JemContext } from "./context.js";
import { Doorbell } from "./doorbell.js";
import { LookSlots } from "./look-slots.js";
import { advanceJob } from "./states/index.js";

export interface AdvanceLoop {
  /** Wake the loop now (a bell, a finished look). */
  kick(): void;
  stop(): Promise<void>;
  /** Jobs this JEM is looking at right now. */
  readonly running: ReadonlySet<string>;
  /**
   * Runs `work` (a wait on the batch system: a bulk submit, its rate limit) for job `jobId` without
   * holding a slot, then takes one again (before any new claim). Called outside a look of this loop
   * at that job, it just runs `work`.
   */
  outsideSlot<T>(jobId: string, work: () => Promise<T>): Promise<T>;
}

/** Idle JEMs look at the due set at least this often (the bell usually wakes them sooner). */
const IDLE_POLL_MS = 1_000;
const MAX_BACKOFF_MS = 5 * 60_000;
/** Looks in flight, slot holders plus those waiting outside a slot, at most this many times the slots. */
const MAX_IN_FLIGHT_FACTOR = 10;

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
  // The looks in progress, for stop() to wait on.
  const inProgress = new Set<Promise<void>>();
  const finished: string[] = [];
  const failures = new Map<string, number>();
  const capacity = ctx.config.jem.concurrency;
  const bell = new Doorbell();
  const kick = () => bell.ring();
  const slots = new LookSlots(capacity, kick);
  // Whether each running look holds its slot, by job id (one look per job at a time). Not an
  // AsyncLocalStorage: that enables async hooks, a cost on every promise.
  const holding = new Map<string, { holds: boolean }>();
  let stopped = false;

  const look = async (id: string) => {
    const slot = { holds: true };
    try {
      // Redis trouble: wait for the episode to end and redo the look (every step is idempotent).
      holding.set(id, slot);
      await ctx.outage.retry(() => advanceJob(ctx, id));
      failures.delete(id);
    } catch (e) {
      const n = (failures.get(id) ?? 0) + 1;
      failures.set(id, n);
      const delay = Math.min(MAX_BACKOFF_MS, 500 * 2 ** Math.min(n - 1, 10));
      ctx.log.warn({ err: e, jobId: id, attempt: n, retryInMs: delay }, "job step failed; will look again");
      await ctx.outage.retry(() => ctx.advance.ring([id], Date.now() + delay)).catch(() => undefined);
    } finally {
      holding.delete(id);
      running.delete(id);
      finished.push(id);
      if (slot.holds) slots.give();
      kick();
    }
  };

  const outsideSlot = async <T>(jobId: string, work: () => Promise<T>): Promise<T> => {
    const slot = holding.get(jobId);
    if (!slot?.holds) return work();
    slot.holds = false;
    slots.give();
    try {
      return await work();
    } finally {
      await slots.take();
      slot.holds = true;
    }
  };

  const extendTimer = setInterval(
    () => {
      if (running.size === 0) return;
      void ctx.advance.extend([...running], opts.leaseMs).catch((e: unknown) => {
        if (!ctx.outage.report(e)) ctx.log.warn({ err: e }, "lease extension failed");
      });
    },
    Math.max(200, Math.floor(opts.leaseMs / 3)),
  );

  const loop = (async () => {
    while (!stopped) {
      try {
        const done = finished.splice(0);
        const free = Math.min(slots.free, capacity * MAX_IN_FLIGHT_FACTOR - running.size);
        if (free <= 0 && done.length === 0) {
          // Full: wait for a slot (a finished look kicks).
          await bell.sleep(IDLE_POLL_MS);
          continue;
        }
        // The slots are taken before the claim (a look coming back meanwhile must not find them free).
        const want = Math.max(0, free);
        slots.reserve(want);
        let t: Awaited<ReturnType<typeof ctx.advance.turn>> | undefined;
        try {
          // Release the ended looks, claim, learn the next due time: one round trip per turn.
          t = await ctx.advance.turn(done, want, opts.leaseMs);
        } catch (e) {
          // Not released (Redis trouble): kept for the next turn, or their leases would hold the
          // jobs (and any ring they got meanwhile) until they expire.
          finished.push(...done);
          throw e;
        } finally {
          // Unused reserved slots go to looks coming back, else back to the pool (no kick: this is the loop).
          for (let i = t?.ids.length ?? 0; i < want; i++) slots.give(true);
        }
        for (const id of t.ids) {
          running.add(id);
          const p = look(id);
          inProgress.add(p);
          void p.finally(() => inProgress.delete(p));
        }
        if (t.ids.length > 0 && t.ids.length === want) {
          // Full: wait for a slot (a finished look kicks).
          await bell.sleep(IDLE_POLL_MS);
        } else if (t.ids.length === 0) {
          const soonest = Math.min(t.nextDueAt ?? Infinity, t.nextLeaseEnd ?? Infinity);
          await bell.sleep(Math.max(5, Math.min(IDLE_POLL_MS, soonest - Date.now())));
        }
      } catch (e) {
        if (ctx.outage.report(e)) await ctx.outage.waitUntilUp();
        else {
          ctx.log.warn({ err: e }, "advance loop: claim failed");
          await bell.sleep(IDLE_POLL_MS);
        }
      }
    }
  })();

  return {
    kick,
    running,
    outsideSlot,
    async stop() {
      stopped = true;
      clearInterval(extendTimer);
      kick();
      await loop;
      await Promise.all(inProgress);
      // Unfinished looks of a stopping JEM become due again for the next one.
      await ctx.advance.release(finished.splice(0)).catch(() => undefined);
    },
  };
}
