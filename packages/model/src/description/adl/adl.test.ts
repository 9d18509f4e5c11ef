import { describe, expect, it } from "vitest";
import { AdlSyntaxError, DescriptionError } from "../../errors.js";
import type { JobDescription } from "../types.js";
import { parseAdl, parseAdlSettled } from "./index.js";

const NS = 'xmlns="http://www.eu-emi.eu/es/2010/12/adl" xmlns:nordugrid-adl="http://www.nordugrid.org/es/2011/12/nordugrid-adl"';

function adl(inner: string): string {
  return `<ActivityDescription ${NS}>${inner}</ActivityDescription>`;
}

function one(text: string): JobDescription {
  const all = parseAdl(text);
  expect(all).toHaveLength(1);
  return all[0] as JobDescription;
}

function error(text: string, opts?: { maxBytes?: number }): DescriptionError {
  try {
    parseAdl(text, opts);
  } catch (e) {
    expect(e).toBeInstanceOf(DescriptionError);
    return e as DescriptionError;
  }
  throw new Error("expected the ADL to be rejected");
}

/** Exactly what the ARC 6 client posted (arc-client-transcript.md). */
const ARC_CLIENT_ADL = `<adl:ActivityDescription xmlns:emiestypes="http://www.eu-emi.eu/es/2010/12/types" xmlns:nordugrid-adl="http://www.nordugrid.org/es/2011/12/nordugrid-adl" xmlns:adl="http://www.eu-emi.eu/es/2010/12/adl">
  <adl:ActivityIdentification>
    <adl:Name>harness-main</adl:Name>
  </adl:ActivityIdentification>
  <adl:Application>
    <adl:Executable>
      <adl:Path>echoargs.sh</adl:Path>
      <adl:Argument>alpha</adl:Argument>
      <adl:Argument>beta gamma</adl:Argument>
    </adl:Executable>
    <adl:Output>stdout.txt</adl:Output>
    <adl:Error>stderr.txt</adl:Error>
    <nordugrid-adl:LoggingDirectory>gmlog</nordugrid-adl:LoggingDirectory>
  </adl:Application>
  <adl:Resources>
    <adl:QueueName>fork</adl:QueueName>
    <adl:WallTime>600</adl:WallTime>
  </adl:Resources>
  <adl:DataStaging>
    <adl:InputFile>
      <adl:Name>echoargs.sh</adl:Name>
      <adl:IsExecutable>true</adl:IsExecutable>
    </adl:InputFile>
    <adl:InputFile>
      <adl:Name>input.txt</adl:Name>
    </adl:InputFile>
    <adl:OutputFile>
      <adl:Name>output.txt</adl:Name>
    </adl:OutputFile>
    <adl:OutputFile>
      <adl:Name>stdout.txt</adl:Name>
    </adl:OutputFile>
    <adl:OutputFile>
      <adl:Name>stderr.txt</adl:Name>
    </adl:OutputFile>
    <adl:OutputFile>
      <adl:Name>gmlog</adl:Name>
    </adl:OutputFile>
  <nordugrid-adl:DelegationID>373ba766b23b</nordugrid-adl:DelegationID></adl:DataStaging>
</adl:ActivityDescription>`;

describe("ADL from the ARC client", () => {
  it("reads the prefixed ADL the ARC client sends", () => {
    const d = one(ARC_CLIENT_ADL);
    expect(d).toMatchObject({
      language: "emies:adl",
      jobName: "harness-main",
      executable: "echoargs.sh",
      arguments: ["alpha", "beta gamma"],
      stdout: "stdout.txt",
      stderr: "stderr.txt",
      logDir: "gmlog",
      queue: "fork",
      wallTimeSeconds: 600,
      delegationId: "373ba766b23b",
    });
    expect(d.inputFiles).toEqual([
      { name: "echoargs.sh", executable: true, options: {} },
      { name: "input.txt", executable: false, options: {} },
    ]);
    expect(d.outputFiles.map((f) => [f.name, f.target, f.useIfFailure])).toEqual([
      ["output.txt", undefined, true],
      ["stdout.txt", undefined, true],
      ["stderr.txt", undefined, true],
      ["gmlog", undefined, true],
    ]);
  });

  it("reads the same content with a default namespace", () => {
    const defaultNs = ARC_CLIENT_ADL.replace(/<(\/?)adl:/g, "<$1").replace("xmlns:adl=", "xmlns=");
    expect(defaultNs).not.toMatch(/<adl:/);
    const d = one(defaultNs);
    expect(d.executable).toBe("echoargs.sh");
    expect(d.delegationId).toBe("373ba766b23b");
  });
});

