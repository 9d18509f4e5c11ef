import { randomBytes } from "node:crypto";
import { Redis } from "ioredis";
import { afterAll, beforeAll, inject } from "vitest";

/**
 * For the store's tests: a connection to the test redis-server and a fresh key prefix (a hash tag),
 * whose keys are deleted after the file's tests. Read `t.redis` inside tests (set in beforeAll).
 */
export function useTestRedis(tag = "t"): { redis: Redis; prefix: string } {
  const t = { redis: undefined as unknown as Redis, prefix: `{${tag}${randomBytes(6).toString("hex")}}` };
  beforeAll(() => {
    t.redis = new Redis(inject("redisUrl"));
  });
  afterAll(async () => {
    const keys = await t.redis.keys(`${t.prefix}*`);
    if (keys.length) await t.redis.del(...keys);
    t.redis.disconnect();
  });
  return t;
}
