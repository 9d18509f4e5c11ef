import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { JemHeartbeats, readJobAges, voOf } from "./health.js";
import { JobStore } from "./jobs.js";

// lua/job-ages.lua and the heartbeat hash against the real Redis, under a prefix of their own.
const prefix = `{health-test-${process.pid}}`;
let redis: Redis;

beforeAll(() => {
  redis = new Redis(inject("redisUrl"));
});
afterAll(async () => {
  let cursor = "0";
  do {
    const [next, keys] = await redis.scan(cursor, "MATCH", `${prefix}*`, "COUNT", 1000);
    if (keys.length) await redis.del(...keys);
    cursor = next;
  } while (cursor !== "0");
  redis.disconnect();
});

describe("JEM heartbeats", () => {
  it("keeps each JEM's last beat and interval, and forgets JEMs silent for an hour", async () => {
    const beats = new JemHeartbeats(redis, prefix);
    const now = Date.now();
    await beats.beat("old:1", 5000, now - 2 * 3_600_000);
    await beats.beat("a:1", 1000, now);
    expect((await beats.read()).sort((x, y) => x.jem.localeCompare(y.jem))).toEqual([{ jem: "a:1", at: now, everyMs: 1000 }]);
    await beats.forget("a:1");
    expect(await beats.read()).toEqual([]);
  });
});

describe("job ages", () => {
  it("counts jobs per VO per state, the oldest unparked job and the soonest delegation expiry", async () => {
    const store = new JobStore(redis, prefix);
    const rec = (id: string, fqans?: string[]) => ({
      ...JobStore.newRecord({
        id,
        owner: "/CN=u",
        queue: "main",
        backend: "fork",
        language: "xrsl",
        delegations: [],
        rerun: 0,
        lifetime: 60,
      }),
      ...(fqans ? { fqans } : {}),
    });
    await store.create([rec("a1", ["/atlas/Role=production", "/atlas"]), rec("a2", ["/atlas"]), rec("d1", ["/dteam"]), rec("n1")], 100);
    const t0 = Date.now() - 3_600_000;
    for (const [id, since, extra] of [
      ["a1", t0, { delegationExpires: t0 + 7_200_000 }],
      ["a2", t0 + 1000, {}],
      ["d1", t0 - 5000, { pending: true }],
      ["n1", t0 + 2000, {}],
    ] as const) {
      const cur = (await store.get(id))!;
      await store.update(cur, { stateSince: since, ...extra });
    }
    const ages = await readJobAges(redis, prefix, ["atlas"]);
    expect(ages.ACCEPTED).toEqual({
      jobs: 4,
      oldestSince: t0,
      soonestDelegationExpiry: t0 + 7_200_000,
      truncated: false,
      byVo: { atlas: 2, other: 1, none: 1 },
    });
    expect(ages.INLRMS).toMatchObject({ jobs: 0, oldestSince: undefined, byVo: {} });
    expect((await readJobAges(redis, prefix, [], { states: ["ACCEPTED"], maxPerState: 2 })).ACCEPTED).toMatchObject({
      jobs: 2,
      truncated: true,
    });
  });

  it("takes the VO from the first FQAN", () => {
    expect(voOf(["/vo.example.org/Role=pilot"])).toBe("vo.example.org");
    expect(voOf([])).toBeUndefined();
    expect(voOf(undefined)).toBeUndefined();
  });
});
