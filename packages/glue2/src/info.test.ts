import { describe, expect, it } from "vitest";
import { XMLParser } from "fast-xml-parser";
import { buildInfoDocument, type InfoInput } from "./info.js";
import { renderXml } from "./render/xml.js";
import { render } from "./negotiate.js";
import { publishedEndpointUrl, splitRteName } from "./glue.js";

const now = new Date("2026-03-04T05:06:07.890Z");
const base: InfoInput = {
  endpointUrl: "https://ce.example.org:8443/arex/rest/1.1",
  hostname: "ce.example.org",
  adminDomain: "EXAMPLE",
  implementationVersion: "0.1.0",
  health: "ok",
  serving: "production",
  lrms: "SLURM",
  queues: [
    {
      name: "main",
      maxWallTime: 86400,
      maxCpuTime: 86400,
      maxMainMemory: 4096,
      maxSlotsPerJob: 16,
      defaultWallTime: 3600,
      counts: { running: 2, waiting: 1 },
    },
    { name: "short", counts: {} },
  ],
  counts: { total: 5, running: 2, waiting: 1, staging: 1, prelrms: 1, suspended: 0 },
  totalSlots: 32,
  runtimeEnvironments: ["ENV/PROXY", "APPS/HEP/ATLAS-21.0.1", "PYTHON-3-ML"],
  executionEnvironment: { mainMemorySize: 16000 },
  now,
};

// Parse like a consumer would: repeated elements as arrays where GLUE2 allows repetition.
const parser = new XMLParser({
  ignoreAttributes: false,
  attributeNamePrefix: "@",
  parseTagValue: false,
  isArray: (name) =>
    ["ComputingShare", "Capability", "InterfaceVersion", "JobDescription", "ApplicationEnvironment", "ComputingShareID"].includes(name),
});

