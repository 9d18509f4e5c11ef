import { describe, expect, it } from "vitest";
import type { UsageRecord } from "../record.js";
import { voOf } from "../record.js";
import { checkApelMessage } from "./loader-check.js";
import {
  apelValue,
  individualMessage,
  normalisedSummaryMessage,
  summarize,
  summarizeNormalised,
  summaryMessage,
  syncMessage,
} from "./messages.js";

// The exact text of each message kind, and APEL's loader rules (loader-check.ts, from apel/apel's
// record definitions) accepting it. March 2025: a past month, as APEL requires of summaries.
const site = { site: "TEST-SITE", submitHost: "https://ce.test:443/arex", machineName: "ce.test" };
const now = new Date(Date.UTC(2025, 3, 2));

function rec(over: Partial<UsageRecord>): UsageRecord {
  return {
    recordId: "x/0",
    jobId: "x",
    batchId: "1",
    owner: "/DC=test/CN=Alice",
    ownerDn: "/DC=test/CN=Alice",
    tokenIssuer: null,
    tokenSubject: null,
    vo: "atlas",
    voGroup: "/atlas",
    voRole: "Role=production",
    fqan: "/atlas/Role=production",
    fqans: ["/atlas/Role=production"],
    account: "atl001",
    uid: 5001,
    queue: "main",
    partition: "batch",
    submitTime: 0,
    startTime: null,
    endTime: 0,
    wallSeconds: 0,
    cpuUserSeconds: 0,
    cpuSystemSeconds: 0,
    cpuSeconds: 0,
    maxRssKb: null,
    processors: 1,
    nodeCount: 1,
    nodes: "wn1",
    exitCode: 0,
    state: "FINISHED",
    failureCause: null,
    failure: null,
    bytesIn: 0,
    bytesOut: 0,
    bytesInCache: 0,
    benchmarkType: null,
    benchmarkValue: null,
    ...over,
  };
}

const recs = [
  // A VOMS job on a HEPscore23 16.5 queue.
  rec({
    batchId: "1001",
    startTime: 1741592600,
    endTime: 1741593600,
    wallSeconds: 1000,
    cpuSeconds: 950,
    maxRssKb: 102400,
    benchmarkType: "HEPscore23",
    benchmarkValue: 16.5,
  }),
  // The same user and FQAN on a HEPSPEC 10 queue.
  rec({
    batchId: "1002",
    startTime: 1742471800,
    endTime: 1742473800,
    wallSeconds: 2000,
    cpuSeconds: 1800,
    benchmarkType: "HEPSPEC",
    benchmarkValue: 10,
  }),
  // A token job (VO from wlcg.groups), 8 cores of an si2k 2500 queue, no start time known.
  rec({
    batchId: "1003",
    owner: "https://iss.example/u1",
    ownerDn: null,
    tokenIssuer: "https://iss.example",
    tokenSubject: "u1",
    vo: "cms",
    voGroup: "/cms/production",
    voRole: null,
    fqan: "/cms/production",
    fqans: ["/cms/production", "/cms"],
    account: "cms001",
    endTime: 1743465540,
    wallSeconds: 301,
    cpuSeconds: 299,
    processors: 8,
    benchmarkType: "si2k",
    benchmarkValue: 2500,
  }),
  // A plain DN: the VOMS-less VO; no benchmark; no node list.
  rec({
    batchId: "1004",
    owner: "/DC=test/CN=Bob",
    ownerDn: "/DC=test/CN=Bob",
    vo: "vomsless",
    voGroup: "/vomsless",
    voRole: null,
    fqan: null,
    fqans: [],
    account: "dn001",
    startTime: 1741593540,
    endTime: 1741593600,
    wallSeconds: 60,
    nodeCount: 0,
    nodes: null,
  }),
];

const accepted = (text: string) => checkApelMessage(text, { now, strictVo: true });

