import type { GlobalSetupContext } from "vitest/node";
import { startRedis } from "./redis-server.js";

declare module "vitest" {
  export interface ProvidedContext {
    redisUrl: string;
  }
}

// One real redis-server for the whole run; suites isolate themselves with their own key prefix.
export default async function setup({ provide }: GlobalSetupContext) {
  const redis = await startRedis();
  provide("redisUrl", redis.url);
  process.env.CE_TEST_REDIS_URL = redis.url;
  return async () => {
    await redis.stop();
  };
}