describe("ADL Application", () => {
  it("maps executable details, streams, environment, ARC extensions", () => {
    const d = one(
      adl(`<Application>
        <Executable><Path> /bin/sh </Path><Argument>-c</Argument><Argument> echo &lt;x&gt; &amp; </Argument>
          <FailIfExitCodeNotEqualTo>3</FailIfExitCodeNotEqualTo></Executable>
        <Input>in</Input><Output>out</Output><Error>err</Error>
        <Environment><Name>A</Name><Value>1</Value></Environment>
        <Environment><Name>EMPTY</Name></Environment>
        <nordugrid-adl:Rerun>2</nordugrid-adl:Rerun>
        <nordugrid-adl:Priority>70</nordugrid-adl:Priority>
        <nordugrid-adl:StartTime>2030-05-06T07:08:09Z</nordugrid-adl:StartTime>
        <nordugrid-adl:DryRun>true</nordugrid-adl:DryRun>
        <nordugrid-adl:CredentialService>https://myproxy.org</nordugrid-adl:CredentialService>
      </Application>`),
    );
    expect(d).toMatchObject({
      executable: "/bin/sh",
      arguments: ["-c", " echo <x> & "],
      successExitCode: 3,
      stdin: "in",
      stdout: "out",
      stderr: "err",
      environment: [
        { name: "A", value: "1" },
        { name: "EMPTY", value: "" },
      ],
      rerun: 2,
      priority: 70,
      dryRun: true,
      hints: { credentialserver: "https://myproxy.org" },
    });
    expect(d.startTime?.toISOString()).toBe("2030-05-06T07:08:09.000Z");
  });

  it("stores AccessControl as its inner XML", () => {
    const d = one(
      adl(`<Application><nordugrid-adl:AccessControl Type="GACL">
        <gacl version="0.0.1"><entry><any-user/><allow><read/></allow></entry></gacl>
      </nordugrid-adl:AccessControl></Application>`),
    );
    expect(d.acl).toBe('<gacl version="0.0.1"><entry><any-user/><allow><read/></allow></entry></gacl>');
  });

  it("WipeTime is the lifetime (seconds or xsd duration); ExpirationTime as duration or hint", () => {
    expect(one(adl("<Application><WipeTime>3600</WipeTime></Application>")).lifetimeSeconds).toBe(3600);
    expect(one(adl("<Application><WipeTime>P2D</WipeTime></Application>")).lifetimeSeconds).toBe(172800);
    expect(one(adl("<Application><ExpirationTime>PT1H</ExpirationTime></Application>")).lifetimeSeconds).toBe(3600);
    const d = one(adl("<Application><ExpirationTime>2030-01-01T00:00:00Z</ExpirationTime></Application>"));
    expect(d.lifetimeSeconds).toBeUndefined();
    expect(d.hints.expirationtime).toBe("2030-01-01T00:00:00Z");
    expect(error(adl("<Application><WipeTime>forever</WipeTime></Application>")).message).toMatch(/<WipeTime>.*'forever'/);
  });

  it("maps Notification to notify flags", () => {
    const d = one(
      adl(`<Application>
        <Notification><Protocol>email</Protocol><Recipient>a@b.org</Recipient><Recipient>c@d.org</Recipient>
          <OnState>preprocessing</OnState><OnState>terminal</OnState><OnState>TERMINAL</OnState></Notification>
        <Notification><Protocol>email</Protocol><Recipient>x@y.org</Recipient></Notification>
        <Notification><Protocol>sms</Protocol><Recipient>123</Recipient></Notification>
      </Application>`),
    );
    expect(d.notify).toEqual(["be a@b.org c@d.org", "be x@y.org"]);
    expect(
      error(adl("<Application><Notification><Recipient>a@b</Recipient><OnState>bogus</OnState></Notification></Application>")).message,
    ).toMatch(/unknown state 'bogus'/);
  });

  it("rejects bad numbers and booleans naming the element", () => {
    expect(error(adl("<Application><nordugrid-adl:Rerun>x</nordugrid-adl:Rerun></Application>")).message).toMatch(
      /<Rerun>.*'x' is not a whole number/,
    );
    expect(error(adl("<Application><nordugrid-adl:DryRun>perhaps</nordugrid-adl:DryRun></Application>")).message).toMatch(/<DryRun>/);
  });
});

