import { ACTIVE_REST_STATES, type RestState } from "@ce/model";
import type { JobRecord } from "@ce/store";
import type { JemContext } from "./context.js";

/**
 * Check-then-move against a limit. This JEM's own moves that a count may not show yet (a move
 * running when the count was asked for, or started since) are added to it: below the limit with
 * them no serialization is needed, nor at or over it (nothing to take); in between the check and
 * the move run under a short Redis lease so concurrent workers cannot all take the last slot.
 * Counting our own moves in flight is what makes the lease rare: asking for headroom for every
 * worker instead would, with maxStaging 100 and 50 workers, queue every completion of a burst
 * for the lease and delay a burst's FINISHING noticeably. Several JEMs may overshoot the
 * limit by the other JEMs' moves in flight at most. If the lease cannot be had within ~2 s the
 * move goes ahead unserialized (a job never stalls on the lease itself).
 */
export async function underLimit<T>(
  ctx: JemContext,
  name: string,
  limit: number,
  count: () => Promise<number>,
  fn: (free: boolean) => Promise<T>,
): Promise<T> {
  const m = movesOf(ctx, name);
  const { n: seen, mark } = await sharedCount(ctx, name, m, count);
  if (seen + unseen(m, mark) < limit) return move(m, fn);
  if (seen >= limit) return fn(false);
  let lease;
  for (let i = 0; i < 400 && !lease; i++) {
    lease = await ctx.locks.tryAcquire(`limit:${name}`, 5_000);
    if (!lease) await new Promise((r) => setTimeout(r, 5));
  }
  try {
    const fresh = markOf(m);
    const n = await count();
    return n + unseen(m, fresh) < limit ? await move(m, fn) : await fn(false);
  } finally {
    await lease?.release();
  }
}

/** This JEM's moves under one limit: started ever, and running now. */
interface Moves {
  started: number;
  running: number;
}
/** Where the moves stood when a count was asked for. */
interface Mark {
  started: number;
  running: number;
}
const moves = new WeakMap<JemContext, Map<string, Moves>>();
function movesOf(ctx: JemContext, name: string): Moves {
  let byName = moves.get(ctx);
  if (!byName) moves.set(ctx, (byName = new Map()));
  let m = byName.get(name);
  if (!m) byName.set(name, (m = { started: 0, running: 0 }));
  return m;
}
const markOf = (m: Moves): Mark => ({ started: m.started, running: m.running });
/** Moves a count asked for at `mark` may miss: those running then, and those started since. */
const unseen = (m: Moves, mark: Mark) => mark.running + (m.started - mark.started);
async function move<T>(m: Moves, fn: (free: boolean) => Promise<T>): Promise<T> {
  m.started++;
  m.running++;
  try {
    return await fn(true);
  } finally {
    m.running--;
  }
}

/** Counts in flight per JEM context and limit name: looks checking the same limit at once share one. */
const inFlight = new WeakMap<JemContext, Map<string, Promise<{ n: number; mark: Mark }>>>();

/**
 * The first count of `underLimit`, shared by the looks that check the same limit while it is in
 * flight (a claimed batch of one owner's new jobs: one count instead of one per job), with the
 * moves' mark of when it was asked for. The count under the lease near the limit is never shared.
 */
async function sharedCount(ctx: JemContext, name: string, m: Moves, count: () => Promise<number>): Promise<{ n: number; mark: Mark }> {
  let byName = inFlight.get(ctx);
  if (!byName) inFlight.set(ctx, (byName = new Map()));
  const pending = byName.get(name);
  if (pending) return pending;
  const mark = markOf(m);
  const p = count().then((n) => ({ n, mark }));
  byName.set(name, p);
  try {
    return await p;
  } finally {
    byName.delete(name);
  }
}

export async function activeOfOwner(ctx: JemContext, owner: string): Promise<number> {
  return ctx.jobs.countOwnerRest(owner, ACTIVE_REST_STATES);
}

/** Jobs in SUBMIT + INLRMS (A-REX maxjobs n2). */
export async function inLrms(ctx: JemContext): Promise<number> {
  const c = await ctx.jobs.countByInternal(["SUBMIT", "INLRMS"]);
  return (c.SUBMIT ?? 0) + (c.INLRMS ?? 0);
}

export async function inStageOut(ctx: JemContext): Promise<number> {
  return (await ctx.jobs.countByInternal(["FINISHING"])).FINISHING ?? 0;
}

/** Wakes gathered per JEM context and parked set for the next turn of the event loop. */
const wakeRounds = new WeakMap<JemContext, Map<string, { n: number; done: Promise<void> }>>();

/**
 * Asks a few parked jobs to look again (one ring); `wakeParked` is the safety net. The wakes of
 * one parked set asked for in one turn of the event loop share one sample of `n` summed: a burst
 * of 100 jobs leaving the batch system together costs a few SRANDMEMBERs, not 100, almost all
 * of which find nothing parked.
 */
function wake(ctx: JemContext, rest: RestState, n: number, owner?: string): Promise<void> {
  let rounds = wakeRounds.get(ctx);
  if (!rounds) wakeRounds.set(ctx, (rounds = new Map()));
  const key = owner === undefined ? rest : `${rest}\n${owner}`;
  const open = rounds.get(key);
  if (open) {
    open.n += n;
    return open.done;
  }
  const round = { n, done: Promise.resolve() };
  const all = rounds;
  round.done = new Promise<void>((resolve) => setImmediate(resolve)).then(async () => {
    all.delete(key);
    await ctx.advance.ring(await ctx.jobs.sampleRest(rest, round.n, owner));
  });
  rounds.set(key, round);
  return round.done;
}

/** Parked jobs woken per periodic pass and limit: bounded, whatever the number of jobs. */
const WAKE_PER_PASS = 50;

/**
 * The periodic safety net behind the event-driven wakes of `afterTransition`: when a limit has
 * room, a bounded sample of the jobs parked on it looks again (a wake lost with a dead JEM must
 * not park them forever). Per-owner parks (PENDING:ACCEPTED) are sampled across owners; a job
 * whose owner is still at its limit just parks again. Cost: a few counters and ≤ 150 looks.
 */
export async function wakeParked(ctx: JemContext): Promise<void> {
  const { maxInLrms, maxStaging } = ctx.config.jobs;
  const counts = await ctx.jobs.countByRest(["PREPARED", "EXECUTED", "ACCEPTED"]);
  const free = (limit: number, used: number) => (limit > 0 ? Math.max(0, limit - used) : WAKE_PER_PASS);
  if (counts.PREPARED) await wake(ctx, "PREPARED", Math.min(WAKE_PER_PASS, free(maxInLrms, await inLrms(ctx))));
  if (counts.EXECUTED) await wake(ctx, "EXECUTED", Math.min(WAKE_PER_PASS, free(maxStaging, await inStageOut(ctx))));
  if (counts.ACCEPTED) await wake(ctx, "ACCEPTED", WAKE_PER_PASS);
}

const LRMS = new Set(["SUBMIT", "INLRMS"]);

export async function afterTransition(ctx: JemContext, before: JobRecord, after: JobRecord): Promise<void> {
  if (before.state === after.state) return;
  if (LRMS.has(before.state) && !LRMS.has(after.state)) await wake(ctx, "PREPARED", 4);
  if (before.state === "FINISHING") await wake(ctx, "EXECUTED", 4);
  if (after.state === "FINISHED") await wake(ctx, "ACCEPTED", 4, after.owner);
}
