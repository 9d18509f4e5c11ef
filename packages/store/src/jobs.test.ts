import { Redis } from "ioredis";
import { afterAll, beforeAll, beforeEach, describe, expect, inject, it } from "vitest";
import { DelegationStore } from "./delegations.js";
import { JobStore, UNCHANGED, decodeFlatRecord, decodeRecord, encodeRecord, type JobRecord } from "./jobs.js";
import { runScript } from "./scripts.js";
import { Keys, ownerKey } from "./keys.js";
import { SessionBytes, UploadRanges } from "./quotas.js";
import { SecretBox } from "./secretbox.js";

// The job scripts (lua/create|update|remove.lua) against the real Redis, under a prefix of their own.
let redis: Redis;
let jobs: JobStore;
const prefix = `{jobs-test-${process.pid}}`;
const keys = new Keys(prefix);

async function clear() {
  const found = await redis.keys(`${prefix}*`);
  if (found.length) await redis.del(...found);
}

beforeAll(() => {
  redis = new Redis(inject("redisUrl"));
  jobs = new JobStore(redis, prefix);
});
beforeEach(clear);
afterAll(async () => {
  await clear();
  redis.disconnect();
});

let n = 0;
const rec = (owner = "alice", over: Partial<JobRecord> = {}): JobRecord => ({
  ...JobStore.newRecord({ id: `j${++n}z`, owner, queue: "q", backend: "fork", language: "xrsl", delegations: [], rerun: 0, lifetime: 60 }),
  ...over,
});

/** Every key under the prefix that still refers to `id` (as key name, member or field). */
async function mentions(id: string): Promise<string[]> {
  const out: string[] = [];
  for (const key of await redis.keys(`${prefix}*`)) {
    if (key.includes(id)) out.push(key);
    const type = await redis.type(key);
    if (type === "set" && (await redis.sismember(key, id))) out.push(key);
    if (type === "zset" && (await redis.zscore(key, id)) !== null) out.push(key);
    if (type === "hash" && (await redis.hexists(key, id))) out.push(key);
  }
  return out.sort();
}

describe("create (lua/create.lua)", () => {
  it("writes the record and every index under the keys of Keys", async () => {
    const r = rec();
    expect(await jobs.create([r], 10)).toBe(1);
    expect(await jobs.get(r.id)).toMatchObject({ id: r.id, owner: "alice", state: "ACCEPTED", rest: "ACCEPTING" });
    const ok = ownerKey("alice");
    expect(await mentions(r.id)).toEqual(
      [
        keys.advanceDue(),
        keys.all(),
        keys.internal("ACCEPTED"),
        keys.job(r.id),
        keys.owner(ok),
        keys.ownerRest(ok, "ACCEPTING"),
        keys.ownerStates(ok),
        keys.rest("ACCEPTING"),
      ].sort(),
    );
  });

  it("creates each record of a batch as given, whatever it shares with the first (fields differing, missing, or only in the first)", async () => {
    const a = rec("alice", { jobName: "a", summary: { stdout: "o" }, clientHost: "h1" });
    const b = rec("bob", { jobName: "b", state: "DELETED", rest: "WIPED" });
    const c = rec("alice", { jobName: "c", summary: { stdout: "o" }, clientHost: "h1", requestId: "r" });
    await jobs.markCreating([a.id, b.id, c.id]);
    expect(await jobs.create([a, b, c], 10)).toBe(3);
    for (const r of [a, b, c]) expect(await jobs.get(r.id)).toEqual(decodeRecord(encodeRecord(r)));
    expect(await redis.hexists(keys.job(b.id), "clientHost")).toBe(0);
    expect(await mentions(b.id)).toEqual(
      [
        keys.advanceDue(),
        keys.all(),
        keys.internal("DELETED"),
        keys.job(b.id),
        keys.owner(ownerKey("bob")),
        keys.ownerRest(ownerKey("bob"), "WIPED"),
        keys.ownerStates(ownerKey("bob")),
        keys.rest("WIPED"),
      ].sort(),
    );
    // The commit clears the creating marks of what it created.
    expect(await redis.zcard(keys.creating())).toBe(0);
  });

  it("is all-or-nothing under the CE-wide limit: nothing is written when fewer than minRequired fit", async () => {
    await jobs.create([rec()], 10);
    const batch = [rec(), rec(), rec()];
    expect(await jobs.createBounded(batch, { maxTotal: 3 })).toEqual({ created: 0, limitedBy: "total" });
    for (const r of batch) expect(await mentions(r.id)).toEqual([]);
    expect(await jobs.total()).toBe(1);
    // With minRequired 1 the prefix that fits is created, the rest not.
    expect(await jobs.createBounded(batch, { maxTotal: 3, minRequired: 1 })).toEqual({ created: 2, limitedBy: "total" });
    expect((await jobs.getMany(batch.map((r) => r.id))).map((r) => r?.id)).toEqual([batch[0]!.id, batch[1]!.id, undefined]);
  });

  it("refuses past the owner's quota, counting owners separately and WIPED jobs for nobody", async () => {
    const wiped = rec("bob", { state: "DELETED", rest: "WIPED" });
    expect(await jobs.create([rec("bob"), wiped], 10)).toBe(2);
    expect(await jobs.createBounded([rec("bob"), rec("bob")], { maxTotal: 10, maxPerOwner: 2 })).toEqual({
      created: 0,
      limitedBy: "owner",
    });
    expect(await jobs.heldBy("bob")).toBe(1);
    expect(await jobs.createBounded([rec("bob"), rec("carol"), rec("carol")], { maxTotal: 10, maxPerOwner: 2 })).toEqual({ created: 3 });
    expect(await jobs.heldBy("bob")).toBe(2);
    expect(await jobs.held()).toBe(4);
    expect(await jobs.total()).toBe(5);
  });
});

