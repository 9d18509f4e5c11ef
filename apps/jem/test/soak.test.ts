import { afterEach, describe, expect, it } from "vitest";
import { testEnv, type TestEnv } from "./helpers.js";
import { runSoak } from "./support/soak.js";

// The CI cut of `pnpm soak` (tests/soak): 100 fork jobs while the JEM process (main.ts) is
// SIGKILLed three times; no job may run twice, be lost, or stay unfinished.

let env: TestEnv | undefined;
afterEach(async () => {
  await env?.close();
  env = undefined;
});

describe("exactly once under SIGKILL of the JEM", () => {
  it("fork: 100 jobs, 3 kills every 3 s → each ran exactly once and FINISHED", async () => {
    env = await testEnv({ lrms: { backend: "fork", pollIntervalMs: 500 } });
    const r = await runSoak(env, { jobs: 100, kills: 3, killEveryMs: 3_000, submitOverMs: 8_000, settleTimeoutMs: 150_000 });
    console.log(`soak fork: ${JSON.stringify({ ...r, ranTwice: r.ranTwice.length, lost: r.lost.length, notTerminal: r.notTerminal.length })}`);
    expect(r.ranTwice).toEqual([]);
    expect(r.lost).toEqual([]);
    expect(r.notTerminal).toEqual([]);
    expect(r.finishedOk).toBe(100);
  }, 240_000);
});
