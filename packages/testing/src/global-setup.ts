import type { GlobalSetupContext } from "vitest/node";
import { startRedis } from "./redis.js";

declare module "vitest" {
  export interface ProvidedContext {
    /** Logs in as the `ce-test` ACL user (CE rules + KEYS for fixture cleanup). */
    redisUrl: string;
    /** The CE's own ACL users (`gateway`, `jem`) with their passwords, for the Redis auth tests. */
    redisUsers: Record<"gateway" | "jem", { username: string; password: string }>;
    redisPort: number;
  }
}

// One real redis-server for the whole run, with the production ACL (no unauthenticated access);
// suites isolate themselves with their own key prefix.
export default async function setup({ provide }: GlobalSetupContext) {
  const redis = await startRedis();
  provide("redisUrl", redis.url);
  provide("redisUsers", redis.users);
  provide("redisPort", redis.port);
  process.env.CE_TEST_REDIS_URL = redis.url;
  return async () => {
    await redis.stop();
  };
}
