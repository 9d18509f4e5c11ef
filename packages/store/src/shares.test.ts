import { describe, expect, it } from "vitest";
import { JobStore, type JobRecord } from "./jobs.js";
import { Keys } from "./keys.js";
import { jobVo, parseShareCounts } from "./shares.js";
import { useTestRedis } from "./test-redis.js";

// The GLUE2 share counters (Keys.shareCounts), kept by lua/create|update|remove.lua, against the real Redis.
const t = useTestRedis("shares");

let n = 0;
const rec = (queue: string, fqans?: string[]): JobRecord =>
  JobStore.newRecord({
    id: `s${++n}`,
    owner: "alice",
    queue,
    backend: "slurm",
    language: "xrsl",
    delegations: [],
    rerun: 0,
    lifetime: 60,
    fqans,
  });

const byShare = async (jobs: JobStore) => Object.fromEntries((await jobs.shareCounts()).map((c) => [`${c.queue}|${c.vo}`, c.byRest]));

describe("jobVo", () => {
  it("takes the whole VO of the primary FQAN or token group, lower-cased", () => {
    expect(jobVo(["/vo.example.org/Role=pilot", "/atlas"])).toBe("vo.example.org");
    expect(jobVo(["/ATLAS/lcg1"])).toBe("atlas");
    expect(jobVo(["/my-vo_2"])).toBe("my-vo_2");
    expect(jobVo(undefined)).toBeUndefined();
    expect(jobVo([])).toBeUndefined();
    // Not a VO name: such a job counts in its queue's share only.
    expect(jobVo(["/a b"])).toBeUndefined();
    expect(jobVo(["/x|y"])).toBeUndefined();
    expect(jobVo(["noslash"])).toBeUndefined();
  });
});

describe("share counters (lua/create|update|remove.lua)", () => {
  it("count each job under its queue and VO, move with its REST state and go at removal", async () => {
    const jobs = new JobStore(t.redis, t.prefix);
    const a = rec("main", ["/vo.example.org/Role=pilot"]);
    const b = rec("main", ["/atlas"]);
    const c = rec("long", ["/atlas"]);
    const d = rec("main");
    expect(await jobs.create([a, b, c, d], 100)).toBe(4);
    expect(await byShare(jobs)).toEqual({
      "main|vo.example.org": { ACCEPTING: 1 },
      "main|atlas": { ACCEPTING: 1 },
      "long|atlas": { ACCEPTING: 1 },
      "main|": { ACCEPTING: 1 },
    });

    const a1 = await jobs.update(a, { state: "PREPARING" });
    const a2 = await jobs.update(a1!, { state: "SUBMIT" });
    const a3 = await jobs.update(a2!, { state: "INLRMS", lrms: "QUEUING" });
    await jobs.update(a3!, { lrms: "RUNNING" });
    // A change that leaves the REST state alone moves nothing.
    await jobs.update(b, { jobName: "renamed" });
    expect(await byShare(jobs)).toMatchObject({ "main|vo.example.org": { RUNNING: 1 }, "main|atlas": { ACCEPTING: 1 } });
    // Fields at zero are removed: the hash holds only live counts.
    const fields = await t.redis.hkeys(new Keys(t.prefix).shareCounts());
    expect(fields.sort()).toEqual(
      ["long|atlas|ACCEPTING", "main||ACCEPTING", "main|atlas|ACCEPTING", "main|vo.example.org|RUNNING"].sort(),
    );

    expect(await jobs.remove(a.id)).toBe(true);
    expect(await jobs.remove(d.id)).toBe(true);
    expect(await byShare(jobs)).toEqual({ "main|atlas": { ACCEPTING: 1 }, "long|atlas": { ACCEPTING: 1 } });
  });

  it("ignore records without a share (made before the counters existed) and never let an update change the share", async () => {
    const jobs = new JobStore(t.redis, t.prefix);
    const key = new Keys(t.prefix).shareCounts();
    await t.redis.del(key);
    const old = rec("main", ["/atlas"]);
    delete old.share;
    await jobs.create([old], 100);
    const moved = await jobs.update(old, { state: "PREPARING" });
    expect(moved).toBeDefined();
    await jobs.remove(old.id);
    expect(await t.redis.hgetall(key)).toEqual({});

    const r = rec("main", ["/atlas"]);
    await jobs.create([r], 100);
    await jobs.update(r, { state: "PREPARING", share: "other|x" } as never);
    expect(await t.redis.hget(new Keys(t.prefix).job(r.id), "share")).toBe("main|atlas");
    expect(await byShare(jobs)).toEqual({ "main|atlas": { PREPARING: 1 } });
  });
});

describe("parseShareCounts", () => {
  it("skips malformed fields and non-positive counts", () => {
    expect(
      parseShareCounts({
        "q|vo|RUNNING": "2",
        "q||QUEUING": "1",
        "q|vo|NOPE": "3",
        bad: "1",
        "q|vo": "1",
        "q|x|RUNNING": "0",
        "q|y|RUNNING": "z",
      }),
    ).toEqual([
      { queue: "q", vo: "vo", byRest: { RUNNING: 2 } },
      { queue: "q", vo: "", byRest: { QUEUING: 1 } },
    ]);
  });
});
