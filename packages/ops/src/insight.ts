import type { Redis } from "ioredis";
import { INTERNAL_STATES, NO_VO, REST_STATES, type InternalState } from "@ce/model";
import { ACTIVE_INTERNAL_STATES, JobStore, Keys, voOf } from "@ce/store";
import { jobRow, OpsError, type JobRow } from "./ops.js";

/**
 * Operators' views across many jobs (`ceadm summary`, `ceadm jobs stuck`): read from the store's
 * indexes and records, in chunks, so they work with every CE process down.
 */

/**
 * Default "stuck" ages per internal state (seconds), the same as deploy/monitoring/alerts.yaml's
 * CEJobsStuck: a batch submission takes seconds; transfers and uploads may take hours; a cancel
 * is given up after an hour. INLRMS has none: batch jobs run for days.
 */
export const STUCK_AFTER_SECONDS: Partial<Record<InternalState, number>> = {
  SUBMIT: 1800,
  CANCELING: 7200,
  ACCEPTED: 21_600,
  PREPARING: 21_600,
  FINISHING: 21_600,
};

const CHUNK = 2_000;
const ROW_FIELDS = ["pending", "queue", "created", "updated", "stateSince", "jobName", "localUser", "fqans"] as const;

/** `90`, `90s`, `30m`, `6h`, `2d` → seconds. */
export function parseDuration(raw: string): number {
  const m = /^(\d+(?:\.\d+)?)\s*([smhd]?)$/.exec(raw.trim());
  if (!m) throw new OpsError("BAD_REQUEST", `bad duration ${JSON.stringify(raw)}: a number with s, m, h or d (30m, 6h)`);
  return Number(m[1]) * { "": 1, s: 1, m: 60, h: 3600, d: 86_400 }[m[2] as "" | "s" | "m" | "h" | "d"];
}

export interface StuckJob extends JobRow {
  /** Seconds in the current state. */
  age: number;
  /** The age it was held against (seconds). */
  limit: number;
}

/**
 * Jobs older in their internal state than a limit: per state the default (STUCK_AFTER_SECONDS)
 * or `olderThan` for every state asked for. Oldest first.
 */
export async function stuckJobs(
  redis: Redis,
  prefix: string,
  opts: { states?: readonly InternalState[] | undefined; olderThan?: number | undefined; now?: number } = {},
): Promise<StuckJob[]> {
  const store = new JobStore(redis, prefix);
  const now = opts.now ?? Date.now();
  const states = opts.states ?? (Object.keys(STUCK_AFTER_SECONDS) as InternalState[]);
  const out: StuckJob[] = [];
  for (const state of states) {
    const limit = opts.olderThan ?? STUCK_AFTER_SECONDS[state];
    if (limit === undefined) throw new OpsError("BAD_REQUEST", `${state} has no default age: give --older-than`);
    const ids = await store.idsInState(state);
    for (let i = 0; i < ids.length; i += CHUNK) {
      const recs = await store.getManyFields(ids.slice(i, i + CHUNK), ROW_FIELDS);
      for (const r of recs) {
        if (!r || r.state !== state) continue;
        const age = (now - r.stateSince) / 1000;
        if (age >= limit) out.push({ ...jobRow(r), age: Math.floor(age), limit });
      }
    }
  }
  return out.sort((a, b) => b.age - a.age);
}

/** Parses `--state` for internal states (`SUBMIT,preparing`). */
export function parseInternalStates(raw: string | undefined): InternalState[] | undefined {
  if (!raw) return undefined;
  const states = raw
    .split(",")
    .map((s) => s.trim().toUpperCase())
    .filter(Boolean);
  const bad = states.filter((s) => !(INTERNAL_STATES as readonly string[]).includes(s));
  if (bad.length) throw new OpsError("BAD_REQUEST", `unknown internal state ${bad.join(",")}; one of ${INTERNAL_STATES.join(" ")}`);
  return states as InternalState[];
}

export type SummaryBy = "vo" | "owner" | "state";

export interface Summary {
  total: number;
  /** group (VO, owner, or internal state) → REST state → jobs; groups by total, largest first. */
  groups: { key: string; total: number; states: Record<string, number> }[];
}

/**
 * Every job counted by VO (NO_VO, "(no VO)", without one), owner, or internal state (`PENDING:` parked
 * separately), and by REST state. Reads every record once (in chunks): a CLI's cost, not a scrape's.
 */
export async function summary(redis: Redis, prefix: string, by: SummaryBy, opts: { activeOnly?: boolean } = {}): Promise<Summary> {
  const store = new JobStore(redis, prefix);
  const keys = new Keys(prefix);
  const ids = opts.activeOnly
    ? (await Promise.all(ACTIVE_INTERNAL_STATES.map((s) => store.idsInState(s)))).flat()
    : await redis.zrange(keys.all(), 0, -1);
  const groups = new Map<string, { key: string; total: number; states: Record<string, number> }>();
  let total = 0;
  for (let i = 0; i < ids.length; i += CHUNK) {
    for (const r of await store.getManyFields(ids.slice(i, i + CHUNK), ["fqans", "pending"])) {
      if (!r) continue;
      const key = by === "vo" ? (voOf(r.fqans) ?? NO_VO) : by === "owner" ? r.owner : r.pending ? `PENDING:${r.state}` : r.state;
      let g = groups.get(key);
      if (!g) groups.set(key, (g = { key, total: 0, states: {} }));
      g.total++;
      g.states[r.rest] = (g.states[r.rest] ?? 0) + 1;
      total++;
    }
  }
  return { total, groups: [...groups.values()].sort((a, b) => b.total - a.total || a.key.localeCompare(b.key)) };
}

/** REST states that occur in a summary, in lifecycle order (the columns worth printing). */
export function summaryColumns(s: Summary): string[] {
  return REST_STATES.filter((st) => s.groups.some((g) => g.states[st]));
}
