/**
 * A JEM in its own process for crash tests and the benchmark: the compiled config arrives as JSON
 * in JEM_CHILD_CONFIG; "ready" on stdout once started. Optional JEM_CHILD_BACKEND=null uses a
 * back end whose jobs never end (memory benchmark).
 */
import type { CompiledConfig } from "@ce/config";
import { pino } from "pino";
import { startJem } from "../../src/daemon.js";
import type { Backend } from "../../src/lrms/types.js";

const config = JSON.parse(process.env.JEM_CHILD_CONFIG ?? "{}") as CompiledConfig;
const backends: Backend[] | undefined = process.env.JEM_CHILD_BACKEND === "null" ? [nullBackend(config.lrms.backend)] : undefined;
const jem = await startJem(config, {
  logger: pino({ level: process.env.JEM_TEST_LOG ?? "silent" }),
  jobLockMs: Number(process.env.JEM_CHILD_LOCK_MS ?? 3_000),
  stalledIntervalMs: 3_000,
  recoveryIntervalMs: 2_000,
  ...(backends ? { backends } : {}),
});
process.stdout.write("ready\n");
process.on("SIGTERM", () => void jem.stop().then(() => process.exit(0)));

/** Accepts everything, runs nothing: jobs stay RUNNING until cancelled. */
function nullBackend(name: string): Backend {
  let n = 0;
  const cancelled = new Set<string>();
  return {
    name,
    submit: async () => ({ localId: `null-${process.pid}-${++n}` }),
    cancel: async (localId) => void cancelled.add(localId),
    poll: async (jobs) => new Map(jobs.map((j) => [j.jobId, cancelled.has(j.localId) ? { kind: "done", exitCode: 15, message: "cancelled" } : { kind: "active", lrms: "RUNNING" }])),
  };
}
