import { describe, expect, it } from "vitest";
import { AdvanceSet } from "./advance.js";
import { dropOrphanLeases } from "./advance-orphans.js";
import { Locks } from "./locks.js";
import { useTestRedis } from "./test-redis.js";

const t = useTestRedis();

describe("dropOrphanLeases", () => {
  it("ends the in-flight leases no look holds (a release lost at a failover); a rung job is claimable at once", async () => {
    const adv = new AdvanceSet(t.redis, t.prefix);
    const locks = new Locks(t.redis, t.prefix);
    await adv.ring(["a", "b"]);
    expect((await adv.claim(10, 30_000)).sort()).toEqual(["a", "b"]);
    // "a" is being looked at (its job lock is held); "b"'s look ended but its release never landed.
    const lease = await locks.tryAcquire("job:a", 30_000);
    await adv.ring(["b"]);
    expect(await adv.claim(10, 30_000)).toEqual([]); // held by the stale lease for 30 s
    expect(await dropOrphanLeases(t.redis, t.prefix)).toEqual(["b"]);
    expect(await adv.claim(10, 30_000)).toEqual(["b"]);
    expect((await adv.scoreOf("a")).inflight).toBeDefined();
    await lease!.release();
  });
});
