import type { MiddlewareHandler } from "hono";
import { ReplicaBarrier, SubmissionHolds } from "@ce/store";
import type { AppEnv, Services } from "../../context.js";
import { StoreUnavailable } from "../../errors.js";
import { RequestHold } from "./hold.js";

export { RequestHold } from "./hold.js";

const READS = new Set(["GET", "HEAD", "OPTIONS"]);

/**
 * What a successful answer to a request that may have written (anything but GET/HEAD/OPTIONS)
 * promises:
 * - `redis.waitReplicas` > 0: it leaves only once that many replicas hold the writes (Redis WAIT
 *   on the shared connection, which covers this request's writes; ReplicaBarrier shares rounds
 *   between requests). Otherwise 503 + Retry-After: the client retries (README "What an
 *   acknowledgement promises").
 * - Jobs run only for a 201 the client was given (at most once): a submission's jobs are created
 *   held (`c.get("hold")`, hold.ts); an answer other than 201 withdraws them before it leaves, a
 *   201 releases them once written whole to the socket, and a connection lost first withdraws them.
 */
export function durability(services: Pick<Services, "config" | "redis">): MiddlewareHandler<AppEnv> {
  const { waitReplicas, waitTimeoutMs, mode, prefix } = services.config.redis;
  // WAIT has no key: a Cluster client sends it to any node, not the one that took the writes.
  if (waitReplicas > 0 && mode === "cluster")
    throw new Error("redis.waitReplicas needs redis.mode standalone or sentinel (WAIT cannot be routed in a Cluster)");
  const barrier = waitReplicas > 0 ? new ReplicaBarrier(services.redis, waitReplicas, waitTimeoutMs) : undefined;
  const holds = new SubmissionHolds(services.redis, prefix);
  const holdMs = services.config.jobs.submissionHoldSeconds * 1000;
  const confirm = barrier ? async () => (await barrier.confirm()) >= waitReplicas : undefined;
  return async (c, next) => {
    if (READS.has(c.req.method)) return next();
    const hold = new RequestHold(holds, holdMs, c.get("log"), confirm);
    c.set("hold", hold);
    try {
      // Errors below become responses there (Hono's compose): the status says how it ended.
      await next();
    } catch (err) {
      await hold.withdraw("the request failed");
      throw err;
    }
    if (c.res.status >= 300) {
      await hold.withdraw(`answered ${c.res.status}`);
      return;
    }
    if (barrier) {
      const confirmed = await barrier.confirm();
      if (confirmed < waitReplicas) {
        c.get("log")?.warn({ confirmed, waitReplicas, waitTimeoutMs }, "writes not confirmed by enough replicas: answering 503");
        await hold.withdraw("writes not confirmed by enough replicas");
        throw new StoreUnavailable(
          `the writes were not confirmed by ${waitReplicas} replica(s) within ${waitTimeoutMs} ms`,
          1,
          "NOT_REPLICATED",
        );
      }
    }
    await hold.releaseAfter(c.env?.outgoing);
  };
}
