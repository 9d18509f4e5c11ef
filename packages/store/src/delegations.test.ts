import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { DelegationStore, sweepDelegations } from "./delegations.js";
import { SecretBox } from "./secretbox.js";

let redis: Redis;
let store: DelegationStore;
const prefix = `{deleg-test-${process.pid}}`;

beforeAll(() => {
  redis = new Redis(inject("redisUrl"));
  store = new DelegationStore(redis, prefix, new SecretBox(SecretBox.generateKey()));
});
afterAll(async () => {
  const keys = await redis.keys(`${prefix}*`);
  if (keys.length) await redis.del(...keys);
  redis.disconnect();
});

const H = 3600_000;

describe("DelegationStore", () => {
  it("keeps secrets sealed in Redis and scoped to the owner", async () => {
    const id = await store.create("alice", "x509", { privateKeyPem: "-----BEGIN PRIVATE KEY-----\nsecret\n-----END PRIVATE KEY-----\n" });
    const raw = await redis.hgetall(store.keys.deleg(id));
    expect(JSON.stringify(raw)).not.toContain("secret");
    expect(await store.get(id, "mallory")).toBeUndefined();
    expect(await store.privateKey(id, "alice")).toContain("secret");
    await store.storeProxy(id, "alice", "PROXY-PEM", Date.now() + H, "PUBLIC");
    expect(JSON.stringify(await redis.hgetall(store.keys.deleg(id)))).not.toContain("PROXY-PEM");
    expect(await store.credential("mallory", id)).toBeUndefined();
    expect(await store.credential("alice", id)).toMatchObject({ type: "x509", proxyPem: "PROXY-PEM" });
  });

  it("delete removes every secret and index entry", async () => {
    const id = await store.create("alice", "jwt", { token: "tok", expires: Date.now() + H });
    await store.bind([id], ["job-1"]);
    expect(await store.delete(id, "alice")).toBe(true);
    expect(await redis.exists(store.keys.deleg(id), store.keys.delegJobs(id))).toBe(0);
    expect(await redis.zscore(store.expiryIndex(), id)).toBeNull();
    expect((await store.list("alice")).map((d) => d.id)).not.toContain(id);
  });

  it("a renewal reaches the main-delegation expiry of bound job records", async () => {
    const id = await store.create("bob", "x509", { privateKeyPem: "k" });
    await redis.hset(store.keys.job("j-main"), { id: "j-main", mainDelegation: id, delegationExpires: "1" });
    await redis.hset(store.keys.job("j-file"), { id: "j-file", mainDelegation: "other", delegationExpires: "1" });
    await store.bind([id], ["j-main", "j-file", "j-gone"]);
    const exp = Date.now() + 5 * H;
    await store.storeProxy(id, "bob", "P", exp, "pub");
    expect(await redis.hget(store.keys.job("j-main"), "delegationExpires")).toBe(String(exp));
    expect(await redis.hget(store.keys.job("j-file"), "delegationExpires")).toBe("1");
    expect(await redis.exists(store.keys.job("j-gone"))).toBe(0);
  });
});

describe("sweepDelegations", () => {
  it("removes expired delegations after the grace period and abandoned slots", async () => {
    const now = Date.now();
    const fresh = await store.create("carol", "x509", { privateKeyPem: "k" });
    const abandoned = await store.create("carol", "x509", { privateKeyPem: "k" });
    await redis.zadd(store.pendingIndex(), now - 25 * H, abandoned);
    const live = await store.create("carol", "jwt", { token: "t", expires: now + H });
    const expiredLong = await store.create("carol", "jwt", { token: "t", expires: now - 48 * H });
    const expiredRecently = await store.create("carol", "jwt", { token: "t", expires: now - H });
    // A renewal whose CSR was never answered: the delegation stays, the pending key goes.
    const renewing = await store.create("carol", "x509", { privateKeyPem: "k1" });
    await store.storeProxy(renewing, "carol", "P", now + 10 * H, "pub");
    await store.replaceKey(renewing, "carol", "k2");
    await redis.zadd(store.pendingIndex(), now - 25 * H, renewing);

    const res = await sweepDelegations(store, now, { pendingLifetimeSeconds: 24 * 3600 });
    expect(res.removed.sort()).toEqual([abandoned, expiredLong].sort());
    expect(res.abandonedRenewals).toEqual([renewing]);
    const left = (await store.list("carol")).map((d) => d.id);
    for (const id of [fresh, live, expiredRecently, renewing]) expect(left).toContain(id);
    expect(await store.privateKey(renewing, "carol")).toBeUndefined();
    expect(await store.credential("carol", renewing)).toMatchObject({ proxyPem: "P" });
    expect((await store.get(renewing, "carol"))?.awaitingCertificate).toBe(false);

    const again = await sweepDelegations(store, now + H / 2, { pendingLifetimeSeconds: 24 * 3600, expiredGraceSeconds: 0 });
    expect(again.removed).toEqual([expiredRecently]);
  });
});
