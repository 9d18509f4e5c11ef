/**
 * Descriptions exactly as ATLAS's ARC Control Tower writes them (production-site.md §1): the xRSL
 * of `aCTPanda2Xrsl.py`, and the ADL that aCT posts after the ARC bindings unparse that xRSL
 * (URL options both inside the URI, in alphabetical order, and as <Option> elements; `file:`
 * sources dropped; a runtime environment without version written as an empty <Version/>).
 */
import { describe, expect, it } from "vitest";
import { parseDescriptions, parseDescriptionsSettled } from "./index.js";

const RUCIO_OPTS = "accesslatency=disk;cache=invariant;httpgetpartial=no;rucioaccount=pilot;transferprotocol=https";
const RUCIO = `rucio://rucio-lb-prod.cern.ch;${RUCIO_OPTS}/replicas/mc23_13p6TeV/EVNT.40063585._000123.pool.root.1`;
const QUEUEDATA = "http://pandaserver.cern.ch:25085;cache=check/cache/schedconfig/NDGF-T1.all.json";
const PILOT = "http://pandaserver.cern.ch:25085;cache=check/cache/pilot/pilot3.tar.gz";

function options(opts: string): string {
  return opts
    .split(";")
    .map((o) => o.split("="))
    .map(([k, v]) => `<Option><Name>${k}</Name><Value>${v}</Value></Option>`)
    .join("");
}

const ACT_ADL = `<?xml version="1.0"?>
<ActivityDescriptions>
<ActivityDescription xmlns="http://www.eu-emi.eu/es/2010/12/adl" xmlns:emiestypes="http://www.eu-emi.eu/es/2010/12/types" xmlns:nordugrid-adl="http://www.nordugrid.org/es/2011/12/nordugrid-adl">
  <ActivityIdentification><Name>mc23_13p6TeV.simul.6543210</Name></ActivityIdentification>
  <Application>
    <Executable><Path>runpilot2-wrapper.sh</Path><Argument>-s</Argument><Argument>NDGF-T1</Argument><Argument>--piloturl</Argument><Argument>local</Argument></Executable>
    <Output>log.6543210.job.log</Output>
    <Error>log.6543210.job.log</Error>
    <Environment><Name>PANDA_JSID</Name><Value>aCT-atlas-1</Value></Environment>
    <Environment><Name>PILOT_NOKILL</Name><Value>YES</Value></Environment>
    <LoggingDirectory>gmlog</LoggingDirectory>
    <nordugrid-adl:Rerun>2</nordugrid-adl:Rerun>
    <Priority>77</Priority>
  </Application>
  <Resources>
    <QueueName>main</QueueName>
    <IndividualPhysicalMemory>2097152000</IndividualPhysicalMemory>
    <RuntimeEnvironment><Name>APPS/HEP/ATLAS-SITE</Name><Version/></RuntimeEnvironment>
    <RuntimeEnvironment><Name>ENV/PROXY</Name><Version></Version></RuntimeEnvironment>
    <SlotRequirement><NumberOfSlots>8</NumberOfSlots><SlotsPerHost>8</SlotsPerHost></SlotRequirement>
    <IndividualCPUTime>172800</IndividualCPUTime>
    <WallTime>21600</WallTime>
  </Resources>
  <DataStaging>
    <nordugrid-adl:DelegationID>5c2b6e3f1a0d</nordugrid-adl:DelegationID>
    <InputFile><Name>pandaJobData.out</Name></InputFile>
    <InputFile><Name>runpilot2-wrapper.sh</Name><IsExecutable>true</IsExecutable></InputFile>
    <InputFile><Name>pilot3.tar.gz</Name><Source><URI>${PILOT}</URI>${options("cache=check")}<DelegationID>5c2b6e3f1a0d</DelegationID></Source></InputFile>
    <InputFile><Name>queuedata.json</Name><Source><URI>${QUEUEDATA}</URI>${options("cache=check")}<DelegationID>5c2b6e3f1a0d</DelegationID></Source></InputFile>
    <InputFile><Name>EVNT.40063585._000123.pool.root.1</Name><Source><URI>${RUCIO}</URI>${options(RUCIO_OPTS)}<DelegationID>5c2b6e3f1a0d</DelegationID></Source></InputFile>
    <OutputFile><Name>heartbeat.json</Name></OutputFile>
    <OutputFile><Name>@output.list</Name></OutputFile>
    <OutputFile><Name>log.6543210.job.log</Name></OutputFile>
    <OutputFile><Name>gmlog</Name></OutputFile>
  </DataStaging>
</ActivityDescription>
</ActivityDescriptions>`;

