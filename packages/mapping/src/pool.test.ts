import { randomBytes } from "node:crypto";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { JobStore } from "@ce/store";
import { onJobWiped, sweepLeases } from "./index.js";
import { PoolLeases } from "@ce/store";

let redis: Redis;
const prefix = () => `{map-${randomBytes(4).toString("hex")}}`;
const ACCOUNTS = ["g01", "g02", "g03", "g04", "g05"];

beforeAll(() => {
  redis = new Redis(inject("redisUrl"));
});
afterAll(async () => {
  await redis.quit();
});

/** A real job record of `owner` (the release decision reads the job store's own indexes). */
async function job(store: JobStore, owner: string, id = randomBytes(6).toString("hex")) {
  const r = JobStore.newRecord({ id, owner, queue: "main", backend: "fork", language: "xrsl", delegations: [], rerun: 0, lifetime: 60 });
  expect(await store.create([r], 1000)).toBe(1);
  return r;
}

describe("pool leases", () => {
  it("two identities get two accounts; the same identity gets its account back", async () => {
    const p = new PoolLeases(redis, prefix());
    const a = await p.lease("/CN=alice", "pool", ACCOUNTS);
    const b = await p.lease("/CN=bob", "pool", ACCOUNTS);
    expect(a).toBe("g01");
    expect(b).toBe("g02");
    expect(await p.lease("/CN=alice", "pool", ACCOUNTS)).toBe("g01");
    expect(await p.holder("g02")).toBe("/CN=bob");
  });

  it("50 parallel callers (25 identities, each twice) never share an account", async () => {
    const p = new PoolLeases(redis, prefix());
    const pool = Array.from({ length: 40 }, (_, i) => `p${i}`);
    const ids = Array.from({ length: 25 }, (_, i) => `/CN=user${i}`);
    // Separate connections, so the calls really interleave at the server.
    const conns = Array.from({ length: 10 }, () => new Redis(inject("redisUrl")));
    try {
      const leases = conns.map((c) => new PoolLeases(c, p.keys.prefix));
      const got = await Promise.all(
        [...ids, ...ids].map((id, i) => leases[i % leases.length]!.lease(id, "pool", pool).then((acct) => ({ id, acct }))),
      );
      const byId = new Map<string, string>();
      for (const { id, acct } of got) {
        expect(acct).toBeDefined();
        if (byId.has(id)) expect(acct).toBe(byId.get(id)); // same identity, same account
        byId.set(id, acct!);
      }
      expect(new Set(byId.values()).size).toBe(25); // one account per identity
      const holders = await redis.hgetall(p.keys.mapLeases());
      expect(Object.keys(holders)).toHaveLength(25);
      for (const [acct, id] of Object.entries(holders)) expect(byId.get(id)).toBe(acct);
    } finally {
      await Promise.all(conns.map((c) => c.quit()));
    }
  });

  it("50 parallel identities for 20 accounts: exactly 20 leased, each once, the other 30 refused", async () => {
    const p = new PoolLeases(redis, prefix());
    const pool = Array.from({ length: 20 }, (_, i) => `q${i}`);
    const conns = Array.from({ length: 10 }, () => new Redis(inject("redisUrl")));
    try {
      const got = await Promise.all(
        Array.from({ length: 50 }, (_, i) => new PoolLeases(conns[i % 10]!, p.keys.prefix).lease(`/CN=u${i}`, "pool", pool)),
      );
      const leased = got.filter((a): a is string => a !== undefined);
      expect(leased).toHaveLength(20);
      expect(new Set(leased).size).toBe(20);
      expect(Object.keys(await redis.hgetall(p.keys.mapLeases())).sort()).toEqual([...pool].sort());
    } finally {
      await Promise.all(conns.map((c) => c.quit()));
    }
  });

  it("an exhausted pool leases nothing; a freed account goes to the next identity", async () => {
    const pfx = prefix();
    const p = new PoolLeases(redis, pfx);
    expect(await p.lease("/CN=a", "small", ["x1", "x2"])).toBe("x1");
    expect(await p.lease("/CN=b", "small", ["x1", "x2"])).toBe("x2");
    expect(await p.lease("/CN=c", "small", ["x1", "x2"])).toBeUndefined();
    expect(await p.release("/CN=a", 0)).toEqual({ released: 1 }); // no jobs at all
    expect(await p.lease("/CN=c", "small", ["x1", "x2"])).toBe("x1");
  });

  it("an account in two pools is still leased to one identity only", async () => {
    const p = new PoolLeases(redis, prefix());
    expect(await p.lease("/CN=a", "one", ["shared", "o2"])).toBe("shared");
    expect(await p.lease("/CN=b", "two", ["shared", "t2"])).toBe("t2");
    expect(await p.lease("/CN=a", "two", ["shared", "t2"])).toBe("shared"); // a's own, through the other pool
  });

  it("is released only after the identity's last job is wiped, and not within the grace time", async () => {
    const pfx = prefix();
    const p = new PoolLeases(redis, pfx);
    const store = new JobStore(redis, pfx);
    const owner = "/DC=org/CN=Jane Doe";
    expect(await p.lease(owner, "pool", ACCOUNTS)).toBe("g01");
    const j1 = await job(store, owner);
    const j2 = await job(store, owner);
    expect(await p.release(owner, 0)).toEqual({ kept: "jobs" });

    // j1 wiped (FINISHED → DELETED = REST WIPED), j2 still there.
    const f1 = await store.update({ ...j1, state: "FINISHING" }, { state: "FINISHED", outcome: "success" });
    await store.update(f1!, { state: "DELETED" });
    await onJobWiped(redis, pfx, owner, { leaseGraceSeconds: 0 } as never);
    expect(await p.holder("g01")).toBe(owner);

    // j2 removed outright (client clean): no job left but the WIPED one.
    await store.remove(j2.id);
    expect(await p.release(owner, 60_000)).toEqual({ kept: "grace" }); // leased a moment ago
    await onJobWiped(redis, pfx, owner, { leaseGraceSeconds: 0 } as never);
    expect(await p.holder("g01")).toBeUndefined();
    expect(await redis.exists(p.keys.mapHeld(owner))).toBe(0);
    // Another identity can now have it.
    expect(await p.lease("/CN=next", "pool", ACCOUNTS)).toBe("g01");
  });

  it("a new lease in the grace time keeps the account for a submission that has not committed yet", async () => {
    const pfx = prefix();
    const p = new PoolLeases(redis, pfx);
    const now = Date.now();
    await p.lease("/CN=slow", "pool", ACCOUNTS, now);
    // The last job of the same identity is wiped just now, before the new submission commits.
    expect(await p.release("/CN=slow", 600_000, now + 1_000)).toEqual({ kept: "grace" });
    expect(await p.holder("g01")).toBe("/CN=slow");
  });

  it("a commit whose lease was released after the mapping creates nothing, whatever the grace time", async () => {
    const pfx = prefix();
    const p = new PoolLeases(redis, pfx);
    const store = new JobStore(redis, pfx);
    const slow = "/CN=slow";
    // Mapped to g01, then (before the commit) its last job is wiped with no grace: released and handed on.
    expect(await p.lease(slow, "pool", ACCOUNTS)).toBe("g01");
    expect(await p.release(slow, 0)).toEqual({ released: 1 });
    expect(await p.lease("/CN=next", "pool", ACCOUNTS)).toBe("g01");
    const r = JobStore.newRecord({
      id: randomBytes(6).toString("hex"),
      owner: slow,
      queue: "main",
      backend: "fork",
      language: "xrsl",
      delegations: [],
      rerun: 0,
      lifetime: 60,
    });
    expect(await store.createBounded([r], { maxTotal: 1000, lease: { account: "g01", identity: slow } })).toEqual({
      created: 0,
      limitedBy: "lease",
    });
    expect(await store.get(r.id)).toBeUndefined();
    // The lease holder's own commit goes through, and from then on the lease is kept for its job.
    const n = JobStore.newRecord({
      id: randomBytes(6).toString("hex"),
      owner: "/CN=next",
      queue: "main",
      backend: "fork",
      language: "xrsl",
      delegations: [],
      rerun: 0,
      lifetime: 60,
    });
    expect(await store.createBounded([n], { maxTotal: 1000, lease: { account: "g01", identity: "/CN=next" } })).toEqual({ created: 1 });
    expect(await p.release("/CN=next", 0)).toEqual({ kept: "jobs" });
  });

  it("the sweep frees leases nobody released (no jobs, past the grace time) and keeps the others", async () => {
    const pfx = prefix();
    const p = new PoolLeases(redis, pfx);
    const store = new JobStore(redis, pfx);
    const old = Date.now() - 3_600_000;
    await p.lease("/CN=idle", "pool", ACCOUNTS, old);
    await p.lease("/CN=busy", "pool", ACCOUNTS, old);
    await p.lease("/CN=fresh", "pool", ACCOUNTS);
    await job(store, "/CN=busy");
    expect(await sweepLeases(redis, pfx, { leaseGraceSeconds: 600 } as never)).toBe(1);
    expect(await p.holder("g01")).toBeUndefined();
    expect(await p.holder("g02")).toBe("/CN=busy");
    expect(await p.holder("g03")).toBe("/CN=fresh");
  });

  it("an account removed from the pool's configuration stays leased until release, the identity gets a current one", async () => {
    const p = new PoolLeases(redis, prefix());
    expect(await p.lease("/CN=a", "pool", ["old1", "k1"])).toBe("old1");
    expect(await p.lease("/CN=a", "pool", ["k1", "k2"])).toBe("k1");
    expect(await p.holder("old1")).toBe("/CN=a");
    expect(await p.release("/CN=a", 0)).toEqual({ released: 2 });
    expect(await p.holder("old1")).toBeUndefined();
  });
  it("an account that is not clean keeps the lease (the next identity gets another); the scrub runs only once the release is due", async () => {
    const pfx = prefix();
    const p = new PoolLeases(redis, pfx);
    const store = new JobStore(redis, pfx);
    const owner = "/CN=daemon owner";
    expect(await p.lease(owner, "pool", ACCOUNTS)).toBe("g01");
    const scrubbed: string[] = [];
    let dirty: string | undefined = "1 process(es) of g01 could not be ended";
    const scrub = async (a: string) => {
      scrubbed.push(a);
      return dirty;
    };
    const j = await job(store, owner);
    // A job left: nothing of the account is touched.
    expect(await p.release(owner, 0, Date.now(), scrub)).toEqual({ kept: "jobs" });
    expect(scrubbed).toEqual([]);
    await store.remove(j.id);
    expect(await p.release(owner, 0, Date.now(), scrub)).toEqual({ kept: "dirty", reason: dirty });
    expect(scrubbed).toEqual(["g01"]);
    expect(await p.holder("g01")).toBe(owner);
    expect(await p.lease("/CN=next", "pool", ACCOUNTS)).toBe("g02");
    // The sweep tries again; clean now, the account goes.
    expect(await sweepLeases(redis, pfx, { leaseGraceSeconds: 0 } as never, async (a) => (a === "g01" ? dirty : undefined))).toBe(1); // /CN=next's g02 only
    expect(await p.holder("g01")).toBe(owner);
    dirty = undefined;
    expect(await sweepLeases(redis, pfx, { leaseGraceSeconds: 0 } as never, scrub)).toBe(1);
    expect(await p.holder("g01")).toBeUndefined();
    expect(await p.lease("/CN=third", "pool", ACCOUNTS)).toBe("g01");
  });
});
