import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Keys, recordRequests } from "@ce/store";
import { afterEach, describe, expect, it } from "vitest";
import type { Jem } from "../src/daemon.js";
import { openRequests } from "../src/recovery.js";
import { shellJob, submitTestJob, testEnv, testJem, waitFor, waitForRest, type TestEnv } from "./helpers.js";

// A 202 for kill/clean/restart promises the request is on the record: the JEM acts on it even
// when the ring on the work list is gone (a failover losing the last writes).
let env: TestEnv | undefined;
let jem: Jem | undefined;
afterEach(async () => {
  await jem?.stop();
  await env?.close();
  jem = env = undefined;
});

/**
 * A request as a failover can leave it: the flag and the open-request entry reached the replica,
 * the ring on the work list did not (written here by hand, the way lua/request.lua writes them).
 */
async function requestWithoutRing(e: TestEnv, action: "kill" | "restart", id: string): Promise<void> {
  const k = new Keys(e.config.redis.prefix);
  await e.redis.multi().hset(k.job(id), `${action}Requested`, "1").hincrby(k.job(id), "rev", 1).sadd(k.requests(), id).exec();
}

describe("kill/clean/restart requests survive a lost ring", () => {
  it("a kill rings the job itself: recorded before any JEM runs, the job ends KILLED without running", async () => {
    env = await testEnv();
    const id = await submitTestJob(env, shellJob("sleep 30"));
    await recordRequests(env.jobs, [{ action: "kill", jobId: id }]);
    expect((await env.advance.scoreOf(id)).due).toBeLessThanOrEqual(Date.now());
    jem = await testJem(env);
    const r = await waitForRest(env, id, ["KILLED", "FAILED", "FINISHED"], 20_000);
    expect(r?.rest).toBe("KILLED");
    expect(r?.failedCause).toBe("client");
    // Answered: the open-request set forgets it on a later pass.
    await waitFor("request closed", async () => !(await env!.jobs.openRequests()).includes(id), 10_000);
  });

  it("kill of a RUNNING job whose ring was lost: recovery rings again, the job ends KILLED", async () => {
    env = await testEnv();
    jem = await testJem(env, { recoveryIntervalMs: 500 });
    const id = await submitTestJob(env, shellJob("sleep 30"));
    await waitForRest(env, id, "RUNNING", 10_000);
    await requestWithoutRing(env, "kill", id);
    const r = await waitForRest(env, id, ["KILLED", "FAILED", "FINISHED"], 20_000);
    expect(r?.rest).toBe("KILLED");
    expect(r?.failedState).toBe("INLRMS");
  });

  it("restart whose ring was lost: the failed job runs again and the flag is cleared", async () => {
    env = await testEnv();
    jem = await testJem(env, { recoveryIntervalMs: 500 });
    const marker = join(await mkdtemp(join(tmpdir(), "jem-req-")), "ran-once");
    const id = await submitTestJob(env, { ...shellJob(`if [ -e ${marker} ]; then exit 0; fi; touch ${marker}; exit 1`), rerun: 1 });
    const failed = await waitForRest(env, id, ["FAILED", "FINISHED", "KILLED"], 20_000);
    expect(failed?.rest).toBe("FAILED");
    await requestWithoutRing(env, "restart", id);
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

  it("which requests stay open and which need a look now", () => {
    const base = { id: "x", owner: "o", killRequested: false, cleanRequested: false, restartRequested: false } as const;
    const job = (over: object) => ({ ...base, state: "INLRMS", ...over }) as Parameters<typeof openRequests>[0];
    expect(openRequests(undefined)).toEqual({ open: false, look: false });
    expect(openRequests(job({ killRequested: true }))).toEqual({ open: true, look: true });
    expect(openRequests(job({ killRequested: true, state: "CANCELING" }))).toEqual({ open: true, look: false });
    expect(openRequests(job({ killRequested: true, state: "FINISHED" }))).toEqual({ open: false, look: false });
    expect(openRequests(job({ cleanRequested: true }))).toEqual({ open: true, look: false });
    expect(openRequests(job({ cleanRequested: true, state: "FINISHED" }))).toEqual({ open: true, look: true });
    expect(openRequests(job({ restartRequested: true, state: "FINISHED" }))).toEqual({ open: true, look: true });
  });
});