describe("APEL message texts", () => {
  it("individual job records (v0.3): FQAN for VOMS jobs, VO/VOGroup/VORole for the others", () => {
    const text = individualMessage(site, [recs[0]!, recs[2]!, recs[3]!]);
    expect(text).toBe(`APEL-individual-job-message: v0.3
Site: TEST-SITE
SubmitHost: https://ce.test:443/arex
MachineName: ce.test
Queue: batch
LocalJobId: 1001
LocalUserId: atl001
GlobalUserName: /DC=test/CN=Alice
FQAN: /atlas/Role=production
VO: atlas
VOGroup: /atlas
VORole: Role=production
WallDuration: 1000
CpuDuration: 950
Processors: 1
NodeCount: 1
StartTime: 1741592600
EndTime: 1741593600
InfrastructureDescription: APEL-CE-REST
InfrastructureType: grid
MemoryReal: 102400
ServiceLevelType: HEPscore23
ServiceLevel: 16.5
%%
Site: TEST-SITE
SubmitHost: https://ce.test:443/arex
MachineName: ce.test
Queue: batch
LocalJobId: 1003
LocalUserId: cms001
GlobalUserName: https://iss.example/u1
VO: cms
VOGroup: /cms/production
VORole: Role=NULL
WallDuration: 301
CpuDuration: 299
Processors: 8
NodeCount: 1
StartTime: 1743465239
EndTime: 1743465540
InfrastructureDescription: APEL-CE-REST
InfrastructureType: grid
ServiceLevelType: si2k
ServiceLevel: 2500
%%
Site: TEST-SITE
SubmitHost: https://ce.test:443/arex
MachineName: ce.test
Queue: batch
LocalJobId: 1004
LocalUserId: dn001
GlobalUserName: /DC=test/CN=Bob
VO: vomsless
VOGroup: /vomsless
VORole: Role=NULL
WallDuration: 60
CpuDuration: 0
Processors: 1
StartTime: 1741593540
EndTime: 1741593600
InfrastructureDescription: APEL-CE-REST
InfrastructureType: grid
ServiceLevelType: HEPSPEC
ServiceLevel: 1
%%
`);
    expect(accepted(text)).toMatchObject({ kind: "job v0.3", records: [{ LocalJobId: "1001" }, { VO: "cms" }, { VO: "vomsless" }] });
  });

  it("summaries v0.2: one row per benchmark, with ServiceLevelType and ServiceLevel", () => {
    const text = summaryMessage(site, summarize(recs));
    const row = (
      user: string,
      vo: string,
      group: string,
      role: string,
      slt: string,
      sl: string,
      procs: number,
      eet: number,
      let_: number,
      wall: number,
      cpu: number,
      n: number,
    ) =>
      `Site: TEST-SITE\nMonth: 3\nYear: 2025\nGlobalUserName: ${user}\nVO: ${vo}\nVOGroup: ${group}\nVORole: ${role}\nSubmitHost: https://ce.test:443/arex\n` +
      `InfrastructureType: grid\nServiceLevelType: ${slt}\nServiceLevel: ${sl}\nNodeCount: 1\nProcessors: ${procs}\nEarliestEndTime: ${eet}\nLatestEndTime: ${let_}\n` +
      `WallDuration: ${wall}\nCpuDuration: ${cpu}\nNumberOfJobs: ${n}\n%%\n`;
    expect(text).toBe(
      "APEL-summary-job-message: v0.2\n" +
        row("/DC=test/CN=Alice", "atlas", "/atlas", "Role=production", "HEPscore23", "16.5", 1, 1741593600, 1741593600, 1000, 950, 1) +
        row("/DC=test/CN=Alice", "atlas", "/atlas", "Role=production", "HEPSPEC", "10", 1, 1742473800, 1742473800, 2000, 1800, 1) +
        row("https://iss.example/u1", "cms", "/cms/production", "Role=NULL", "si2k", "2500", 8, 1743465540, 1743465540, 301, 299, 1) +
        row("/DC=test/CN=Bob", "vomsless", "/vomsless", "Role=NULL", "HEPSPEC", "1", 1, 1741593600, 1741593600, 60, 0, 1),
    );
    expect(accepted(text).records).toHaveLength(4);
  });

  it("summaries v0.3: normalised by each job's benchmark (si2k / 250), one row per APEL key, no ServiceLevel", () => {
    const text = normalisedSummaryMessage(site, summarizeNormalised(recs));
    const row = (
      user: string,
      vo: string,
      group: string,
      role: string,
      procs: number,
      eet: number,
      let_: number,
      wall: number,
      cpu: number,
      nw: number,
      nc: number,
      n: number,
    ) =>
      `Site: TEST-SITE\nMonth: 3\nYear: 2025\nGlobalUserName: ${user}\nVO: ${vo}\nVOGroup: ${group}\nVORole: ${role}\nSubmitHost: https://ce.test:443/arex\n` +
      `Infrastructure: grid\nNodeCount: 1\nProcessors: ${procs}\nEarliestEndTime: ${eet}\nLatestEndTime: ${let_}\n` +
      `WallDuration: ${wall}\nCpuDuration: ${cpu}\nNormalisedWallDuration: ${nw}\nNormalisedCpuDuration: ${nc}\nNumberOfJobs: ${n}\n%%\n`;
    expect(text).toBe(
      "APEL-summary-job-message: v0.3\n" +
        // 1000 × 16.5 + 2000 × 10; 950 × 16.5 + 1800 × 10
        row("/DC=test/CN=Alice", "atlas", "/atlas", "Role=production", 1, 1741593600, 1742473800, 3000, 2750, 36500, 33675, 2) +
        row("https://iss.example/u1", "cms", "/cms/production", "Role=NULL", 8, 1743465540, 1743465540, 301, 299, 3010, 2990, 1) +
        row("/DC=test/CN=Bob", "vomsless", "/vomsless", "Role=NULL", 1, 1741593600, 1741593600, 60, 0, 60, 0, 1),
    );
    expect(accepted(text)).toMatchObject({ kind: "normalised summary v0.3" });
    // Whole seconds: a fractional product is rounded once, after summing.
    const odd = summarizeNormalised([
      rec({ endTime: 1741593600, wallSeconds: 3, cpuSeconds: 1, benchmarkType: "HEPscore23", benchmarkValue: 12.25 }),
    ]);
    expect(accepted(normalisedSummaryMessage(site, odd)).records[0]).toMatchObject({
      NormalisedWallDuration: "37",
      NormalisedCpuDuration: "12",
    });
  });

  it("sync (v0.1): jobs per month", () => {
    const text = syncMessage(site, recs);
    expect(text).toBe(
      "APEL-sync-message: v0.1\nSite: TEST-SITE\nSubmitHost: https://ce.test:443/arex\nNumberOfJobs: 4\nMonth: 3\nYear: 2025\n%%\n",
    );
    expect(accepted(text).records).toHaveLength(1);
  });

  it("the loader check refuses what APEL's loader refuses", () => {
    const v03 = normalisedSummaryMessage(site, summarizeNormalised(recs.slice(3)));
    const v02 = summaryMessage(site, summarize(recs.slice(3)));
    const job = individualMessage(site, recs.slice(0, 1));
    const refusals: [string, RegExp][] = [
      [v03.replace("Infrastructure: grid", "InfrastructureType: grid"), /Unexpected field InfrastructureType/],
      [v03.replace("NodeCount: 1\n", "ServiceLevelType: HEPSPEC\nNodeCount: 1\n"), /Unexpected field ServiceLevelType/],
      [v03.replace(/NormalisedWallDuration: \d+/, "NormalisedWallDuration: 12.5"), /Invalid int value 12.5/],
      [v03.replace(/NormalisedCpuDuration: \d+\n/, ""), /Mandatory field NormalisedCpuDuration/],
      [v03.replace("v0.3", "v0.2"), /Unexpected field Infrastructure\b/],
      [v02.replace("LatestEndTime: 1741593600", "LatestEndTime: 1743465601"), /LatestEndTime is not within stated month/],
      [v02.replace("Month: 3\nYear: 2025", "Month: 5\nYear: 2025"), /in the future/],
      [job.replace(/ServiceLevel: 16.5\n/, ""), /ServiceLevelType and ServiceLevel/],
      [job.replace("ServiceLevelType: HEPscore23", "ServiceLevelType: HS23"), /not valid/],
      [job.replace("StartTime: 1741592600", "StartTime: 1741593601"), /EndTime is before StartTime/],
      [job.replace("VO: atlas", "Vo: atlas"), /Unexpected field Vo/],
      [v02.replace("VO: vomsless", "VO: none"), /no VO/],
      ["APEL-summary-job-message: v0.3 \nSite: X\n%%\n", /not recognised/],
    ];
    for (const [text, why] of refusals) expect(() => accepted(text), String(why)).toThrow(why);
  });
});