describe("ADL Resources", () => {
  it("maps times, memory in bytes (rounded up to MB), disk, slots", () => {
    const d = one(
      adl(`<Resources><QueueName>long</QueueName><WallTime>7200</WallTime><TotalCPUTime>3600</TotalCPUTime>
        <IndividualPhysicalMemory>1073741824</IndividualPhysicalMemory>
        <IndividualVirtualMemory>1048577</IndividualVirtualMemory>
        <DiskSpaceRequirement>500000000</DiskSpaceRequirement>
        <SlotRequirement><NumberOfSlots>8</NumberOfSlots><SlotsPerHost>4</SlotsPerHost>
          <ExclusiveExecution>true</ExclusiveExecution></SlotRequirement></Resources>`),
    );
    expect(d).toMatchObject({
      queue: "long",
      wallTimeSeconds: 7200,
      cpuTimeSeconds: 3600,
      memoryMB: 1024,
      virtualMemoryMB: 2,
      diskMB: 477,
      count: 8,
      countPerNode: 4,
      exclusive: true,
    });
  });

  it("IndividualCPUTime is scaled by the slot count when no total is given", () => {
    const d = one(
      adl(
        "<Resources><IndividualCPUTime>100</IndividualCPUTime><SlotRequirement><NumberOfSlots>4</NumberOfSlots></SlotRequirement></Resources>",
      ),
    );
    expect(d.cpuTimeSeconds).toBe(400);
  });

  it("SlotsPerHost useNumberOfSlots=true takes all slots on one host", () => {
    const d = one(
      adl(
        '<Resources><SlotRequirement><NumberOfSlots>6</NumberOfSlots><SlotsPerHost useNumberOfSlots="true">1</SlotsPerHost></SlotRequirement></Resources>',
      ),
    );
    expect(d.countPerNode).toBe(6);
  });

  it("maps runtime environments and hints", () => {
    const d = one(
      adl(`<Resources>
        <RuntimeEnvironment><Name>APPS/HEP/ATLAS</Name><Version>1.2</Version><Option>a</Option><Option>b</Option></RuntimeEnvironment>
        <RuntimeEnvironment><Name>ENV/PROXY</Name></RuntimeEnvironment>
        <OperatingSystem><Family>linux</Family><Name>centos</Name><Version>7</Version></OperatingSystem>
        <Platform>amd64</Platform><NodeAccess>outbound</NodeAccess>
        <ParallelEnvironment><Type>MPI</Type></ParallelEnvironment></Resources>`),
    );
    expect(d.runtimeEnvironments).toEqual([
      { name: "APPS/HEP/ATLAS", version: "1.2", options: ["a", "b"] },
      { name: "ENV/PROXY", version: undefined, options: [] },
    ]);
    expect(d.hints).toEqual({
      osfamily: "linux",
      osname: "centos",
      osversion: "7",
      platform: "amd64",
      nodeaccess: "outbound",
      parallelenvironment: "MPI",
    });
  });

  it("Coprocessor: a GPU kind is one GPU, optional asks for none, other kinds are refused by name", () => {
    expect(one(adl("<Resources><Coprocessor>CUDA</Coprocessor></Resources>")).gpus).toBe(1);
    expect(one(adl('<Resources><Coprocessor optional="true">GPU</Coprocessor></Resources>')).gpus).toBeUndefined();
    expect(error(adl("<Resources><Coprocessor>FPGA</Coprocessor></Resources>")).message).toMatch(/<Coprocessor>.*'FPGA' is not supported/);
  });

  it("rejects a zero disk requirement and negative memory", () => {
    expect(error(adl("<Resources><DiskSpaceRequirement>0</DiskSpaceRequirement></Resources>")).message).toMatch(/positive number of bytes/);
    expect(error(adl("<Resources><IndividualPhysicalMemory>-5</IndividualPhysicalMemory></Resources>")).message).toMatch(
      /must not be negative/,
    );
  });
});

