import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { emptyDescription, type JobDescription } from "@ce/model";
import { JobStore, SubmissionHolds, WITHDRAWN_REASON } from "@ce/store";
import { createJobs } from "@ce/controldir";
import type { Jem } from "../src/daemon.js";
import { clientUpload, OWNER, shellJob, testEnv, testJem, testJobFiles, transitionsOf, waitForRest, type TestEnv } from "./helpers.js";
import { quietPeriod } from "@ce/testing";

/**
 * Submission holds (@ce/store holds.ts) as the JEM sees them: a job whose submission's answer has
 * not been written is never advanced, an upload to it does not start it, a released one runs, and
 * one never released fails at the hold deadline without having run.
 */
let env: TestEnv;
let jem: Jem;
let holds: SubmissionHolds;

beforeAll(async () => {
  env = await testEnv({ jobs: { uploadTimeoutSeconds: 60 } });
  holds = new SubmissionHolds(env.redis, env.config.redis.prefix);
  jem = await testJem(env);
});
afterAll(async () => {
  await jem?.stop();
  await env?.close();
});

/** One job created as the gateway does for a request (held, admitted at creation when it only waits for uploads). */
async function submitHeld(partial: Partial<JobDescription>, holdMs: number): Promise<{ id: string; key: string }> {
  const d: JobDescription = { ...emptyDescription("emies:adl"), ...partial };
  const key = SubmissionHolds.newKey();
  const id = randomUUID();
  const rec = JobStore.newRecord({
    id,
    owner: OWNER,
    queue: "main",
    backend: "fork",
    language: d.language,
    rerun: 0,
    lifetime: 3600,
    delegations: [],
    hold: key,
  });
  const { outcomes } = await createJobs(env, [{ record: rec, files: testJobFiles(rec, d) }], {
    maxTotal: 1_000,
    holdUntil: Date.now() + holdMs,
    admit: { maxActivePerOwner: 1_000, uploadTimeoutMs: 60_000 },
  });
  expect(outcomes).toEqual(["created"]);
  return { id, key };
}

describe("submission holds in the JEM", () => {
  it("a job never released is not advanced, then fails at the deadline without running (not restartable)", async () => {
    const { id } = await submitHeld(shellJob("touch ran"), 1_500);
    await env.advance.ring([id]); // a recovery ring during the hold changes nothing
    await quietPeriod(800, "a held job must not advance");
    expect((await env.jobs.get(id))?.rest).toBe("ACCEPTING");
    const r = await waitForRest(env, id, ["FINISHED", "FAILED"], 10_000);
    expect(r?.rest).toBe("FAILED");
    expect(r?.failure).toBe(WITHDRAWN_REASON);
    expect(r?.failedState).toBeUndefined();
    expect((await transitionsOf(env, id)).map((t) => t.to)).toEqual(["FINISHING", "FINISHED"]);
  });

  it("a released job runs at once", async () => {
    const { id, key } = await submitHeld(shellJob("true"), 30_000);
    await quietPeriod(300, "a held job must not advance");
    expect((await env.jobs.get(id))?.rest).toBe("ACCEPTING");
    expect(await holds.release(key, [id])).toBe(true);
    expect((await waitForRest(env, id, ["FINISHED", "FAILED"], 10_000))?.rest).toBe("FINISHED");
  });

  it("an upload to a held job does not start it; released, it runs without waiting for the upload deadline", async () => {
    const { id, key } = await submitHeld(
      shellJob("cat in.txt", { inputFiles: [{ name: "in.txt", executable: false, options: {} }] }),
      30_000,
    );
    expect((await env.jobs.get(id))?.state).toBe("PREPARING"); // admitted at creation
    await clientUpload(env, id, "in.txt", "data");
    await quietPeriod(1_500, "an upload to a held job must not start it");
    expect((await env.jobs.get(id))?.state).toBe("PREPARING");
    expect(await transitionsOf(env, id)).toEqual([{ from: "ACCEPTED", to: "PREPARING" }]);
    expect(await holds.release(key, [id], Date.now() + 60_000)).toBe(true);
    expect((await waitForRest(env, id, ["FINISHED", "FAILED"], 10_000))?.rest).toBe("FINISHED");
  });

  it("a job withdrawn by the gateway (answer not 201) fails at once", async () => {
    const { id, key } = await submitHeld(shellJob("true"), 30_000);
    expect(await holds.withdraw(key, [id])).toBe(true);
    const r = await waitForRest(env, id, ["FINISHED", "FAILED"], 5_000);
    expect(r?.failure).toBe(WITHDRAWN_REASON);
  });
});
