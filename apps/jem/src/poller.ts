import type { LrmsState } from "@ce/model";
import { enqueueAdvance, type JemContext } from "./context.js";
import { batchEnd, exists, logErrors } from "./files.js";
import type { Lease } from "./locks.js";
import type { PollState } from "./lrms/types.js";
import { batchDirOf, collectBatch } from "./priv/jobs.js";
import { warnUnlessOutage } from "./outage.js";
import { setLrmsSubstate } from "./states/transition.js";
import { backendFor } from "./lrms/index.js";

interface Polled {
  id: string;
  state: string;
  pending: boolean;
  localId: string;
  backend: string;
  lrms?: LrmsState | undefined;
  lrmsReason?: string | undefined;
}

const FIELDS = ["state", "pending", "localId", "backend", "lrms", "lrmsReason"] as const;

/**
 * The batch poll loop: one `backend.poll` per cycle per back end covering every INLRMS and
 * CANCELING job, by whichever JEM holds the poll lease. `active` refreshes the REST sub-state
 * (decisions #16) and the batch system's reason a waiting job waits (`lrmsReason`); `done` without `lrms_done` means the batch system ended the job, so the JEM
 * writes the marker (after a grace period for wrappers on slow shared file systems); `unknown`
 * never finishes a job (a batch system that cannot answer is no evidence that the job ended).
 */
export function startPoller(ctx: JemContext): { stop(): Promise<void>; pollOnce(): Promise<void> } {
  const interval = ctx.config.lrms.pollIntervalMs;
  const leaseMs = Math.max(interval * 3, 10_000);
  const graceMs = Math.max(interval * 2, 5_000);
  const firstDone = new Map<string, number>();
  let lease: Lease | undefined;
  let stopped = false;
  let running: Promise<void> = Promise.resolve();

  async function pollOnce(): Promise<void> {
    const ids = [...(await ctx.jobs.idsInState("INLRMS")), ...(await ctx.jobs.idsInState("CANCELING"))];
    if (ids.length === 0) return;
    const rows = await ctx.jobs.fieldsOf(ids, FIELDS);
    const byBackend = new Map<string, Polled[]>();
    rows.forEach((v, i) => {
      const [state, pending, localId, backend, lrms, lrmsReason] = v;
      if (!localId || !state || pending === "1") return;
      const p: Polled = {
        id: ids[i]!,
        state,
        pending: false,
        localId,
        backend: backend ?? "",
        lrms: (lrms ?? undefined) as LrmsState | undefined,
        lrmsReason: lrmsReason || undefined,
      };
      const list = byBackend.get(p.backend) ?? [];
      list.push(p);
      byBackend.set(p.backend, list);
    });
    const t0 = Date.now();
    for (const [name, jobs] of byBackend) {
      const backend = backendFor(ctx.backends, name);
      if (!backend) {
        ctx.log.warn({ backend: name, jobs: jobs.length }, "jobs of an unconfigured back end are not polled");
        continue;
      }
      let states: Map<string, PollState>;
      try {
        states = await backend.poll(jobs.map((j) => ({ jobId: j.id, localId: j.localId, jobDir: batchDirOf(ctx, j.id) })));
      } catch (e) {
        ctx.log.warn({ err: e, backend: backend.name }, "batch poll failed; every job stays as it is");
        continue;
      }
      let unknown = 0;
      await Promise.all(
        jobs.map(async (j) => {
          const s = states.get(j.id);
          if (!s || s.kind === "unknown") {
            unknown++;
            return;
          }
          if (s.kind === "active") {
            firstDone.delete(j.id);
            // The reason rides on the same bulk answer: no extra call per job, one write when it changed.
            if (j.state === "INLRMS" && (j.lrms !== s.lrms || j.lrmsReason !== s.reason)) await setLrms(ctx, j, s.lrms, s.reason);
            return;
          }
          await onDone(j, s);
        }),
      );
      if (unknown > 0) ctx.log.debug({ backend: backend.name, unknown }, "batch system gave no answer for some jobs");
    }
    const ms = Date.now() - t0;
    if (ms > 5_000) ctx.log.info({ jobs: ids.length, ms }, "batch poll cycle was slow");
  }

  async function onDone(j: Polled, s: Extract<PollState, { kind: "done" }>): Promise<void> {
    const done = ctx.control.file(j.id, "lrms_done");
    await collectBatch(ctx, j.id);
    if (!(await exists(done))) {
      // A cancelled job's wrapper never writes the marker; a normally ending one may still be doing so.
      const first = firstDone.get(j.id) ?? Date.now();
      firstDone.set(j.id, first);
      if (j.state !== "CANCELING" && Date.now() - first < graceMs) return;
      try {
        await batchEnd.create(ctx, j.id, s.exitCode, s.message);
        await logErrors(ctx, j.id, `Batch system reports the job ended: ${s.exitCode} ${s.message}`.trim());
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e;
      }
    }
    firstDone.delete(j.id);
    await enqueueAdvance(ctx, j.id, "lrms-done", 0, undefined, { urgent: true });
  }

  const tick = async () => {
    if (stopped) return;
    try {
      // During a Redis outage the cycle waits for its end (the next cycle covers every job).
      await ctx.outage.waitUntilUp();
      if (!lease?.held) lease = await ctx.locks.tryAcquire("poll", leaseMs);
      if (lease) {
        running = pollOnce();
        await running;
      }
    } catch (e) {
      warnUnlessOutage(ctx.outage, ctx.log, e, "poll cycle failed");
    }
    if (!stopped) timer = setTimeout(tick, interval);
  };
  let timer = setTimeout(tick, Math.min(interval, 500));
  return {
    pollOnce,
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await running.catch(() => undefined);
      await lease?.release();
    },
  };
}

/** Sub-state change from the poll, through the one owner of record state changes. */
async function setLrms(ctx: JemContext, j: Polled, lrms: LrmsState, reason: string | undefined): Promise<void> {
  const current = await ctx.jobs.get(j.id);
  if (current) await setLrmsSubstate(ctx, current, lrms, reason);
}
