import type { Redis } from "ioredis";
import { Keys } from "./keys.js";
import { runScript } from "./scripts.js";

/**
 * Ends the work-list leases (AdvanceSet in-flight set) of jobs no look is working on (no job lock
 * held), and returns their ids. A release lost with the old primary at a failover otherwise keeps
 * its job from being claimed, rung or not, until the lease runs out (30 s). The JEM runs it before
 * ringing every active job (boot, end of a Redis outage episode, a reconnect).
 */
export async function dropOrphanLeases(redis: Redis, prefix: string): Promise<string[]> {
  const keys = new Keys(prefix);
  return (await runScript(redis, "ceAdvanceOrphans", [keys.advanceInflight()], [keys.lock("job:")])) as string[];
}