describe("hostile DNs and FQANs", () => {
  // Names a CA, a VO or a token issuer chose: each must stay inside its own line of its own record.
  const hostile = [
    "/DC=org/CN=a%%b",
    "/DC=org/CN=%%%%",
    "/CN=end%",
    "%/CN=start",
    "/CN=x\nVO: evil",
    "/CN=x\r\n%%\r\nSite: EVIL\nLocalJobId: 1",
    "/CN=x%\n%LocalJobId: 2",
    "  /CN=blanks around\t ",
    "/CN=a\u2028b\u2029c\x85d\x00e\x1ef",
    "\u3000/CN=ideographic space\xa0",
    "https://iss.example/%%sub%%",
  ];
  const hostileRecs = hostile.map((dn, i) =>
    rec({
      recordId: `h/${i}`,
      batchId: String(2000 + i),
      owner: dn,
      ownerDn: dn,
      fqan: `/atlas${dn}/Role=production`,
      voGroup: `/atlas${dn}`,
      startTime: 1741592600,
      endTime: 1741593600,
      wallSeconds: 1000,
      cpuSeconds: 950,
    }),
  );

  it("a value keeps to its line: no `%%`, no line break, no edge blanks; an ordinary DN is unchanged", () => {
    for (const dn of hostile) {
      const v = apelValue(dn);
      expect(v, JSON.stringify(dn)).not.toMatch(/%%|[\r\n\u2028\u2029\x85]/);
      expect(v, JSON.stringify(dn)).toBe(v.trim());
    }
    for (const ok of ["/DC=org/DC=example/CN=Jane Doe 12345", "/atlas/Role=production", "https://iss.example/u1", "/CN=100% sure"])
      expect(apelValue(ok)).toBe(ok);
  });

  it("each individual record parses back to exactly the fields given, one record per job", () => {
    const { records } = accepted(individualMessage(site, hostileRecs));
    expect(records).toHaveLength(hostileRecs.length);
    records.forEach((r, i) => {
      const dn = hostile[i]!;
      expect(r.GlobalUserName, JSON.stringify(dn)).toBe(apelValue(dn));
      expect(r.FQAN).toBe(apelValue(`/atlas${dn}/Role=production`));
      expect(r.LocalJobId).toBe(String(2000 + i));
      expect(r.Site).toBe("TEST-SITE");
      expect(Object.keys(r).sort()).toEqual(Object.keys(records[0]!).sort());
    });
  });

  it("summaries (v0.2 and v0.3) keep one row per user, with the names given", () => {
    for (const text of [summaryMessage(site, summarize(hostileRecs)), normalisedSummaryMessage(site, summarizeNormalised(hostileRecs))]) {
      const { records } = accepted(text);
      expect(records).toHaveLength(hostile.length);
      expect(records.map((r) => r.GlobalUserName)).toEqual(hostile.map(apelValue));
      expect(records.map((r) => r.VOGroup)).toEqual(hostile.map((dn) => apelValue(`/atlas${dn}`)));
    }
  });

  it("random names of the characters APEL reads specially never split or add a record", () => {
    const alphabet = ["%", "%%", "\n", "\r", ":", " ", "\t", "\u2028", "\x85", "\x0b", "a", "/", "=", "Site: X", "\n%%\n"];
    let seed = 7;
    const next = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31);
    const names = Array.from({ length: 300 }, () =>
      Array.from({ length: 1 + (next() % 12) }, () => alphabet[next() % alphabet.length]).join(""),
    );
    const rs = names.map((n, i) =>
      rec({
        recordId: `r/${i}`,
        batchId: String(i + 1),
        owner: `/CN=${n}`,
        fqan: `/atlas/${n}`,
        startTime: 1741592600,
        endTime: 1741593600,
      }),
    );
    const { records } = accepted(individualMessage(site, rs));
    expect(records.map((r) => [r.LocalJobId, r.GlobalUserName, r.FQAN])).toEqual(
      rs.map((r, i) => [String(i + 1), apelValue(r.owner), apelValue(r.fqan!)]),
    );
  });
});

describe("VO of a record", () => {
  it("first FQAN or wlcg.groups entry, else the VOMS-less VO; never a blank or a name APEL reads as NULL", () => {
    expect(voOf("/atlas/lcg1/Role=production/Capability=NULL", "x")).toEqual({
      vo: "atlas",
      group: "/atlas/lcg1",
      role: "Role=production",
    });
    expect(voOf("/cms/production", "x")).toEqual({ vo: "cms", group: "/cms/production", role: null });
    for (const none of [null, "", "/", "/Role=pilot", "/ /", "/none", "/NULL/x"])
      expect(voOf(none, "site-vo"), String(none)).toEqual({ vo: "site-vo", group: "/site-vo", role: null });
  });
});