describe("ADL DataStaging", () => {
  it("maps inputs with sources, options, delegation and ClientDataPush", () => {
    const d = one(
      adl(`<DataStaging><ClientDataPush>true</ClientDataPush>
        <InputFile><Name>remote</Name>
          <Source><URI>https://example.org;threads=2/data</URI><DelegationID>d7</DelegationID>
            <Option><Name>cache</Name><Value>no</Value></Option>
            <Option><Name>location</Name><Value>https://mirror.org/data</Value></Option></Source>
          <Source><URI>https://second.org/data</URI></Source>
          <IsExecutable>false</IsExecutable></InputFile>
        <InputFile><Name>local</Name><IsExecutable>1</IsExecutable></InputFile>
      </DataStaging>`),
    );
    expect(d.freeStageIn).toBe(true);
    expect(d.inputFiles).toEqual([
      {
        name: "remote",
        source: "https://example.org/data",
        delegationId: "d7",
        executable: false,
        locations: ["https://mirror.org/data"],
        options: { threads: "2", cache: "no" },
      },
      { name: "local", executable: true, options: {} },
    ]);
  });

  it("maps outputs: one entry per Target, UseIf flags, CreationFlag", () => {
    const d = one(
      adl(`<DataStaging><OutputFile><Name>res</Name>
          <Target><URI>https://se1.org/res</URI><DelegationID>t1</DelegationID><Mandatory>true</Mandatory>
            <UseIfFailure>true</UseIfFailure><UseIfCancel>true</UseIfCancel><UseIfSuccess>false</UseIfSuccess>
            <CreationFlag>dontOverwrite</CreationFlag></Target>
          <Target><URI>https://se2.org/res</URI><CreationFlag>overwrite</CreationFlag></Target>
        </OutputFile></DataStaging>`),
    );
    expect(d.outputFiles).toEqual([
      {
        name: "res",
        target: "https://se1.org/res",
        delegationId: "t1",
        options: { overwrite: "no" },
        useIfSuccess: false,
        useIfFailure: true,
        useIfCancel: true,
      },
      {
        name: "res",
        target: "https://se2.org/res",
        options: { overwrite: "yes" },
        useIfSuccess: true,
        useIfFailure: false,
        useIfCancel: false,
      },
    ]);
  });

  it("rejects CreationFlag append and a Source without URI", () => {
    expect(
      error(
        adl(
          "<DataStaging><OutputFile><Name>o</Name><Target><URI>https://h/o</URI><CreationFlag>append</CreationFlag></Target></OutputFile></DataStaging>",
        ),
      ).message,
    ).toMatch(/'append' is not supported/);
    expect(error(adl("<DataStaging><InputFile><Name>i</Name><Source></Source></InputFile></DataStaging>")).message).toMatch(
      /<URI> is required/,
    );
    expect(error(adl("<DataStaging><InputFile><IsExecutable>true</IsExecutable></InputFile></DataStaging>")).message).toMatch(
      /<Name> is required/,
    );
  });
});