describe("buildInfoDocument", () => {
  const xml = renderXml(buildInfoDocument(base));
  const doc = parser.parse(xml);
  const svc = doc.InfoRoot.Domains.AdminDomain.Services.ComputingService;

  it("has the GLUE2 tree the ARC broker walks", () => {
    expect(doc.InfoRoot.Domains["@xmlns"]).toBe("http://schemas.ogf.org/glue/2009/03/spec_2.0_r1");
    expect(doc.InfoRoot.Domains.AdminDomain["@BaseType"]).toBe("Domain");
    expect(svc["@BaseType"]).toBe("Service");
    expect(svc["@CreationTime"]).toBe("2026-03-04T05:06:07Z");
    expect(svc.ID).toBe("urn:ogf:ComputingService:ce.example.org:arex");
    expect(svc.TotalJobs).toBe("5");
  });

  it("publishes an arcrest endpoint the ARC client accepts", () => {
    const ep = svc.ComputingEndpoint;
    expect(ep["@BaseType"]).toBe("Endpoint");
    expect(ep.InterfaceName).toBe("org.nordugrid.arcrest");
    expect(ep.URL).toBe("https://ce.example.org:8443/arex");
    expect(ep.Capability).toContain("executionmanagement.jobcreation");
    expect(ep.Capability).toHaveLength(7);
    expect(ep.InterfaceVersion).toEqual(["1.0", "1.1"]);
    expect(ep.Technology).toBe("rest");
    expect(ep.HealthState).toBe("ok");
    expect(ep.ServingState).toBe("production");
    expect(ep.JobDescription).toEqual(["nordugrid:xrsl", "emies:adl"]);
    expect(ep.Associations.ComputingShareID).toEqual([
      "urn:ogf:ComputingShare:ce.example.org:main",
      "urn:ogf:ComputingShare:ce.example.org:short",
    ]);
    expect(ep.TrustedCA).toBeUndefined();
  });

  it("follows GLUE2 endpoint element order", () => {
    const order = [
      "<URL>",
      "<Capability>",
      "<Technology>",
      "<InterfaceName>",
      "<InterfaceVersion>",
      "<Implementor>",
      "<ImplementationName>",
      "<ImplementationVersion>",
      "<QualityLevel>",
      "<HealthState>",
      "<ServingState>",
      "<Staging>",
      "<JobDescription>",
    ];
    const ep = xml.slice(xml.indexOf("<ComputingEndpoint"), xml.indexOf("</ComputingEndpoint>"));
    const pos = order.map((t) => ep.indexOf(t));
    expect(pos.every((p) => p >= 0)).toBe(true);
    expect([...pos].sort((a, b) => a - b)).toEqual(pos);
  });

  it("has one share per queue with MappingQueue and configured limits only", () => {
    expect(svc.ComputingShare).toHaveLength(2);
    const [main, short] = svc.ComputingShare;
    expect(main.MappingQueue).toBe("main");
    expect(main.Name).toBe("main");
    expect(main.MaxWallTime).toBe("86400");
    expect(main.MaxMainMemory).toBe("4096");
    expect(main.MaxSlotsPerJob).toBe("16");
    expect(main.DefaultWallTime).toBe("3600");
    expect(main.RunningJobs).toBe("2");
    expect(main.TotalJobs).toBe("3");
    expect(main.FreeSlots).toBe("30");
    expect(main.MappingPolicy).toBeUndefined();
    expect(short.MappingQueue).toBe("short");
    expect(short.MaxWallTime).toBeUndefined();
  });

  it("has a manager with application and execution environments", () => {
    const mgr = svc.ComputingManager;
    expect(mgr.ProductName).toBe("SLURM");
    expect(mgr.TotalSlots).toBe("32");
    const apps = mgr.ApplicationEnvironments.ApplicationEnvironment;
    expect(apps.map((a: { AppName: string }) => a.AppName)).toEqual(["ENV/PROXY", "APPS/HEP/ATLAS", "PYTHON"]);
    expect(apps[0].AppVersion).toBeUndefined();
    expect(apps[1].AppVersion).toBe("21.0.1");
    expect(apps[2].AppVersion).toBe("3-ML");
    expect(apps[1].State).toBe("installednotverified");
    const ee = mgr.ExecutionEnvironments.ExecutionEnvironment;
    expect(ee.Platform).toBe("amd64");
    expect(ee.OSFamily).toBe("linux");
    expect(ee.MainMemorySize).toBe("16000");
    expect(ee.ConnectivityOut).toBe("true");
  });

  it("omits ApplicationEnvironments without RTEs (pyarcrest needs an object or nothing)", () => {
    const json = JSON.parse(render(buildInfoDocument({ ...base, runtimeEnvironments: [] }), "json"));
    const mgr = json.Domains.AdminDomain.Services.ComputingService.ComputingManager;
    expect("ApplicationEnvironments" in mgr).toBe(false);
  });

  it("JSON has the shape pyarcrest navigates", () => {
    const json = JSON.parse(render(buildInfoDocument(base), "json"));
    const s = json.Domains.AdminDomain.Services.ComputingService;
    expect(s.ComputingShare.map((x: { Name: string }) => x.Name)).toEqual(["main", "short"]);
    expect(s._attributes.BaseType).toBe("Service");
    expect(s.ComputingEndpoint.InterfaceName).toBe("org.nordugrid.arcrest");
  });

  it("reports health and draining", () => {
    const d = parser.parse(
      renderXml(buildInfoDocument({ ...base, health: { state: "critical", info: "LRMS down" }, serving: "draining" })),
    );
    const ep = d.InfoRoot.Domains.AdminDomain.Services.ComputingService.ComputingEndpoint;
    expect(ep.HealthState).toBe("critical");
    expect(ep.HealthStateInfo).toBe("LRMS down");
    expect(ep.ServingState).toBe("draining");
  });

  it('never emits empty container elements (JSON "" instead of an object)', () => {
    const x = renderXml(buildInfoDocument({ ...base, queues: [], runtimeEnvironments: [] }));
    expect(x).not.toMatch(/<[A-Za-z]+\/>/);
    expect(x).not.toContain("<ComputingShare ");
  });

  it("escapes configured text", () => {
    const x = renderXml(buildInfoDocument({ ...base, adminDomain: "A&B <x>" }));
    expect(x).toContain("<Name>A&amp;B &lt;x&gt;</Name>");
  });
});

describe("helpers", () => {
  it("splitRteName splits at the first '-' followed by a digit", () => {
    expect(splitRteName("ENV/PROXY")).toEqual({ appName: "ENV/PROXY" });
    expect(splitRteName("APPS/A-B-2.0")).toEqual({ appName: "APPS/A-B", appVersion: "2.0" });
    expect(splitRteName("X-1")).toEqual({ appName: "X", appVersion: "1" });
    expect(splitRteName("-1")).toEqual({ appName: "-1" });
  });

  it("publishedEndpointUrl strips /rest and version", () => {
    expect(publishedEndpointUrl("https://h:8443/arex")).toBe("https://h:8443/arex");
    expect(publishedEndpointUrl("https://h:8443/arex/")).toBe("https://h:8443/arex");
    expect(publishedEndpointUrl("https://h:8443/arex/rest")).toBe("https://h:8443/arex");
    expect(publishedEndpointUrl("https://h:8443/arex/rest/1.0/")).toBe("https://h:8443/arex");
  });
});
