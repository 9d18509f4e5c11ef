/**
 * Only an answered 201 runs, through a Sentinel failover with `redis.waitReplicas: 1` and ONE
 * replica: once the primary is SIGKILLed and the replica promoted, no replica is left to confirm
 * writes, so every submission is created and then answered 503 (NOT_REPLICATED) until the old
 * primary comes back as a replica. Those jobs once ran anyway, and the client's resend of the
 * refused request ran them a second time. Each job appends its tag to a log when it runs: no tag
 * may run twice, and every job that ran must be one of a 201 the client received.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HAS_SENTINEL, startSentinelSet, type SentinelSet } from "@ce/testing/redis-ha";
import { startStack, type Stack } from "@ce/testing/stack";
import { CeClient } from "./client.js";
import { allJobIds, broken, runLog, type RunLog } from "./runs.js";
import { quietPeriod, waitFor } from "@ce/testing";

if (!HAS_SENTINEL)
  console.warn("tests/ha/failover-refused.serial.test.ts skipped: redis-sentinel is not installed (scripts/ensure-system-deps.sh)");
/** Pause between a traffic loop's requests: the load is a steady trickle, not a flood. */
const pace = (ms: number) => quietPeriod(ms, "client pacing");

async function until(what: string, ok: () => boolean | Promise<boolean>, ms: number): Promise<void> {
  await waitFor(what, ok, ms);
}

describe.skipIf(!HAS_SENTINEL)("Sentinel failover with waitReplicas 1 and one replica", () => {
  let set: SentinelSet;
  let stack: Stack;
  let ce: CeClient;
  let runs: RunLog;

  beforeAll(async () => {
    runs = runLog();
    set = await startSentinelSet({ durability: "everysec", downAfterMs: 1000, replicas: 1 });
    stack = await startStack({
      redisUrl: "redis://127.0.0.1:1", // unused in sentinel mode
      redisUsers: set.users,
      backend: "fork",
      config: { redis: { ...set.ceConfig(), waitReplicas: 1, waitTimeoutMs: 300 }, jobs: { submissionHoldSeconds: 5 } },
    });
    ce = new CeClient(stack, stack.url);
  }, 120_000);

  afterAll(async () => {
    ce?.close();
    await stack?.stop();
    await set?.stop();
    runs?.remove();
  });

  it("runs no job of a refused (503) submission, and none twice when the client resends it", async () => {
    const acked = new Set<string>();
    const replies = new Map<number, number>();
    let running = true;
    let seq = 0;
    let refusedAfterSwitch = 0;
    let switched = false;
    const submitter = async (c: number) => {
      while (running) {
        const n = seq++;
        const body = runs.xrsl([`c${c}r${n}j0`, `c${c}r${n}j1`]);
        // Resent until answered 201, as a client must after a 503.
        while (running) {
          const r = await ce.submit(body).catch(() => undefined);
          if (r) replies.set(r.status, (replies.get(r.status) ?? 0) + 1);
          if (r?.status === 201) {
            for (const id of r.ids) acked.add(id);
            break;
          }
          if (r?.status === 503 && switched) refusedAfterSwitch++;
          await pace(150);
        }
      }
    };
    const loops = [submitter(0), submitter(1)];
    let electedMs = -1;
    try {
      await until("submissions before the failover", () => acked.size >= 20, 30_000);
      const old = await set.primary();
      await old.kill("SIGKILL");
      const killedAt = Date.now();
      await until("a new primary", async () => (await set.primary()).port !== old.port, 30_000);
      electedMs = Date.now() - killedAt;
      switched = true;
      // No replica left: every submission is written, then refused.
      await until("refused submissions after the switch", () => refusedAfterSwitch >= 10, 30_000);
      // The old primary back as a replica of the new one: submissions are confirmed again.
      const primary = await set.primary();
      await old.restart(["--replicaof", "127.0.0.1", String(primary.port)]);
      const before = acked.size;
      await until("submissions acknowledged with a replica again", () => acked.size >= before + 10, 40_000);
    } finally {
      running = false;
      await Promise.all(loops);
    }

    const all = await allJobIds(ce, stack.url);
    const states = await ce.waitStates(all, ["FINISHED", "FAILED", "KILLED"], 40_000, stack.logs);
    const unanswered = all.filter((id) => !acked.has(id));
    const { ranTwice, ranUnacknowledged } = broken(runs.runs(), acked);
    console.log(
      "failover with one replica:",
      JSON.stringify({
        electedMs,
        requests: seq,
        replies: Object.fromEntries(replies),
        acked: acked.size,
        jobs: all.length,
        unanswered: unanswered.length,
        unansweredFinished: unanswered.filter((id) => states.get(id) === "FINISHED").length,
        ackedNotFinished: [...acked].filter((id) => states.get(id) !== "FINISHED").length,
        ranTwice: ranTwice.length,
        ranUnacknowledged: ranUnacknowledged.length,
      }),
    );
    expect(stack.exited()).toEqual([]);
    // The refused submissions did create jobs (the path under test ran), and they never ran.
    expect(unanswered.length).toBeGreaterThan(0);
    expect(ranTwice).toEqual([]);
    expect(ranUnacknowledged).toEqual([]);
    for (const id of unanswered) expect(states.get(id)).toBe("FAILED");
  }, 150_000);
});