describe("ADL documents", () => {
  const two = `<ActivityDescriptions xmlns:nordugrid-adl="http://www.nordugrid.org/es/2011/12/nordugrid-adl"><ActivityDescription xmlns="http://www.eu-emi.eu/es/2010/12/adl"><Application><Executable><Path>/bin/echo</Path><Argument>adl1</Argument></Executable></Application></ActivityDescription><ActivityDescription xmlns="http://www.eu-emi.eu/es/2010/12/adl"><Application><Executable><Path>/bin/echo</Path><Argument>adl2</Argument></Executable></Application><DataStaging><nordugrid-adl:DelegationID>dd</nordugrid-adl:DelegationID></DataStaging></ActivityDescription></ActivityDescriptions>`;

  it("ActivityDescriptions with two children gives two descriptions", () => {
    expect(parseAdl(two).map((d) => d.arguments)).toEqual([["adl1"], ["adl2"]]);
  });

  it("each item's source is its element text with the root's namespace declarations added", () => {
    const items = parseAdlSettled(two);
    const src = items[1]?.source ?? "";
    expect(
      src.startsWith(
        '<ActivityDescription xmlns:nordugrid-adl="http://www.nordugrid.org/es/2011/12/nordugrid-adl" xmlns="http://www.eu-emi.eu/es/2010/12/adl">',
      ),
    ).toBe(true);
    expect(src.endsWith("</ActivityDescription>")).toBe(true);
    // The stored source is itself a complete, parseable description.
    expect(parseAdl(src)[0]).toMatchObject({ arguments: ["adl2"], delegationId: "dd" });
  });

  it("one bad child fails alone", () => {
    const text = `<ActivityDescriptions>${adl("<Resources><WallTime>x</WallTime></Resources>")}${adl("<Resources><WallTime>60</WallTime></Resources>")}<Other/></ActivityDescriptions>`;
    const items = parseAdlSettled(text);
    expect(items.map((i) => i.ok)).toEqual([false, true, false]);
    expect(items[2]?.ok === false && items[2].error.message).toMatch(/found <Other>/);
  });

  it("a single description keeps the whole text as source", () => {
    expect(parseAdlSettled(`  ${ARC_CLIENT_ADL}\n`)[0]?.source).toBe(ARC_CLIENT_ADL);
  });

  it("rejects a non-ADL root and an empty ActivityDescriptions", () => {
    expect(error("<JobDefinition/>").code).toBe("UNSUPPORTED_FORMAT");
    expect(error("<ActivityDescriptions>  </ActivityDescriptions>").message).toMatch(/contains no ActivityDescription/);
  });

  it("reports malformed XML with its position (the ARC 6.17 bulk defect body)", () => {
    const e = error("</ActivityDescriptions>");
    expect(e).toBeInstanceOf(AdlSyntaxError);
    expect(e.code).toBe("ADL_SYNTAX");
    const e2 = error(`<ActivityDescription>\n  <Application>\n</ActivityDescription>`);
    expect(e2.message).toMatch(/^ADL syntax error at line \d+, column \d+: /);
    expect(e2.position?.line).toBeGreaterThan(1);
  });

  it("rejects DOCTYPE and ENTITY declarations (no entity expansion)", () => {
    const bomb = `<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;">]>${adl("<ActivityIdentification><Name>&lol2;</Name></ActivityIdentification>")}`;
    const e = error(bomb);
    expect(e.code).toBe("ADL_SYNTAX");
    expect(e.message).toMatch(/DOCTYPE declarations are not allowed/);
    expect(e.position).toMatchObject({ line: 1, column: 22 });
    expect(error(`<ActivityDescription><!ENTITY x "y"></ActivityDescription>`).message).toMatch(/ENTITY declarations are not allowed/);
  });

  it("does not expand unknown entity references", () => {
    const d = one(adl("<ActivityIdentification><Name>a&#65;&#x42;&unknown;</Name></ActivityIdentification>"));
    expect(d.jobName).toBe("aAB&unknown;");
  });

  it("decodes predefined entities exactly once", () => {
    expect(one(adl("<ActivityIdentification><Name>a&amp;lt;b&gt;</Name></ActivityIdentification>")).jobName).toBe("a&lt;b>");
  });

  it("enforces the size limit in bytes", () => {
    const text = adl(`<ActivityIdentification><Name>${"é".repeat(600)}</Name></ActivityIdentification>`);
    const e = error(text, { maxBytes: 1000 });
    expect(e.code).toBe("TOO_LARGE");
    expect(e.message).toMatch(/bytes, the limit is 1000 bytes/);
    expect(parseAdl(text, { maxBytes: 5000 })).toHaveLength(1);
  });

  it("refuses absurdly deep element nesting", () => {
    const deep = adl("<x>".repeat(5000) + "</x>".repeat(5000));
    expect(error(deep).message).toMatch(/nested more than 64 levels/);
  });

  it("CDATA content is taken literally", () => {
    expect(
      one(adl("<Application><Executable><Path>/bin/sh</Path><Argument><![CDATA[a &amp; <b>]]></Argument></Executable></Application>"))
        .arguments,
    ).toEqual(["a &amp; <b>"]);
  });
});
