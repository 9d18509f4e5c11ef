import { describe, expect, it } from "vitest";
import { buildInfoDocument, type InfoInput } from "./info.js";
import { renderXml } from "./render/xml.js";
import { render } from "./negotiate.js";

// Per-VO shares, slots and benchmarks as brokers read them (production-site §5).
const input: InfoInput = {
  endpointUrl: "https://ce.example.org:8443/arex",
  hostname: "ce.example.org",
  adminDomain: "EXAMPLE",
  implementationVersion: "0.1.0",
  health: "ok",
  serving: "production",
  lrms: "SLURM",
  queues: [
    {
      name: "main",
      maxWallTime: 3600,
      counts: { running: 3, waiting: 2, staging: 1 },
      usedSlots: 5,
      freeSlots: 3,
      voShares: [
        { vo: "Vo.Example.Org", counts: { running: 2, waiting: 1 } },
        { vo: "atlas", counts: {} },
      ],
      benchmarks: { HEPscore23: 12.5 },
    },
    { name: "debug", counts: { running: 1 }, freeSlots: 0, usedSlots: 8, voShares: [{ vo: "atlas", counts: { running: 1 } }] },
  ],
  counts: { total: 7, running: 4, waiting: 2, staging: 1, prelrms: 0, suspended: 0 },
  totalSlots: 8,
  runtimeEnvironments: ["ENV/PROXY"],
  now: new Date("2026-03-04T05:06:07Z"),
};

type Share = Record<string, unknown> & { ID: string; Name: string };
const json = () => JSON.parse(render(buildInfoDocument(input), "json"));

