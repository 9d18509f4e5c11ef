import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { RedisOutage, redisTrouble, writeProbe } from "./outage.js";
import { waitFor } from "@ce/testing";

let redis: Redis;
beforeAll(() => {
  redis = new Redis(inject("redisUrl"));
});
afterAll(async () => {
  await redis.quit();
});

describe("redisTrouble", () => {
  it("knows a Redis that cannot be reached, and leaves every other Redis error alone", async () => {
    const dead = new Redis({ port: 1, lazyConnect: true, maxRetriesPerRequest: 0, enableOfflineQueue: false, retryStrategy: () => null });
    dead.on("error", () => undefined);
    const refused = await dead.connect().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(redisTrouble(refused)).toBe("down");
    expect(redisTrouble(await dead.get("x").catch((e: unknown) => e))).toBe("down");
    dead.disconnect();
    await redis.set("{outage}:s", "x");
    const wrongType = await redis.lpush("{outage}:s", "y").catch((e: unknown) => e);
    expect(redisTrouble(wrongType)).toBeUndefined();
    expect(redisTrouble(new Error("boom"))).toBeUndefined();
    // The replies of a refusing server (their text is Redis' own), also wrapped as a cause.
    expect(redisTrouble(new Error("OOM command not allowed when used memory > 'maxmemory'. script: abc, on @user_script:14."))).toBe("oom");
    expect(redisTrouble(new Error("x", { cause: new Error("MISCONF Redis is configured to save RDB snapshots, but ...") }))).toBe(
      "misconf",
    );
    expect(redisTrouble(new Error("READONLY You can't write against a read only replica."))).toBe("readonly");
    expect(redisTrouble(new Error("LOADING Redis is loading the dataset in memory"))).toBe("loading");
    expect(redisTrouble(new Error("Command timed out"))).toBe("timeout");
  });
});

describe("RedisOutage", () => {
  it("one episode for many failures: one line at the start, one at the end, every waiter released by one probe loop", async () => {
    const events: string[] = [];
    let accepting = false;
    let probes = 0;
    const outage = new RedisOutage({
      probe: async () => {
        probes++;
        if (!accepting) throw new Error("MISCONF Redis is configured to save RDB snapshots");
        return writeProbe(redis, "{outage}", "t")();
      },
      onDown: ({ kind, aftershock }) => events.push(`down ${kind}${aftershock ? " aftershock" : ""}`),
      onUp: ({ kind, aftershock }) => events.push(`up ${kind}${aftershock ? " aftershock" : ""}`),
      minDelayMs: 10,
      maxDelayMs: 20,
      quietMs: 1_000,
    });
    // 50 steps hit the trouble at once; each is redone once the episode is over.
    let runs = 0;
    const steps = Array.from({ length: 50 }, () =>
      outage.retry(async () => {
        runs++;
        if (!accepting) throw new Error("OOM command not allowed when used memory > 'maxmemory'.");
        return "done";
      }),
    );
    await waitFor("the outage noticed and probed", () => outage.down && probes > 1, 5_000, { everyMs: 5 });
    expect(outage.down).toBe(true);
    expect(events).toEqual(["down oom"]);
    expect(probes).toBeGreaterThan(1);
    accepting = true;
    expect(await Promise.all(steps)).toEqual(Array(50).fill("done"));
    expect(runs).toBe(100);
    expect(outage.down).toBe(false);
    expect(events).toEqual(["down oom", "up misconf"]);
    expect(await redis.get("{outage}:health:t")).toBeTruthy();

    // Other errors are not Redis trouble: thrown at once, no episode.
    await expect(outage.retry(async () => Promise.reject(new Error("bug")))).rejects.toThrow("bug");
    expect(outage.down).toBe(false);

    // Trouble again right after (connections still reconnecting): an aftershock, logged quietly.
    accepting = false;
    outage.report(new Error("Connection is closed."));
    accepting = true;
    await outage.waitUntilUp();
    expect(events.slice(2)).toEqual(["down down aftershock", "up down aftershock"]);
    outage.stop();
  });

  it("stop() releases waiters and retry gives up with the last error", async () => {
    const outage = new RedisOutage({
      probe: () => Promise.reject(new Error("Connection is closed.")),
      onDown: () => undefined,
      onUp: () => undefined,
      minDelayMs: 10,
    });
    const step = outage.retry(() => Promise.reject(new Error("Connection is closed.")));
    await waitFor("the step waiting out the outage", () => outage.down, 5_000, { everyMs: 5 });
    outage.stop();
    await expect(step).rejects.toThrow("Connection is closed.");
  });
});
