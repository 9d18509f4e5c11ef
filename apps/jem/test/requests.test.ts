import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { requestCommands } from "@ce/store";
import { afterEach, describe, expect, it } from "vitest";
import type { Jem } from "../src/daemon.js";
import { openRequests } from "../src/recovery.js";
import { shellJob, submitTestJob, testEnv, testJem, waitFor, waitForRest, type TestEnv } from "./helpers.js";

// A 202 for kill/clean/restart promises the request is on the record: the JEM acts on it even
// when the queue message (the doorbell) is gone.
let env: TestEnv | undefined;
let jem: Jem | undefined;
afterEach(async () => {
  await jem?.stop();
  await env?.close();
  jem = env = undefined;
});

/** Deletes every waiting command message: the doorbell is lost, only the record remains. */
async function dropCommands(e: TestEnv): Promise<number> {
  const waiting = await e.commands.getJobs(["waiting", "prioritized", "delayed"]);
  for (const j of waiting) await j.remove();
  expect(await e.commands.getJobCountByTypes("waiting", "prioritized", "delayed", "paused")).toBe(0);
  return waiting.length;
}

describe("kill/clean/restart requests survive a lost queue message", () => {
  it("kill recorded, its message deleted before any JEM runs: the job still ends KILLED", async () => {
    env = await testEnv();
    const id = await submitTestJob(env, shellJob("sleep 30"));
    await requestCommands(env.jobs, env.commands, [{ action: "kill", jobId: id }]);
    expect(await dropCommands(env)).toBe(1);
    jem = await testJem(env);
    const r = await waitForRest(env, id, ["KILLED", "FAILED", "FINISHED"], 20_000);
    expect(r?.rest).toBe("KILLED");
    expect(r?.failedCause).toBe("client");
    // Answered: the open-request set forgets it on a later pass.
    await waitFor("request closed", async () => !(await env!.jobs.openRequests()).includes(id), 10_000);
  });

  it("kill of a RUNNING job whose doorbell never rang: recovery rings again, the job ends KILLED", async () => {
    env = await testEnv();
    jem = await testJem(env, { recoveryIntervalMs: 500 });
    const id = await submitTestJob(env, shellJob("sleep 30"));
    await waitForRest(env, id, "RUNNING", 10_000);
    expect(await env.jobs.request([{ action: "kill", jobId: id }])).toEqual([true]); // record only, no message
    const r = await waitForRest(env, id, ["KILLED", "FAILED", "FINISHED"], 20_000);
    expect(r?.rest).toBe("KILLED");
    expect(r?.failedState).toBe("INLRMS");
  });

  it("restart recorded without a message: the failed job runs again and the flag is cleared", async () => {
    env = await testEnv();
    jem = await testJem(env, { recoveryIntervalMs: 500 });
    const marker = join(await mkdtemp(join(tmpdir(), "jem-req-")), "ran-once");
    const id = await submitTestJob(env, { ...shellJob(`if [ -e ${marker} ]; then exit 0; fi; touch ${marker}; exit 1`), rerun: 1 });
    const failed = await waitForRest(env, id, ["FAILED", "FINISHED", "KILLED"], 20_000);
    expect(failed?.rest).toBe("FAILED");
    expect(await env.jobs.request([{ action: "restart", jobId: id }])).toEqual([true]);
    const done = await waitFor(
      "restarted job finished",
      async () => {
        const j = await env!.jobs.get(id);
        return j?.rest === "FINISHED" && j.rerun === 0 ? j : undefined;
      },
      20_000,
    );
    expect(done.restartRequested).toBeFalsy();
  });

  it("which requests stay open and which ring a command", () => {
    const base = { id: "x", owner: "o", killRequested: false, cleanRequested: false, restartRequested: false } as const;
    const job = (over: object) => ({ ...base, state: "INLRMS", ...over }) as Parameters<typeof openRequests>[0];
    expect(openRequests(undefined)).toEqual({ open: false, ring: [] });
    expect(openRequests(job({ killRequested: true }))).toEqual({ open: true, ring: ["kill"] });
    expect(openRequests(job({ killRequested: true, state: "CANCELING" }))).toEqual({ open: true, ring: [] });
    expect(openRequests(job({ killRequested: true, state: "FINISHED" }))).toEqual({ open: false, ring: [] });
    expect(openRequests(job({ cleanRequested: true }))).toEqual({ open: true, ring: [] });
    expect(openRequests(job({ cleanRequested: true, state: "FINISHED" }))).toEqual({ open: true, ring: ["clean"] });
    expect(openRequests(job({ restartRequested: true, state: "FINISHED" }))).toEqual({ open: true, ring: ["restart"] });
  });
});
