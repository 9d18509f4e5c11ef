/**
 * The CE on real Redis Sentinel (primary + two replicas + three sentinels on loopback,
 * @ce/testing/redis-ha), gateway and JEM with `redis.mode: sentinel` and
 * `redis.waitReplicas: 1`: the core lifecycle, then a failover — SIGKILL of the primary during a
 * stream of submissions and status queries. Proves the HA claims of docs/operations.md: nothing acknowledged
 * with 201 is lost, every job finishes, the gateway and the JEM reconnect by themselves, requests
 * during the switch get 503 + Retry-After, no process crashes.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HAS_SENTINEL, startSentinelSet, type SentinelSet } from "@ce/testing/redis-ha";
import { startStack, type Stack } from "@ce/testing/stack";
import { CeClient, echoJobs } from "./client.js";
import { coreLifecycle } from "./lifecycle.js";
import { quietPeriod, waitFor } from "@ce/testing";

if (!HAS_SENTINEL)
  console.warn("tests/ha/sentinel.serial.test.ts skipped: redis-sentinel is not installed (scripts/ensure-system-deps.sh)");
/** Pause between a traffic loop's requests: the load is a steady trickle, not a flood. */
const pace = (ms: number) => quietPeriod(ms, "client pacing");

async function until(what: string, ok: () => boolean | Promise<boolean>, ms: number): Promise<void> {
  await waitFor(what, ok, ms);
}

describe.skipIf(!HAS_SENTINEL)("CE on Redis Sentinel (primary + 2 replicas + 3 sentinels)", () => {
  let set: SentinelSet;
  let stack: Stack;
  let ce: CeClient;

  beforeAll(async () => {
    // Two replicas: after the failover one is left to confirm writes (`waitReplicas: 1`).
    set = await startSentinelSet({ durability: "everysec", downAfterMs: 1000, replicas: 2 });
    stack = await startStack({
      redisUrl: "redis://127.0.0.1:1", // unused in sentinel mode
      redisUsers: set.users,
      backend: "fork",
      config: { redis: { ...set.ceConfig(), waitReplicas: 1, waitTimeoutMs: 500 } },
    });
    ce = new CeClient(stack, stack.url);
  }, 120_000);

  afterAll(async () => {
    ce?.close();
    await stack?.stop();
    await set?.stop();
  });

  it("runs the core lifecycle: delegation, submit → FINISHED, bulk status, kill, restart, clean", async () => {
    await coreLifecycle(stack, ce);
  }, 60_000);

  it("survives SIGKILL of the primary: nothing acknowledged is lost, every job finishes, no crash", async () => {
    const acked = new Set<string>();
    const replies = new Map<number, number>();
    const noRetryAfter: number[] = [];
    let transportErrors = 0;
    const transport: string[] = [];
    let running = true;
    const count = (r: { status: number; headers: Record<string, unknown> }) => {
      replies.set(r.status, (replies.get(r.status) ?? 0) + 1);
      if (r.status === 503 && !r.headers["retry-after"]) noRetryAfter.push(r.status);
    };
    const submitter = async () => {
      while (running) {
        try {
          const r = await ce.submit(echoJobs(2, "failover"));
          count(r);
          for (const id of r.ids) acked.add(id);
        } catch (e) {
          transportErrors++;
          transport.push((e as Error).message);
        }
        await pace(150);
      }
    };
    const querier = async () => {
      while (running) {
        const ids = [...acked].slice(-100);
        if (ids.length) {
          try {
            count(await ce.bulk("status", ids));
          } catch (e) {
            transportErrors++;
            transport.push((e as Error).message);
          }
        }
        await pace(100);
      }
    };
    // Diagnostics: the test process's own event-loop stalls and the gateway's answer time without Redis.
    let lastTick = Date.now();
    let maxTickGap = 0;
    const ticker = setInterval(() => {
      maxTickGap = Math.max(maxTickGap, Date.now() - lastTick);
      lastTick = Date.now();
    }, 100);
    let maxPingMs = 0;
    const pinger = async () => {
      while (running) {
        const t = Date.now();
        await ce.call("GET", ce.api.replace(/\/1\.1$/, ""), undefined, { Accept: "*/*" }).catch(() => undefined);
        maxPingMs = Math.max(maxPingMs, Date.now() - t);
        await pace(200);
      }
    };
    const loops = [submitter(), submitter(), querier(), pinger()];

    let electedMs = -1;
    try {
      await until("submissions before the failover", () => acked.size >= 20, 20_000);
      const old = await set.primary();
      await old.kill("SIGKILL");
      const killedAt = Date.now();
      await until("a new primary", async () => (await set.primary()).port !== old.port, 20_000);
      electedMs = Date.now() - killedAt;
      const afterSwitch = acked.size;
      await until("submissions acknowledged after the switch", () => acked.size >= afterSwitch + 20, 30_000);
    } finally {
      running = false;
      await Promise.all(loops);
      clearInterval(ticker);
      console.log(
        "sentinel failover:",
        JSON.stringify({
          acked: acked.size,
          electedMs,
          replies: Object.fromEntries(replies),
          transportErrors,
          transport,
          maxTickGap,
          maxPingMs,
        }),
      );
    }
    expect(stack.exited()).toEqual([]);
    // Every acknowledged job is on the new primary and finishes (the JEM reconnected by itself).
    const states = await ce.waitStates([...acked], ["FINISHED", "FAILED", "KILLED"], 40_000, stack.logs);
    expect([...acked].filter((id) => states.get(id) !== "FINISHED")).toEqual([]);
    // During the switch: only 503 with Retry-After; never a 500, never a dropped connection.
    expect([...replies.keys()].filter((s) => s !== 201 && s !== 503)).toEqual([]);
    expect(noRetryAfter).toEqual([]);
    // Every request gets an answer (a 503 refused by the durability check after its 201 was made
    // once went out with the 201's Content-Length, and the client waited for bytes never sent).
    expect(transport).toEqual([]);
    expect(transportErrors).toBe(0);
    expect(stack.exited()).toEqual([]);
  }, 90_000);
});