describe("update (lua/update.lua)", () => {
  it("refuses a stale expectation and leaves the record as it was", async () => {
    const r = rec();
    await jobs.create([r], 10);
    const moved = await jobs.update(r, { state: "PREPARING" }, { state: "ACCEPTED" });
    expect(moved?.state).toBe("PREPARING");
    // A second worker still holding the ACCEPTED copy loses the race.
    expect(await jobs.update(r, { state: "FINISHING" }, { state: "ACCEPTED" })).toBeUndefined();
    expect(await jobs.get(r.id)).toMatchObject({ state: "PREPARING", rest: "PREPARING" });
    expect(await redis.sismember(keys.internal("FINISHING"), r.id)).toBe(0);
  });

  it("answers undefined for a job that is gone, without re-creating it", async () => {
    const r = rec();
    expect(await jobs.update(r, { state: "PREPARING" })).toBeUndefined();
    expect(await mentions(r.id)).toEqual([]);
  });

  it("moves every index with the state, and removes explicitly cleared fields", async () => {
    const r = rec();
    await jobs.create([{ ...r, failure: "old" }], 10);
    const ok = ownerKey("alice");
    const next = await jobs.update(
      { ...r, failure: "old", state: "SUBMIT" },
      { state: "INLRMS", pending: false, lrms: "RUNNING", failure: undefined },
    );
    expect(next?.rest).toBe("RUNNING");
    expect(await mentions(r.id)).toEqual(
      [
        keys.advanceDue(),
        keys.all(),
        keys.internal("INLRMS"),
        keys.job(r.id),
        keys.owner(ok),
        keys.ownerRest(ok, "RUNNING"),
        keys.ownerStates(ok),
        keys.rest("RUNNING"),
      ].sort(),
    );
    expect(await redis.hexists(keys.job(r.id), "failure")).toBe(0);
    // Same internal state, different REST state: only the REST indexes move.
    await jobs.update(next!, { pending: true });
    expect(await redis.sismember(keys.internal("INLRMS"), r.id)).toBe(1);
    expect(await redis.sismember(keys.rest("RUNNING"), r.id)).toBe(0);
    expect(await redis.sismember(keys.ownerRest(ok, "EXECUTED"), r.id)).toBe(1);
    expect(await jobs.countOwnerRest(r.owner, ["EXECUTED", "RUNNING", "FINISHED"])).toBe(1);
    expect(await jobs.countOwnerRest(r.owner, ["RUNNING"])).toBe(0);
    expect(await jobs.countByRest(["EXECUTED", "RUNNING"])).toEqual({ EXECUTED: 1, RUNNING: 0 });
  });

  it("gives the session bytes back and drops upload bookkeeping when the job is wiped", async () => {
    const r = rec();
    await jobs.create([r], 10);
    const bytes = new SessionBytes(redis, prefix, { perJob: 1000, perOwner: 1000 });
    expect(await bytes.reserve("alice", r.id, 400)).toBeUndefined();
    await new UploadRanges(redis, prefix, { maxRanges: 8, maxFiles: 8, ttlMs: 60_000 }).add(r.id, "/f", 0, 1, 10);
    await jobs.update({ ...r, state: "FINISHED" }, { state: "DELETED" });
    expect(await bytes.usage("alice", r.id)).toEqual({ job: 0, owner: 0 });
    expect(await redis.exists(keys.uploads(r.id))).toBe(0);
    expect(await jobs.heldBy("alice")).toBe(0);
  });
});

