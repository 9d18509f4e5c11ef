import type { CeMetrics } from "@ce/ops";
import type { Backend } from "./types.js";

/** A back end whose every call into the batch system is counted and timed (ce_batch_calls_total). */
export function instrumentBackend(b: Backend, metrics: CeMetrics): Backend {
  return {
    name: b.name,
    submit: (spec, expected) => metrics.timeBatchCall(b.name, "submit", () => b.submit(spec, expected)),
    ...(b.expectSubmit ? { expectSubmit: () => b.expectSubmit!() } : {}),
    // usage never throws either (no figures is its failure); counted as calls, not as errors.
    ...(b.usage
      ? { usage: (jobs: Array<{ jobId: string; localId: string }>) => metrics.timeBatchCall(b.name, "usage", () => b.usage!(jobs)) }
      : {}),
    ...(b.ended ? { ended: (jobId: string, localId: string | undefined) => b.ended!(jobId, localId) } : {}),
    cancel: (localId, spec) => metrics.timeBatchCall(b.name, "cancel", () => b.cancel(localId, spec)),
    // poll never throws (failures come back as "unknown"); count those as errors.
    poll: async (jobs) => {
      const t0 = performance.now();
      const res = await b.poll(jobs);
      const failed = [...res.values()].some((s) => s.kind === "unknown" && /POLL_FAILED|TIMEOUT/.test(s.reason));
      metrics.countBatchCall(b.name, "poll", failed ? "error" : "ok", (performance.now() - t0) / 1000);
      return res;
    },
  };
}
