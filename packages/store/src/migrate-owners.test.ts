import { Redis } from "ioredis";
import { afterAll, beforeAll, beforeEach, describe, expect, inject, it } from "vitest";
import { tokenOwner } from "@ce/model";
import { DelegationStore } from "./delegations.js";
import { JobStore, type JobRecord } from "./jobs.js";
import { Keys, ownerKey } from "./keys.js";
import { PoolLeases } from "./leases.js";
import { migrateTokenOwners, moveTokenOwner } from "./migrate-owners.js";
import { SessionBytes } from "./quotas.js";
import { SecretBox } from "./secretbox.js";

// Records a gateway wrote before token owners were escaped (`<iss>/<sub>` with a `/` in sub),
// moved to the escaped owner against the real Redis: jobs and every index, delegations (secrets
// sealed again), pool leases. Run twice, run with records still changing, and with an owner two
// issuers could have written.
let redis: Redis;
let jobs: JobStore;
let delegs: DelegationStore;
let leases: PoolLeases;
const box = new SecretBox(SecretBox.generateKey());
const prefix = `{owners-test-${process.pid}}`;
const keys = new Keys(prefix);
const A = "https://idp.example";
const B = "https://idp.example/r";
const OLD = `${A}/q/y`; // what the old gateway made of iss A, sub "q/y"
const NEW = tokenOwner(A, "q/y");

async function clear() {
  const found = await redis.keys(`${prefix}*`);
  if (found.length) await redis.del(...found);
}
beforeAll(() => {
  redis = new Redis(inject("redisUrl"));
  jobs = new JobStore(redis, prefix);
  delegs = new DelegationStore(redis, prefix, box);
  leases = new PoolLeases(redis, prefix);
});
beforeEach(clear);
afterAll(async () => {
  await clear();
  redis.disconnect();
});

let n = 0;
const rec = (owner: string, over: Partial<JobRecord> = {}): JobRecord => ({
  ...JobStore.newRecord({ id: `m${++n}z`, owner, queue: "q", backend: "fork", language: "xrsl", delegations: [], rerun: 0, lifetime: 60 }),
  ...over,
});

async function oldOwnerHolds() {
  const d = await delegs.create(OLD, "jwt", { token: "the-token", expires: Date.now() + 3_600_000 });
  const x = await delegs.create(OLD, "x509", { privateKeyPem: "KEY" });
  await delegs.storeProxy(x, OLD, "PROXY", Date.now() + 3_600_000, "PUBLIC");
  const [j1, j2] = [rec(OLD, { mainDelegation: d, delegations: [d] }), rec(OLD)];
  await jobs.create([j1, j2], 100);
  expect(await new SessionBytes(redis, prefix, { perJob: 1e12, perOwner: 1e12 }).reserve(OLD, j1.id, 100)).toBeUndefined();
  const acct = await leases.lease(OLD, "pool", ["p001", "p002"]);
  return { d, x, j1, j2, acct };
}

describe("token owners move to the escaped form", () => {
  it("jobs, indexes, delegations and leases of the old owner are the new owner's afterwards, and nothing stays behind", async () => {
    const h = await oldOwnerHolds();
    expect(await jobs.getOwned(h.j1.id, NEW)).toBeUndefined(); // before: the new gateway's owner does not see them

    const r = await migrateTokenOwners(redis, prefix, box, [A]);
    expect(r.moved).toEqual([{ from: OLD, to: NEW, jobs: 2, delegations: 2, leases: 1 }]);

    expect((await jobs.getOwned(h.j1.id, NEW))?.ownerKey).toBe(ownerKey(NEW));
    expect((await jobs.list(NEW)).map((j) => j.id).sort()).toEqual([h.j1.id, h.j2.id].sort());
    expect(await jobs.list(NEW, [h.j1.rest])).toHaveLength(2);
    expect(await jobs.statesOwnedBy([h.j1.id, h.j2.id], NEW)).toEqual([h.j1.rest, h.j2.rest]);
    expect(await jobs.heldBy(NEW)).toBe(2);
    expect(await delegs.credential(NEW, h.d)).toMatchObject({ type: "jwt", token: "the-token" });
    expect(await delegs.credential(NEW, h.x)).toMatchObject({ type: "x509", proxyPem: "PROXY" });
    expect(await delegs.privateKey(h.x, NEW)).toBe("KEY");
    expect((await delegs.list(NEW)).map((d) => d.id).sort()).toEqual([h.d, h.x].sort());
    expect(await new SessionBytes(redis, prefix, { perJob: 1e12, perOwner: 1e12 }).usage(NEW, h.j1.id)).toEqual({ job: 100, owner: 100 });
    expect(await leases.holder(h.acct!)).toBe(NEW);
    expect(await leases.lease(NEW, "pool", ["p001", "p002"])).toBe(h.acct);

    expect(await jobs.list(OLD)).toEqual([]);
    expect(await delegs.list(OLD)).toEqual([]);
    expect(await delegs.credential(OLD, h.d)).toBeUndefined();
    expect(await redis.keys(`${prefix}:o:${ownerKey(OLD)}*`)).toEqual([]);
    expect(await redis.exists(keys.mapHeld(OLD))).toBe(0);
    expect(await redis.zscore(keys.mapTouched(), OLD)).toBeNull();

    // Again: nothing to do (the escaped owner has no `/` after its issuer).
    expect((await migrateTokenOwners(redis, prefix, box, [A])).moved).toEqual([]);
  });

  it("an owner two configured issuers could have written is reported and left alone; DNs and plain subs are never touched", async () => {
    const both = `${A}/r/x`; // A + "r/x" or B + "x": the collision the escaping ends
    const [j, dn, plain] = [rec(both), rec("/DC=org/CN=q/y"), rec(`${A}/u-1`)];
    await jobs.create([j], 10);
    await jobs.create([dn], 10);
    await jobs.create([plain], 10);
    const r = await migrateTokenOwners(redis, prefix, box, [A, B]);
    expect(r.moved).toEqual([]);
    expect(r.ambiguous).toEqual([{ owner: both, issuers: [A, B] }]);
    for (const x of [j, dn, plain]) expect((await jobs.getOwned(x.id, x.owner))?.id).toBe(x.id);
  });

  it("a job created for the old owner while the move runs is moved too, never split from the others", async () => {
    await oldOwnerHolds();
    // A gateway of the old version submitting at the same time as the migration.
    const racing = Array.from({ length: 20 }, () => rec(OLD));
    const [r] = await Promise.all([
      migrateTokenOwners(redis, prefix, box, [A]),
      (async () => {
        for (const x of racing) await jobs.create([x], 1000);
      })(),
    ]);
    expect(r.failed).toEqual([]);
    // Whatever the interleaving, a second pass (the next JEM start) leaves every job with the new owner.
    await migrateTokenOwners(redis, prefix, box, [A]);
    expect(await jobs.list(OLD)).toEqual([]);
    expect(await jobs.list(NEW)).toHaveLength(22);
    for (const x of racing) expect((await jobs.getOwned(x.id, NEW))?.ownerKey).toBe(ownerKey(NEW));
  });

  it("moveTokenOwner lays out exactly what the migration reverses", async () => {
    const h = await oldOwnerHolds();
    await moveTokenOwner(redis, prefix, box, OLD, NEW);
    await moveTokenOwner(redis, prefix, box, NEW, OLD);
    expect(await delegs.credential(OLD, h.d)).toMatchObject({ token: "the-token" });
    expect((await jobs.list(OLD)).length).toBe(2);
  });
});