describe("remove (lua/remove.lua)", () => {
  it("removes the record and every index, binding and quota entry of it — and nothing of other jobs", async () => {
    const [r, other] = [rec("alice", { delegations: ["d1", "d2"] }), rec("alice", { delegations: ["d1"] })];
    await jobs.create([r, other], 10);
    await new DelegationStore(redis, prefix, new SecretBox(SecretBox.generateKey())).bind(["d1", "d2"], [r.id, other.id]);
    const bytes = new SessionBytes(redis, prefix, { perJob: 1000, perOwner: 1000 });
    await bytes.reserve("alice", r.id, 300);
    await bytes.reserve("alice", other.id, 5);
    await new UploadRanges(redis, prefix, { maxRanges: 8, maxFiles: 8, ttlMs: 60_000 }).add(r.id, "/f", 0, 1, 10);
    await jobs.scheduleExpiry(r.id, Date.now());
    const moved = await jobs.update({ ...r, state: "FINISHING" }, { state: "FINISHED", outcome: "failed" });
    expect(moved?.rest).toBe("FAILED");
    expect((await mentions(r.id)).length).toBeGreaterThan(8);

    expect(await jobs.remove(r.id)).toBe(true);
    expect(await mentions(r.id)).toEqual([]);
    expect(await bytes.usage("alice", other.id)).toEqual({ job: 5, owner: 5 });
    expect(await redis.smembers(keys.delegJobs("d1"))).toEqual([other.id]);
    expect(await jobs.get(other.id)).toMatchObject({ id: other.id, state: "ACCEPTED" });
    expect(await jobs.remove(r.id)).toBe(false);
  });
});

describe("update refuses moves outside the table (packages/model ALLOWED_MOVES)", () => {
  it("ACCEPTED → INLRMS is refused before any write; allowed moves, parking and unparking pass", async () => {
    const job = rec();
    await jobs.create([job], 100);
    await expect(jobs.update(job, { state: "INLRMS" })).rejects.toMatchObject({ code: "ILLEGAL_STATE_MOVE" });
    expect((await jobs.get(job.id))?.state).toBe("ACCEPTED");
    const parked = await jobs.update(job, { pending: true });
    expect(parked?.pending).toBe(true);
    const unparked = await jobs.update(parked!, { pending: false });
    const prep = await jobs.update(unparked!, { state: "PREPARING" });
    expect(prep?.state).toBe("PREPARING");
    // A restart may only enter PENDING: FINISHED → ACCEPTED (not pending) is refused.
    const fin = { ...prep!, state: "FINISHED" as const };
    await expect(jobs.update(fin, { state: "ACCEPTED", pending: false })).rejects.toMatchObject({ code: "ILLEGAL_STATE_MOVE" });
  });
});