const ACT_XRSL = `&
("rerun" = "2" )
("runtimeenvironment" = "APPS/HEP/ATLAS-SITE" )
("runtimeenvironment" = "ENV/PROXY" )
("jobname" = "mc23_13p6TeV.simul.6543210" )
("count" = "8" )
("countpernode" = "8" )
("memory" = "2000" )
("walltime" = "360" )
("cputime" = "2880" )
("priority" = "77" )
("executable" = "runpilot2-wrapper.sh" )
("arguments" = "-s" "NDGF-T1" "--piloturl" "local" )
("inputfiles" = ("pandaJobData.out" "") ("runpilot2-wrapper.sh" "") ("pilot3.tar.gz" "http://pandaserver.cern.ch:25085/cache/pilot/pilot3.tar.gz" "cache=check") ("queuedata.json" "${QUEUEDATA}") ("EVNT.40063585._000123.pool.root.1" "${RUCIO}") )
("stdout" = "log.6543210.job.log" )
("join" = "yes" )
("gmlog" = "gmlog" )
("outputfiles" = ("heartbeat.json" "") ("@output.list" "") )
("environment" = ("PANDA_JSID" "aCT-atlas-1") ("PILOT_NOKILL" "YES") )
("queue" = "main" )`;

describe("aCT-shaped submissions", () => {
  it("accepts the ADL aCT posts: empty <Version/>, options in the URI and as <Option>", () => {
    const [d] = parseDescriptions(ACT_ADL);
    expect(d!.runtimeEnvironments).toEqual([
      { name: "APPS/HEP/ATLAS-SITE", version: undefined, options: [] },
      { name: "ENV/PROXY", version: undefined, options: [] },
    ]);
    expect(d!.rerun).toBe(2);
    const evnt = d!.inputFiles.find((f) => f.name.startsWith("EVNT"))!;
    expect(evnt.source).toBe("rucio://rucio-lb-prod.cern.ch/replicas/mc23_13p6TeV/EVNT.40063585._000123.pool.root.1");
    expect(evnt.options).toEqual({
      accesslatency: "disk",
      cache: "invariant",
      httpgetpartial: "no",
      rucioaccount: "pilot",
      transferprotocol: "https",
    });
    expect(evnt.delegationId).toBe("5c2b6e3f1a0d");
    const queuedata = d!.inputFiles.find((f) => f.name === "queuedata.json")!;
    expect(queuedata.source).toBe("http://pandaserver.cern.ch:25085/cache/schedconfig/NDGF-T1.all.json");
    expect(queuedata.options).toEqual({ cache: "check" });
    const wrapper = d!.inputFiles.find((f) => f.name === "runpilot2-wrapper.sh")!;
    expect([wrapper.source, wrapper.executable]).toEqual([undefined, true]);
    expect(d!.outputFiles.map((o) => o.name)).toEqual(["heartbeat.json", "@output.list", "log.6543210.job.log", "gmlog"]);
  });

  it("accepts aCT's xRSL with quoted attribute names", () => {
    const [d] = parseDescriptions(ACT_XRSL);
    expect(d!.rerun).toBe(2);
    expect(d!.queue).toBe("main");
    expect(d!.wallTimeSeconds).toBe(360 * 60);
    expect(d!.runtimeEnvironments.map((r) => [r.name, r.version])).toEqual([
      ["APPS/HEP/ATLAS-SITE", undefined],
      ["ENV/PROXY", undefined],
    ]);
    expect(d!.inputFiles.find((f) => f.name === "pilot3.tar.gz")!.options).toEqual({ cache: "check" });
    expect(d!.inputFiles.find((f) => f.name.startsWith("EVNT"))!.options.rucioaccount).toBe("pilot");
    expect(d!.stderr).toBe("log.6543210.job.log");
  });

  it("still refuses a version that is not a version", () => {
    const text = ACT_ADL.replace("<Version/>", "<Version>1 2</Version>");
    const [item] = parseDescriptionsSettled(text);
    expect(item!.ok).toBe(false);
    expect(!item!.ok && item!.error.message).toMatch(/runtime environment version '1 2' of APPS\/HEP\/ATLAS-SITE is not valid/);
  });
});

describe("local inputs on a site-shared file system", () => {
  const cric = "/cvmfs/atlas.cern.ch/repo/sw/local/etc/cric_pandaqueues.json";
  const xrsl = (src: string) => `&(executable=/bin/true)(inputfiles=("cric_pandaqueues.json" "${src}"))`;

  it("keeps a path under a listed prefix as a file:// source", () => {
    const [d] = parseDescriptions(xrsl(cric), { localInputPrefixes: ["/cvmfs/atlas.cern.ch"] });
    expect(d!.inputFiles[0]!.source).toBe(`file://${cric}`);
    const [a] = parseDescriptions(xrsl(`file://${cric}`), { localInputPrefixes: ["/cvmfs/"] });
    expect(a!.inputFiles[0]!.source).toBe(`file://${cric}`);
  });

  it("refuses local paths outside the listed prefixes, with the reason", () => {
    for (const [src, prefixes] of [
      [cric, []],
      ["/etc/shadow", ["/cvmfs"]],
      ["/cvmfs/../etc/shadow", ["/cvmfs"]],
      ["/cvmfsevil/x", ["/cvmfs"]],
      ["file://otherhost/cvmfs/x", ["/cvmfs"]],
    ] as const) {
      const [item] = parseDescriptionsSettled(xrsl(src), { localInputPrefixes: [...prefixes] });
      expect(item!.ok, src).toBe(false);
      expect(!item!.ok && item!.error.message).toMatch(/local|not allowed|not a URL/);
    }
  });
});
