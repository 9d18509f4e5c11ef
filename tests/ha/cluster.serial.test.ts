/**
 * The CE on a real local Redis Cluster (3 primaries, `--cluster-enabled yes`, @ce/testing/redis-ha):
 * gateway and JEM connect with `redis.mode: cluster` (connectRedis), BullMQ runs on the Cluster
 * client, and the core lifecycle works. Every key of the CE carries the `{prefix}` hash tag, so
 * the whole data set lives on the one primary that owns that slot (docs/operations.md "Durability and high availability").
 */
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startRedisCluster, type RedisClusterSet } from "@ce/testing/redis-ha";
import { startStack, type Stack } from "@ce/testing/stack";
import { CeClient } from "./client.js";
import { coreLifecycle } from "./lifecycle.js";

describe("CE on a 3-primary Redis Cluster", () => {
  let cluster: RedisClusterSet;
  let stack: Stack;
  let ce: CeClient;

  beforeAll(async () => {
    cluster = await startRedisCluster({ primaries: 3 });
    stack = await startStack({
      redisUrl: "redis://127.0.0.1:1",
      redisUsers: cluster.users,
      backend: "fork",
      config: { redis: cluster.ceConfig() },
    });
    ce = new CeClient(stack, stack.url);
  }, 120_000);

  afterAll(async () => {
    ce?.close();
    await stack?.stop();
    await cluster?.stop();
  });

  it("runs the core lifecycle: delegation, submit → FINISHED, bulk status, kill, restart, clean", async () => {
    await coreLifecycle(stack, ce);
  }, 60_000);

  it("keeps every CE key on the one primary that owns the prefix's slot", async () => {
    const sub = await ce.submit('&(executable="/bin/echo")(arguments="slot")');
    expect(sub.ids).toHaveLength(1);
    await ce.waitStates(sub.ids, ["FINISHED"], 30_000, stack.logs);
    const { options } = cluster.testClient();
    const sizes: number[] = [];
    for (const n of cluster.nodes) {
      const r = new Redis({ port: n.port, host: "127.0.0.1", ...(options.redisOptions as object) });
      sizes.push(await r.dbsize());
      r.disconnect();
    }
    // One node holds everything (job records, indexes, BullMQ queues); the others are empty.
    expect(sizes.filter((s) => s > 0)).toHaveLength(1);
    expect(Math.max(...sizes)).toBeGreaterThan(5);
    expect(stack.logs()).not.toMatch(/CROSSSLOT|non local key|MOVED/);
  }, 60_000);
});
