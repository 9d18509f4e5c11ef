import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PoolLeases } from "@ce/mapping";
import type { Jem } from "../src/daemon.js";
import { letJemSee, sendCommand, shellJob, submitTestJob, testEnv, testJem, waitFor, waitForRest, type TestEnv } from "./helpers.js";

// Pool leases end with the identity's last job: the JEM's wipe (expiry) and removal (clean) paths
// release them. No grace time here, so the release happens at once. That also leaves a lease
// without a committed job unprotected: the JEM's expiry pass (every 300 ms here) sweeps it, which
// is what the grace time prevents for a submission still committing. So each test commits its
// jobs held (`notify: false`, the JEM cannot start them), then leases, then lets the JEM run them:
// no sweep can come between the lease and the jobs, however long a submission takes.
let env: TestEnv;
let jem: Jem;
let leases: PoolLeases;

beforeAll(async () => {
  env = await testEnv({ jobs: { sessionLifetimeSeconds: 1, wipedRecordSeconds: 60 }, mapping: { leaseGraceSeconds: 0 } });
  // These jobs carry no mapped account (no gateway): run them as the CE, the lease logic is the subject.
  jem = await testJem(env, { privileged: false });
  leases = new PoolLeases(env.redis, env.config.redis.prefix);
});
afterAll(async () => {
  await jem?.stop();
  await env?.close();
});

describe("pool leases and the JEM", () => {
  it("the lease is kept while a job is left and released when the last one is wiped", async () => {
    const owner = "/DC=org/CN=Wiped Owner";
    const first = await submitTestJob(env, shellJob("true"), { owner }, { notify: false });
    const second = await submitTestJob(env, shellJob("sleep 3"), { owner }, { notify: false });
    expect(await leases.lease(owner, "p", ["acct1", "acct2"])).toBe("acct1");
    await letJemSee(env, first);
    await letJemSee(env, second);
    await waitForRest(env, first, "WIPED", 15_000);
    expect(await leases.holder("acct1")).toBe(owner); // the second job still runs as it
    await waitForRest(env, second, "WIPED", 20_000);
    await waitFor("lease released", async () => (await leases.holder("acct1")) === undefined, 10_000);
    expect(await leases.lease("/CN=someone else", "p", ["acct1", "acct2"])).toBe("acct1");
  });

  it("a clean (record removed at once) releases it too", async () => {
    const owner = "/DC=org/CN=Cleaned Owner";
    const id = await submitTestJob(env, shellJob("true"), { owner }, { notify: false });
    expect(await leases.lease(owner, "q", ["c1"])).toBe("c1");
    await letJemSee(env, id);
    await waitForRest(env, id, "FINISHED");
    expect(await leases.holder("c1")).toBe(owner); // a FINISHED job keeps it: the clean below is what frees it
    await sendCommand(env, "clean", id);
    await waitFor("lease released", async () => (await leases.holder("c1")) === undefined, 10_000);
    expect(await env.jobs.get(id)).toBeUndefined();
  });
});
