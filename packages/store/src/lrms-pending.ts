import { WAITING_LRMS_STATES, shownLrmsReason, type LrmsState } from "@ce/model";
import type { Redis } from "ioredis";
import { Keys } from "./keys.js";

/*
 * Jobs waiting in the batch system, summed per share (queue, VO) and the batch system's reason
 * (issue 36): what `ce_lrms_pending_jobs{queue,vo,reason}`, the pages' overview and `ceadm jobs
 * list --pending` show. Read from the records the JEM's bulk poll keeps current (`lrms`,
 * `lrmsReason`): no call into the batch system.
 */

/** Reason label of a waiting job the batch system gave no reason for. */
export const NO_REASON = "none";
/** Distinct reasons kept per read; the rest are summed under OTHER_REASONS (bounded metric series). */
export const MAX_REASONS = 64;
export const OTHER_REASONS = "other";

export interface PendingByReason {
  queue: string;
  /** The share's VO (lower case), "" for jobs without one. */
  vo: string;
  reason: string;
  jobs: number;
}

/** One waiting job (for `ceadm jobs list --pending`). */
export interface PendingJob {
  id: string;
  queue: string;
  vo: string;
  lrms: LrmsState;
  reason: string;
}

const FIELDS = ["state", "pending", "lrms", "lrmsReason", "share", "queue"] as const;
const CHUNK = 1_000;

/** Every job INLRMS in a waiting sub-state (QUEUING, HELD, OTHER), with its reason; pipelined HMGETs per 1,000. */
export async function readPendingJobs(redis: Redis, prefix: string): Promise<PendingJob[]> {
  const keys = new Keys(prefix);
  const ids = await redis.smembers(keys.internal("INLRMS"));
  const out: PendingJob[] = [];
  for (let i = 0; i < ids.length; i += CHUNK) {
    const part = ids.slice(i, i + CHUNK);
    const pipe = redis.pipeline();
    for (const id of part) pipe.hmget(keys.job(id), ...FIELDS);
    const rows = (await pipe.exec()) ?? [];
    rows.forEach(([err, v], j) => {
      if (err || !v) return;
      const [state, pending, lrms, lrmsReason, share, queue] = v as (string | null)[];
      const view = {
        state: state ?? "",
        pending: pending === "1",
        lrms: (lrms ?? undefined) as LrmsState | undefined,
        lrmsReason: lrmsReason ?? undefined,
      };
      // Waiting in the batch system: INLRMS, not parked, a waiting sub-state (a reason or none).
      if (view.state !== "INLRMS" || view.pending || !view.lrms || !WAITING_LRMS_STATES.has(view.lrms)) return;
      const bar = (share ?? "").indexOf("|");
      out.push({
        id: part[j]!,
        queue: bar >= 0 ? share!.slice(0, bar) : (queue ?? ""),
        vo: bar >= 0 ? share!.slice(bar + 1) : "",
        lrms: view.lrms,
        reason: shownLrmsReason(view) ?? NO_REASON,
      });
    });
  }
  return out;
}

/**
 * Waiting jobs summed per queue, VO and reason, largest first. `vos`, when given, bounds the VO
 * values (others are "other", none ""), as ce_jobs_by_vo does; reasons beyond MAX_REASONS are "other".
 */
export async function readPendingByReason(redis: Redis, prefix: string, vos?: readonly string[]): Promise<PendingByReason[]> {
  const known = vos ? new Set(vos.map((v) => v.toLowerCase())) : undefined;
  const counts = new Map<string, PendingByReason>();
  const byReason = new Map<string, number>();
  const jobs = await readPendingJobs(redis, prefix);
  for (const j of jobs) byReason.set(j.reason, (byReason.get(j.reason) ?? 0) + 1);
  const kept = new Set(
    [...byReason.entries()]
      .sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))
      .slice(0, MAX_REASONS)
      .map(([r]) => r),
  );
  for (const j of jobs) {
    const vo = known && j.vo !== "" && !known.has(j.vo) ? "other" : j.vo;
    const reason = kept.has(j.reason) ? j.reason : OTHER_REASONS;
    const key = `${j.queue}\u0000${vo}\u0000${reason}`;
    const e = counts.get(key);
    if (e) e.jobs++;
    else counts.set(key, { queue: j.queue, vo, reason, jobs: 1 });
  }
  return [...counts.values()].sort(
    (a, b) => b.jobs - a.jobs || a.queue.localeCompare(b.queue) || a.vo.localeCompare(b.vo) || a.reason.localeCompare(b.reason),
  );
}
