/**
 * A JEM in its own process for crash tests and the benchmark: the compiled config arrives as JSON
 * in JEM_CHILD_CONFIG; "ready" on stdout once started. Optional JEM_CHILD_BACKEND: `null` = jobs
 * never end (memory benchmark), `instant` = jobs end at submission (JEM-core throughput).
 * JEM_CHILD_LOCK_MS, JEM_CHILD_STALLED_MS, JEM_CHILD_STAGING_LOCK_MS, JEM_CHILD_RECOVERY_MS: the crash tests' short timings
 * unless set (benchmarks set the shipped ones).
 */
import type { CompiledConfig } from "@ce/config";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { destination, pino } from "pino";
import { startJem } from "../../src/daemon.js";
import type { Backend } from "../../src/lrms/types.js";

const config = JSON.parse(process.env.JEM_CHILD_CONFIG ?? "{}") as CompiledConfig;
const kind = process.env.JEM_CHILD_BACKEND;
const backends: Backend[] | undefined =
  kind === "null" ? [nullBackend(config.lrms.backend)] : kind === "instant" ? [instantBackend(config.lrms.backend)] : undefined;
const jem = await startJem(config, {
  logger: pino({ level: process.env.JEM_TEST_LOG ?? "silent" }, destination(2)),
  jobLockMs: Number(process.env.JEM_CHILD_LOCK_MS ?? 3_000),
  stalledIntervalMs: Number(process.env.JEM_CHILD_STALLED_MS ?? 3_000),
  recoveryIntervalMs: Number(process.env.JEM_CHILD_RECOVERY_MS ?? 2_000),
  stagingLockMs: Number(process.env.JEM_CHILD_STAGING_LOCK_MS ?? 6_000),
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
    poll: async (jobs) =>
      new Map(
        jobs.map((j) => [
          j.jobId,
          cancelled.has(j.localId) ? { kind: "done", exitCode: 15, message: "cancelled" } : { kind: "active", lrms: "RUNNING" },
        ]),
      ),
  };
}

/** Every job ends the moment it is submitted: the wrapper's files are written right away. */
function instantBackend(name: string): Backend {
  let n = 0;
  return {
    name,
    async submit(spec) {
      await writeFile(join(spec.jobDir, "diag"), "exitcode=0\nnodename=instant\n");
      await writeFile(join(spec.jobDir, "lrms_done"), "0 \n");
      return { localId: `instant-${process.pid}-${++n}` };
    },
    cancel: async () => undefined,
    poll: async (jobs) => new Map(jobs.map((j) => [j.jobId, { kind: "done", exitCode: 0, message: "" }])),
  };
}
