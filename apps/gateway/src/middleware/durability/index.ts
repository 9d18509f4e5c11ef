import type { MiddlewareHandler } from "hono";
import { ReplicaBarrier } from "@ce/store";
import type { AppEnv, Services } from "../../context.js";
import { StoreUnavailable } from "../../errors.js";

/**
 * `redis.waitReplicas` > 0: a successful answer to a request that may have written (anything but
 * GET/HEAD/OPTIONS) leaves only once that many replicas hold the writes (Redis WAIT on the shared
 * connection, which covers this request's writes; ReplicaBarrier shares rounds between requests).
 * Otherwise 503 + Retry-After: the outcome is unknown to the client, which retries (README
 * "What an acknowledgement promises").
 */
export function durability(services: Pick<Services, "config" | "redis">): MiddlewareHandler<AppEnv> {
  const { waitReplicas, waitTimeoutMs, mode } = services.config.redis;
  // WAIT has no key: a Cluster client sends it to any node, not the one that took the writes.
  if (waitReplicas > 0 && mode === "cluster") throw new Error("redis.waitReplicas needs redis.mode standalone or sentinel (WAIT cannot be routed in a Cluster)");
  const barrier = waitReplicas > 0 ? new ReplicaBarrier(services.redis, waitReplicas, waitTimeoutMs) : undefined;
  return async (c, next) => {
    await next();
    if (!barrier || c.res.status >= 300 || ["GET", "HEAD", "OPTIONS"].includes(c.req.method)) return;
    const confirmed = await barrier.confirm();
    if (confirmed < waitReplicas) {
      c.get("log")?.warn({ confirmed, waitReplicas, waitTimeoutMs }, "writes not confirmed by enough replicas: answering 503");
      throw new StoreUnavailable(`the writes were not confirmed by ${waitReplicas} replica(s) within ${waitTimeoutMs} ms`, 1, "NOT_REPLICATED");
    }
  };
}