describe("statesOwnedBy (lua/status-many.lua)", () => {
  it("REST state per id in order for the owner's jobs; a missing id and another owner's job give undefined", async () => {
    const [a, b] = [rec("alice"), rec("bob")];
    await jobs.create([a, b], 100);
    await jobs.update(a, { pending: true });
    expect(await jobs.statesOwnedBy([b.id, "nope", a.id, b.id], "bob")).toEqual(["ACCEPTING", undefined, undefined, "ACCEPTING"]);
    expect(await jobs.statesOwnedBy([b.id, "nope", a.id, b.id], "alice")).toEqual([undefined, undefined, "ACCEPTED", undefined]);
    // The owner is compared exactly (no prefix, case or pattern match).
    expect(await jobs.statesOwnedBy([a.id, b.id], "alic")).toEqual([undefined, undefined]);
    expect(await jobs.statesOwnedBy([a.id], "ALICE")).toEqual([undefined]);
    expect(await jobs.statesOwnedBy([a.id], "alice*")).toEqual([undefined]);
    expect(await jobs.statesOwnedBy([], "alice")).toEqual([]);
  });
});

describe("decodeFlatRecord", () => {
  it("decodes HGETALL's flat list exactly as decodeRecord decodes the hash, and refuses what it refuses", () => {
    const full: JobRecord = {
      ...JobStore.newRecord({
        id: "j1",
        owner: "/CN=a, b",
        queue: "q",
        backend: "fork",
        language: "nordugrid:xrsl",
        delegations: ["d1", "d2"],
        rerun: 2,
        lifetime: 60,
      }),
      pending: true,
      exitCode: 0,
      failure: "x\ny",
      summary: { stdout: "o", rtes: ["A-1"] },
      fqans: ["/vo"],
      localUser: { account: "u", uid: 1, gid: 2 } as JobRecord["localUser"],
      killRequested: true,
      nodes: "",
    };
    const flatOf = (h: Record<string, string>) => Object.entries(h).flat();
    for (const h of [
      encodeRecord(full),
      { ...encodeRecord(full), delegations: "" },
      encodeRecord({ id: "j", owner: "o", state: "ACCEPTED", rest: "ACCEPTING" }),
    ]) {
      expect(decodeFlatRecord(flatOf(h))).toEqual(decodeRecord(h));
    }
    const bads: Record<string, string>[] = [
      { owner: "o", state: "ACCEPTED", rest: "ACCEPTING" },
      { id: "j", owner: "o", state: "NOPE", rest: "ACCEPTING" },
      { id: "j", owner: "", state: "ACCEPTED", rest: "ACCEPTING" },
      { id: "j", owner: "o", state: "ACCEPTED", rest: "x" },
    ];
    for (const bad of bads) {
      expect(decodeRecord(bad)).toBeUndefined();
      expect(decodeFlatRecord(flatOf(bad))).toBeUndefined();
    }
  });
});

describe("getMany (lua/get-many.lua)", () => {
  it("whole records per id in order, across chunks of 1,000; a missing id gives undefined", async () => {
    const recs = Array.from({ length: 1_005 }, () => rec("carol"));
    await jobs.create(recs, 10_000);
    const ids = [recs[0]!.id, "nope", ...recs.slice(1).map((r) => r.id)];
    const got = await jobs.getMany(ids);
    expect(got).toHaveLength(ids.length);
    expect(got[1]).toBeUndefined();
    expect(got[0]).toEqual(await jobs.get(recs[0]!.id));
    expect(got.at(-1)?.id).toBe(recs.at(-1)!.id);
    expect(got.filter(Boolean)).toHaveLength(1_005);
  });
});

