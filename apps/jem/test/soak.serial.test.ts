import { afterAll, afterEach, describe, it } from "vitest";
import { HAS_SLURM, startSlurm, type SlurmCluster } from "@ce/testing/slurm";
import { testEnv, type TestEnv } from "./helpers.js";
import { expectExactlyOnce, runSoak } from "./support/soak.js";

// The CI cut of `pnpm soak` (tests/soak): 100 fork jobs while the JEM process (main.ts) is
// SIGKILLed three times (and 40 Slurm jobs likewise); no job may run twice, be lost, or stay unfinished.

let env: TestEnv | undefined;
let slurm: SlurmCluster | undefined;
afterEach(async () => {
  await env?.close();
  env = undefined;
});
afterAll(() => slurm?.stop());

describe("exactly once under SIGKILL of the JEM", () => {
  it("fork: 100 jobs, 3 kills every 3 s → each ran exactly once and FINISHED", async () => {
    env = await testEnv({ lrms: { backend: "fork", pollIntervalMs: 500 } });
    expectExactlyOnce(await runSoak(env, { jobs: 100, kills: 3, killEveryMs: 3_000, submitOverMs: 8_000, settleTimeoutMs: 150_000 }), 100);
  }, 240_000);

  it.skipIf(!HAS_SLURM)(
    "slurm: 40 jobs, 3 kills every 3 s → each ran exactly once and FINISHED",
    async () => {
      slurm = await startSlurm(`/tmp/ce-slurm-k${process.pid}`);
      env = await testEnv({ lrms: { backend: "slurm", pollIntervalMs: 500 } });
      expectExactlyOnce(
        await runSoak(env, {
          jobs: 40,
          kills: 3,
          killEveryMs: 3_000,
          submitOverMs: 8_000,
          settleTimeoutMs: 150_000,
          jemEnv: { SLURM_CONF: slurm.conf },
        }),
        40,
      );
    },
    240_000,
  );
});
