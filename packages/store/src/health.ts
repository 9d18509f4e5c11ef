import type { Redis } from "ioredis";
import { FINAL_INTERNAL_STATES, INTERNAL_STATES, type InternalState } from "@ce/model";
import { Keys } from "./keys.js";
import { runScript } from "./scripts.js";

/**
 * What operators' metrics and alerts read about the CE's health from Redis, so any process (a
 * gateway, the admin listener, `ceadm`) shows it even when the JEM itself does not answer: the
 * JEMs' heartbeats and the age of the work in each state.
 */

/** A heartbeat older than this is dropped from the hash (a JEM that was replaced, not one that hangs). */
const BEAT_FORGET_MS = 3_600_000;

export interface JemBeat {
  /** The JEM instance (`<host>:<pid>`). */
  jem: string;
  /** Last beat (ms). */
  at: number;
  /** The interval the JEM beats at (ms): staleness is judged against it. */
  everyMs: number;
}

export class JemHeartbeats {
  readonly keys: Keys;

  constructor(
    private readonly redis: Redis,
    prefix: string,
  ) {
    this.keys = new Keys(prefix);
  }

  /** One beat of one JEM; forgets instances silent for an hour (restarted JEMs get new names). */
  async beat(jem: string, everyMs: number, now = Date.now()): Promise<void> {
    const key = this.keys.jemBeats();
    await this.redis.hset(key, jem, `${now}:${everyMs}`);
    const old = (await this.read()).filter((b) => now - b.at > BEAT_FORGET_MS).map((b) => b.jem);
    if (old.length) await this.redis.hdel(key, ...old);
  }

  async read(): Promise<JemBeat[]> {
    const all = await this.redis.hgetall(this.keys.jemBeats());
    return Object.entries(all).flatMap(([jem, v]) => {
      const [at, every] = v.split(":").map(Number);
      return Number.isFinite(at) && Number.isFinite(every) ? [{ jem, at: at!, everyMs: every! }] : [];
    });
  }

  /** Removes one JEM's beat (a clean shutdown: it is gone, not hanging). */
  async forget(jem: string): Promise<void> {
    await this.redis.hdel(this.keys.jemBeats(), jem);
  }
}

/** Internal states a job passes through; FINISHED and DELETED are where jobs rest. */
export const ACTIVE_INTERNAL_STATES: readonly InternalState[] = INTERNAL_STATES.filter((s) => !FINAL_INTERNAL_STATES.has(s));

export interface StateAges {
  /** Jobs read (all of the state unless `truncated`). */
  jobs: number;
  /** When the oldest job not parked (pending) entered the state (ms). */
  oldestSince?: number | undefined;
  /** The soonest credential expiry (ms) among the state's jobs. */
  soonestDelegationExpiry?: number | undefined;
  truncated: boolean;
  /** Jobs per VO: one of `vos`, `other`, or `none` (no FQAN). */
  byVo: Record<string, number>;
}

/**
 * Per active internal state, in one read-only script (lua/job-ages.lua): jobs per VO, the oldest
 * job's time in the state and the soonest delegation expiry. Its cost grows with the active jobs
 * (bounded by `maxPerState`), so callers cache it.
 */
export async function readJobAges(
  redis: Redis,
  prefix: string,
  vos: readonly string[],
  opts: { states?: readonly InternalState[]; maxPerState?: number } = {},
): Promise<Record<string, StateAges>> {
  const keys = new Keys(prefix);
  const states = opts.states ?? ACTIVE_INTERNAL_STATES;
  const rows = (await runScript(
    redis,
    "ceJobAges",
    states.map((s) => keys.internal(s)),
    [prefix, opts.maxPerState ?? 200_000, ...vos],
  )) as (string | number)[][];
  const out: Record<string, StateAges> = {};
  states.forEach((s, i) => {
    const [n, oldest, soonest, truncated, ...pairs] = rows[i] ?? [0, -1, -1, 0];
    const byVo: Record<string, number> = {};
    for (let j = 0; j + 1 < pairs.length; j += 2) byVo[String(pairs[j])] = Number(pairs[j + 1]);
    out[s] = {
      jobs: Number(n),
      oldestSince: Number(oldest) >= 0 ? Number(oldest) : undefined,
      soonestDelegationExpiry: Number(soonest) >= 0 ? Number(soonest) : undefined,
      truncated: Number(truncated) === 1,
      byVo,
    };
  });
  return out;
}

/** The VO of a job from its FQANs (`/atlas/Role=x` → `atlas`), undefined without any. */
export function voOf(fqans: readonly string[] | undefined): string | undefined {
  return /^\/([^/]+)/.exec(fqans?.[0] ?? "")?.[1];
}
