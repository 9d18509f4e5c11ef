import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AdvanceSet } from "./advance.js";
import { SubmissionHolds } from "./holds.js";
import { JobStore, type JobRecord } from "./jobs.js";
import { useTestRedis } from "./test-redis.js";
import { quietPeriod } from "@ce/testing";

// lua/create.lua (held records), lua/hold-release.lua and lua/hold-withdraw.lua against the real Redis.
const t = useTestRedis("hold");
let jobs: JobStore;
let holds: SubmissionHolds;
let adv: AdvanceSet;
let n = 0;

beforeAll(() => {
  jobs = new JobStore(t.redis, t.prefix);
  holds = new SubmissionHolds(t.redis, t.prefix);
  adv = new AdvanceSet(t.redis, t.prefix);
});

const rec = (over: Partial<JobRecord> = {}): JobRecord => ({
  ...JobStore.newRecord({
    id: `h${++n}x`,
    owner: "alice",
    queue: "q",
    backend: "fork",
    language: "xrsl",
    delegations: [],
    rerun: 0,
    lifetime: 60,
  }),
  ...over,
});

/** Records of one request created held until `until`; an optional second subscriber sees the bell. */
async function createHeld(count: number, until: number, over: Partial<JobRecord> = {}): Promise<{ key: string; ids: string[] }> {
  const key = SubmissionHolds.newKey();
  const records = Array.from({ length: count }, () => rec({ hold: key, ...over }));
  const r = await jobs.createBounded(records, {
    maxTotal: 1_000,
    holdUntil: until,
    admittedDue: over.state === "PREPARING" ? Date.now() + 600_000 : undefined,
  });
  expect(r.created).toBe(count);
  return { key, ids: records.map((x) => x.id) };
}

describe("submission holds", () => {
  let sub: typeof t.redis;
  const bells: number[] = [];
  beforeAll(async () => {
    sub = t.redis.duplicate();
    await sub.subscribe(adv.keys.advanceBell());
    sub.on("message", () => bells.push(Date.now()));
  });
  afterAll(() => sub.disconnect());

  it("a held job is due only at the hold deadline (no bell); the release makes it due at once, in one call per request", async () => {
    const until = Date.now() + 60_000;
    bells.length = 0;
    const { key, ids } = await createHeld(3, until);
    for (const id of ids) {
      expect((await jobs.get(id))?.hold).toBe(key);
      expect((await adv.scoreOf(id)).due).toBe(until);
    }
    expect(await t.redis.zscore(holds.keys.holds(), key)).toBe(String(until));
    await quietPeriod(50, "held jobs must not ring the bell");
    expect(bells).toEqual([]);
    expect(await holds.release(key, ids)).toBe(true);
    for (const id of ids) {
      expect((await jobs.get(id))?.hold).toBeUndefined();
      expect((await adv.scoreOf(id)).due).toBeLessThanOrEqual(Date.now());
    }
    expect(await t.redis.zscore(holds.keys.holds(), key)).toBeNull();
    // Released once: a withdrawal now finds nothing to withdraw.
    expect(await holds.withdraw(key, ids)).toBe(false);
    expect((await holds.expire(key, until + 1)).verdict).toBe("ended");
  });

  it("a job admitted at creation goes to its upload deadline on release, unless an upload rang it during the hold", async () => {
    const until = Date.now() + 60_000;
    const { key, ids } = await createHeld(2, until, { state: "PREPARING", rest: "PREPARING" });
    await adv.ring([ids[1]!]); // an upload completed while the answer was still on its way
    const admittedDue = Date.now() + 600_000;
    expect(await holds.release(key, ids, admittedDue)).toBe(true);
    expect((await adv.scoreOf(ids[0]!)).due).toBe(admittedDue);
    expect((await adv.scoreOf(ids[1]!)).due).toBeLessThanOrEqual(Date.now());
  });

  it("a withdrawn request is never released: the jobs keep their hold (the JEM fails them) and are due at once", async () => {
    const until = Date.now() + 60_000;
    const { key, ids } = await createHeld(2, until);
    expect(await holds.withdraw(key, ids)).toBe(true);
    expect(await holds.withdraw(key, ids)).toBe(false);
    expect(await holds.release(key, ids)).toBe(false);
    for (const id of ids) {
      expect((await jobs.get(id))?.hold).toBe(key);
      expect((await adv.scoreOf(id)).due).toBeLessThanOrEqual(Date.now());
    }
  });

  it("expire withdraws only past the deadline, and exactly once among concurrent JEMs", async () => {
    const until = Date.now() + 60_000;
    const { key } = await createHeld(1, until);
    expect(await holds.expire(key, until - 1)).toEqual({ verdict: "held", until });
    const verdicts = await Promise.all(Array.from({ length: 5 }, () => holds.expire(key, until)));
    expect(verdicts.filter((v) => v.verdict === "withdrawn")).toHaveLength(1);
    expect(verdicts.filter((v) => v.verdict === "ended")).toHaveLength(4);
  });

  it("refuses held records without a deadline, writing nothing", async () => {
    const r = rec({ hold: "k" });
    await expect(jobs.createBounded([r], { maxTotal: 1_000 })).rejects.toThrow(/held without a deadline/);
    expect(await jobs.get(r.id)).toBeUndefined();
  });
});
