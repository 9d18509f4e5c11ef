import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { JobStore, type JobRecord } from "@ce/store";
import { startTestGateway, type TestGateway } from "./harness.js";
import { quietPeriod } from "@ce/testing";

/*
 * /info's shares from the CE's own counters (Keys.shareCounts): two queues, jobs of two VOs and
 * of none, fork slots from configuration. Records are written straight into the store, as the
 * gateway would at submission (JobStore.newRecord) and the JEM on each state change.
 */
let t: TestGateway;
beforeAll(async () => {
  t = await startTestGateway(inject("redisUrl"), {
    lrms: { backend: "fork", fork: { slots: 6 } },
    jobs: {
      queues: [
        { name: "main", allow: ["vo:atlas", "fqan:/vo.example.org/*"], benchmarks: { HEPscore23: 10.5 } },
        { name: "long", vos: ["ATLAS"] },
        { name: "open" },
      ],
    },
  });
});
afterAll(async () => t?.close());

type Share = {
  ID: string;
  Name: string;
  RunningJobs: string;
  WaitingJobs: string;
  StagingJobs: string;
  FreeSlots: string;
  UsedSlots: string;
  MappingPolicy?: { Rule: string };
};

let n = 0;
const rec = (queue: string, fqans?: string[]): JobRecord =>
  JobStore.newRecord({
    id: `info-share-${++n}`,
    owner: "/CN=x",
    queue,
    backend: "fork",
    language: "xrsl",
    delegations: [],
    rerun: 0,
    lifetime: 60,
    fqans,
  });

async function toState(r: JobRecord, lrms?: "RUNNING" | "QUEUING"): Promise<void> {
  const jobs = t.gw.services.jobs;
  let cur = (await jobs.update(r, { state: "PREPARING" }))!;
  if (!lrms) return;
  cur = (await jobs.update(cur, { state: "SUBMIT" }))!;
  await jobs.update(cur, { state: "INLRMS", lrms });
}

describe("GET /info shares per queue and VO", () => {
  it("counts each queue and each of its VOs separately, with fork slots from configuration", async () => {
    const recs = {
      mainAtlasRun: rec("main", ["/atlas/Role=production"]),
      mainVoRun: rec("main", ["/vo.example.org"]),
      mainVoWait: rec("main", ["/vo.example.org/Role=pilot"]),
      mainNone: rec("main"),
      longAtlasRun: rec("long", ["/atlas"]),
      longOtherWait: rec("long", ["/dteam"]),
    };
    await t.gw.services.jobs.create(Object.values(recs), 1000);
    await toState(recs.mainAtlasRun, "RUNNING");
    await toState(recs.mainVoRun, "RUNNING");
    await toState(recs.mainVoWait, "QUEUING");
    await toState(recs.mainNone);
    await toState(recs.longAtlasRun, "RUNNING");
    await toState(recs.longOtherWait, "QUEUING");
    await quietPeriod(1_100, "the info document is cached for a second: let the cached copy expire");

    const r = await t.request("GET", `${t.rest}/1.0/info`, { accept: "application/json" });
    expect(r.status).toBe(200);
    const svc = r.json().Domains.AdminDomain.Services.ComputingService;
    const shares = Object.fromEntries((svc.ComputingShare as Share[]).map((s) => [s.ID.replace(/^urn:ogf:ComputingShare:[^:]+:/, ""), s]));
    expect(Object.keys(shares)).toEqual(["main", "main_atlas", "main_vo.example.org", "long", "long_atlas", "open"]);
    const pick = (s: Share) => [s.RunningJobs, s.WaitingJobs, s.StagingJobs];
    expect(pick(shares.main!)).toEqual(["2", "1", "1"]);
    expect(pick(shares.main_atlas!)).toEqual(["1", "0", "0"]);
    expect(pick(shares["main_vo.example.org"]!)).toEqual(["1", "1", "0"]);
    // dteam is not published on `long`, yet its job counts in the queue's share.
    expect(pick(shares.long!)).toEqual(["1", "1", "0"]);
    expect(pick(shares.long_atlas!)).toEqual(["1", "0", "0"]);
    expect(pick(shares.open!)).toEqual(["0", "0", "0"]);
    // The configured spelling in the rule, lower case in the share's name.
    expect(shares.long_atlas!.MappingPolicy!.Rule).toBe("vo:ATLAS");
    expect(shares.long!.MappingPolicy).toBeUndefined();
    // Fork: the configured 6 slots, 3 of them running jobs; every share of the host sees the same free ones.
    expect(svc.ComputingManager.TotalSlots).toBe("6");
    for (const s of Object.values(shares)) expect(s.FreeSlots).toBe("3");
    expect(shares.main!.UsedSlots).toBe("2");
    expect(svc.ComputingManager.Benchmark).toMatchObject({ Type: "HEPscore23", Value: "10.5" });

    // XML: the same shares, in the same order.
    const x = await t.request("GET", `${t.rest}/1.0/info`, { accept: "application/xml" });
    expect([...x.text.matchAll(/<ComputingShare [^>]*><ID>([^<]+)</g)].map((m) => m[1]!.split(":").pop())).toEqual(Object.keys(shares));
  });
});
