import { afterAll, afterEach, describe, it } from "vitest";
import { testEnv, type TestEnv } from "../../apps/jem/test/helpers.js";
import { expectExactlyOnce, runSoak } from "../../apps/jem/test/support/soak.js";
import { HAS_SLURM, startSlurm, type SlurmCluster } from "@ce/testing/slurm";

// `pnpm soak` (not part of `pnpm test`): the exactly-once soak. The JEM runs as its own
// process (apps/jem/src/main.ts, shipped timings) and is SIGKILLed every 3 s ten times, restarted
// each time, while jobs are submitted; each job appends its name to a shared file when it runs.
// Fails on any job that ran twice, any acknowledged job lost, any job not FINISHED in time.
// SOAK_FORK_JOBS / SOAK_SLURM_JOBS / SOAK_KILLS change the size.

const FORK_JOBS = Number(process.env.SOAK_FORK_JOBS ?? 1_000);
const SLURM_JOBS = Number(process.env.SOAK_SLURM_JOBS ?? 400);
const KILLS = Number(process.env.SOAK_KILLS ?? 10);

let env: TestEnv | undefined;
let slurm: SlurmCluster | undefined;
afterEach(async () => {
  await env?.close();
  env = undefined;
});
afterAll(() => slurm?.stop());

describe("soak: exactly once while the JEM is SIGKILLed", () => {
  it(`fork: ${FORK_JOBS} jobs, ${KILLS} kills`, async () => {
    env = await testEnv({ lrms: { backend: "fork" } });
    const r = await runSoak(env, {
      jobs: FORK_JOBS,
      kills: KILLS,
      killEveryMs: 3_000,
      submitOverMs: KILLS * 3_000,
      settleTimeoutMs: 600_000,
      log: console.log,
    });
    expectExactlyOnce(r);
  }, 900_000);

  it.skipIf(!HAS_SLURM)(
    `slurm: ${SLURM_JOBS} jobs, ${KILLS} kills`,
    async () => {
      slurm = await startSlurm();
      env = await testEnv({ lrms: { backend: "slurm" } });
      const r = await runSoak(env, {
        jobs: SLURM_JOBS,
        kills: KILLS,
        killEveryMs: 3_000,
        submitOverMs: KILLS * 3_000,
        settleTimeoutMs: 600_000,
        jemEnv: { SLURM_CONF: slurm.conf },
        log: console.log,
      });
      expectExactlyOnce(r);
    },
    900_000,
  );
});