describe("getManyFields (lua/get-many.lua with field names)", () => {
  it("the named fields decoded as getMany decodes them, in id order; missing and invalid records are undefined", async () => {
    const full = rec("dave", {
      jobName: "j <&> é",
      pending: false,
      state: "INLRMS",
      rest: "RUNNING",
      lrms: "RUNNING",
      exitCode: 0,
      failure: "a\nb",
      nodes: "n1,n2",
      delegations: ["d1", "d2"],
      summary: { stdout: "o", rtes: ["R"], slots: 2 },
      localUser: { account: "grid001", uid: 1, gid: 1, groups: [1], rule: "test" },
      fqans: ["/vo"],
      usedWallSeconds: 1.5,
      killRequested: true,
      clientHost: "",
    });
    const plain = rec("dave");
    await jobs.create([full, plain], 10);
    await redis.hset(keys.job(plain.id), "state", "BOGUS");
    const fields = [
      "jobName",
      "pending",
      "lrms",
      "exitCode",
      "failure",
      "nodes",
      "delegations",
      "summary",
      "localUser",
      "fqans",
      "usedWallSeconds",
      "killRequested",
      "clientHost",
      "outcome",
      "cleanupAt",
    ] as const;
    const [a, missing, bad] = await jobs.getManyFields([full.id, "nope", plain.id], fields);
    expect(missing).toBeUndefined();
    expect(bad).toBeUndefined();
    const whole = (await jobs.getMany([full.id]))[0]!;
    for (const f of [...fields, "id", "owner", "state", "rest"] as const) expect(a?.[f]).toEqual(whole[f]);
    expect(a?.clientHost).toBeUndefined();
    expect("updated" in a!).toBe(false);
    // No delegations stored: an empty list, as getMany gives.
    const [p2] = await jobs.getManyFields([rec("dave").id], ["delegations"]);
    expect(p2).toBeUndefined();
    const bare = rec("dave");
    await jobs.create([bare], 10);
    await redis.hdel(keys.job(bare.id), "delegations");
    expect((await jobs.getManyFields([bare.id], ["delegations"]))[0]?.delegations).toEqual([]);
  });
});

describe("record revision (lua/lib/rev.lua) and getManyFieldsSince", () => {
  const revOf = async (id: string) => Number(await redis.hget(keys.job(id), "rev"));

  it("starts at 1 and goes up with every change: update, request, delegation expiry; never back to a stale copy", async () => {
    const r = rec("erin", { mainDelegation: "d9", delegations: ["d9"] });
    await jobs.create([r], 10);
    expect(await revOf(r.id)).toBe(1);
    const seen = [1];
    const up = await jobs.update(r, { state: "PREPARING" });
    seen.push(await revOf(r.id));
    // A caller passing its own (stale) revision does not set it.
    await jobs.update(up!, { exitCode: 1, rev: 1 } as never);
    seen.push(await revOf(r.id));
    await jobs.request([{ action: "kill", jobId: r.id }]);
    seen.push(await revOf(r.id));
    await runScript(redis, "ceDelegExpiry", [keys.job(r.id)], ["d9", "12345"]);
    seen.push(await revOf(r.id));
    for (let i = 1; i < seen.length; i++) expect(seen[i]).toBeGreaterThan(seen[i - 1]!);
    // Even when the server clock is behind the stored revision, it still goes up.
    const ahead = Date.now() * 1000 * 10;
    await redis.hset(keys.job(r.id), "rev", String(ahead));
    await jobs.update((await jobs.get(r.id))!, { exitCode: 2 });
    expect(await revOf(r.id)).toBe(ahead + 1);
  });

  it("answers UNCHANGED only for a record still at the revision given; reads the rest", async () => {
    const a = rec("erin"),
      b = rec("erin");
    await jobs.create([a, b], 10);
    const fields = ["exitCode", "rev"] as const;
    const [a1, b1] = await jobs.getManyFields([a.id, b.id], fields);
    await jobs.update(b, { exitCode: 7 });
    const out = await jobs.getManyFieldsSince([a.id, b.id, "nope", a.id], fields, [a1!.rev, b1!.rev, 1, undefined]);
    expect(out[0]).toBe(UNCHANGED);
    expect(out[1]).toMatchObject({ id: b.id, exitCode: 7 });
    expect((out[1] as { rev: number }).rev).toBeGreaterThan(b1!.rev!);
    expect(out[2]).toBeUndefined();
    expect(out[3]).toMatchObject({ id: a.id, rev: 1 });
    await jobs.remove(a.id);
    expect(await jobs.getManyFieldsSince([a.id], fields, [1])).toEqual([undefined]);
  });
});
