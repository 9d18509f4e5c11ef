import { existsSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Jem } from "../src/daemon.js";
import { shellJob, submitTestJob, testEnv, testJem, waitFor, waitForRest, type TestEnv } from "./helpers.js";

// Completion must be seen through the watched doorbell directory alone: the batch poll
// and the fallback scan are set to an hour, so only the doorbell can finish these jobs in time.
let env: TestEnv;
let jem: Jem;

beforeAll(async () => {
  env = await testEnv({ lrms: { backend: "fork", pollIntervalMs: 3_600_000 }, jem: { scanIntervalMs: 3_600_000 } });
  jem = await testJem(env);
});
afterAll(async () => {
  await jem?.stop();
  await env?.close();
});

describe("completion doorbell (fs.watch on control/events)", () => {
  it("a finished batch job rings the doorbell and the JEM finishes it without any poll or scan", async () => {
    // Longer than the first poll (500 ms after start), which would otherwise see them end.
    const ids = await Promise.all([1, 2, 3].map((i) => submitTestJob(env, shellJob(`sleep 1.5; echo ${i}`))));
    for (const id of ids) {
      const r = await waitForRest(env, id, ["FINISHED", "FAILED"], 15_000);
      expect(r?.rest).toBe("FINISHED");
      // The doorbell is only a wake-up: answered and removed.
      await waitFor("doorbell removed", async () => !existsSync(env.control.eventFile(id)));
    }
  });

  it("a doorbell rung while no JEM was running is answered by the next JEM at start", async () => {
    const id = await submitTestJob(env, shellJob("sleep 2; echo late"));
    await waitForRest(env, id, ["RUNNING", "QUEUING"], 15_000);
    await jem.stop();
    // The batch job ends while no JEM runs: the doorbell stays until someone answers it.
    await waitFor("doorbell rung", async () => existsSync(env.control.eventFile(id)), 15_000);
    jem = await testJem(env);
    // Polls and periodic scans are off: only the scan at boot answers the leftover doorbell.
    await waitFor("doorbell answered", async () => !existsSync(env.control.eventFile(id)), 10_000);
    expect((await waitForRest(env, id, ["FINISHED", "FAILED"], 15_000))?.rest).toBe("FINISHED");
  });
});