describe("per-VO shares", () => {
  it("DIRAC's path Domains/AdminDomain/Services/ComputingService is objects all the way (no wrapper, no one-element arrays)", () => {
    const doc = json();
    expect(Object.keys(doc)).toEqual(["Domains"]);
    for (const level of [
      doc.Domains,
      doc.Domains.AdminDomain,
      doc.Domains.AdminDomain.Services,
      doc.Domains.AdminDomain.Services.ComputingService,
    ]) {
      expect(level).toBeTypeOf("object");
      expect(Array.isArray(level)).toBe(false);
    }
  });

  it("publishes the queue's share, then one `<queue>_<vo>` share per VO, the VO lower-cased in ID and Name", () => {
    const shares: Share[] = json().Domains.AdminDomain.Services.ComputingService.ComputingShare;
    expect(shares.map((s) => s.ID)).toEqual([
      "urn:ogf:ComputingShare:ce.example.org:main",
      "urn:ogf:ComputingShare:ce.example.org:main_vo.example.org",
      "urn:ogf:ComputingShare:ce.example.org:main_atlas",
      "urn:ogf:ComputingShare:ce.example.org:debug",
      "urn:ogf:ComputingShare:ce.example.org:debug_atlas",
    ]);
    const [main, vo, atlas, , debugAtlas] = shares;
    expect(vo).toMatchObject({
      Name: "main_vo.example.org",
      MappingQueue: "main",
      RunningJobs: "2",
      WaitingJobs: "1",
      StagingJobs: "0",
      TotalJobs: "3",
    });
    // The queue's limits and free slots; the VO's own use.
    expect(vo).toMatchObject({ MaxWallTime: "3600", FreeSlots: "3", UsedSlots: "2" });
    expect(vo!.MappingPolicy).toMatchObject({
      Scheme: "basic",
      Rule: "vo:Vo.Example.Org",
      ID: "urn:ogf:MappingPolicy:ce.example.org:main_vo.example.org",
    });
    expect(atlas).toMatchObject({ RunningJobs: "0", WaitingJobs: "0", FreeSlots: "3" });
    // The queue's share counts every job of the queue and stays open (pyarcrest submits only to shares without a MappingPolicy).
    expect(main).toMatchObject({ Name: "main", RunningJobs: "3", WaitingJobs: "2", StagingJobs: "1", FreeSlots: "3", UsedSlots: "5" });
    expect(main!.MappingPolicy).toBeUndefined();
    expect(debugAtlas).toMatchObject({ MappingQueue: "debug", RunningJobs: "1", FreeSlots: "0" });
    const svc = json().Domains.AdminDomain.Services.ComputingService;
    expect(svc.Complexity).toBe("endpointType=1,share=5,resource=1");
    expect(svc.ComputingEndpoint.Associations.ComputingShareID).toHaveLength(5);
  });

  it("publishes each queue's benchmarks on the manager, before its execution environments", () => {
    const xml = renderXml(buildInfoDocument(input));
    const mgr = json().Domains.AdminDomain.Services.ComputingService.ComputingManager;
    expect(mgr.Benchmark).toMatchObject({ ID: "urn:ogf:Benchmark:ce.example.org:main:HEPscore23", Type: "HEPscore23", Value: "12.5" });
    expect(xml.indexOf("<Benchmark ")).toBeGreaterThan(0);
    expect(xml.indexOf("<Benchmark ")).toBeLessThan(xml.indexOf("<ExecutionEnvironments"));
    expect(mgr.TotalSlots).toBe("8");
  });

  it("without VO shares or benchmarks the document is as before: one share per queue, no Benchmark", () => {
    const plain = { ...input, queues: input.queues.map(({ voShares: _v, benchmarks: _b, ...q }) => q) };
    const xml = renderXml(buildInfoDocument(plain));
    expect(xml.match(/<ComputingShare /g)).toHaveLength(2);
    expect(xml).not.toContain("<Benchmark");
  });

  it("a queue with GPUs (maxGpusPerJob > 0) gives each of its shares a GLUE 2.1 ComputingShareAcceleratorInfo; 0 or absent, none", () => {
    const gpu = {
      ...input,
      queues: [
        { ...input.queues[0]!, maxGpusPerJob: 2 },
        { ...input.queues[1]!, maxGpusPerJob: 0 },
      ],
    };
    const doc = JSON.parse(render(buildInfoDocument(gpu), "json"));
    const shares: Share[] = doc.Domains.AdminDomain.Services.ComputingService.ComputingShare;
    const acc = shares.map((s) => s.ComputingShareAcceleratorInfo);
    expect(acc[0]).toEqual({
      ID: "urn:ogf:ComputingShareAcceleratorInfo:ce.example.org:main:GPU",
      Type: "GPU",
      MaxAcceleratorSlotsPerJob: "2",
      Associations: { ComputingShareID: "urn:ogf:ComputingShare:ce.example.org:main" },
      _attributes: { BaseType: "Entity", CreationTime: "2026-03-04T05:06:07Z", Validity: "600" },
    });
    // The VO shares of the queue carry the queue's limit, each under its own ID.
    expect(acc[1]).toMatchObject({
      ID: "urn:ogf:ComputingShareAcceleratorInfo:ce.example.org:main_vo.example.org:GPU",
      MaxAcceleratorSlotsPerJob: "2",
    });
    expect(acc[2]).toMatchObject({ MaxAcceleratorSlotsPerJob: "2" });
    expect(acc.slice(3)).toEqual([undefined, undefined]);
    // XML: inside the share, after its MappingPolicy and before its Associations.
    const xml = renderXml(buildInfoDocument(gpu));
    const share = xml.slice(xml.indexOf("<ComputingShare "), xml.indexOf("</ComputingShare>"));
    expect(share).toMatch(
      /<ComputingShareAcceleratorInfo BaseType="Entity"[^>]*><ID>[^<]+<\/ID><Type>GPU<\/Type><MaxAcceleratorSlotsPerJob>2<\/MaxAcceleratorSlotsPerJob>/,
    );
    expect(share.lastIndexOf("<Associations>")).toBeGreaterThan(share.indexOf("</ComputingShareAcceleratorInfo>"));
    expect(renderXml(buildInfoDocument(input))).not.toContain("Accelerator");
  });
});
