import { describe, expect, it } from "vitest";
import { DescriptionError } from "../../errors.js";
import type { JobDescription } from "../types.js";
import { parseAdl } from "./index.js";

// The ADL elements beyond the common core, each handled, ignored or refused as docs/adl.md says.

const NS = 'xmlns="http://www.eu-emi.eu/es/2010/12/adl"';
const adl = (inner: string) => `<ActivityDescription ${NS}>${inner}</ActivityDescription>`;
const one = (text: string): JobDescription => parseAdl(text)[0] as JobDescription;

function error(text: string): DescriptionError {
  try {
    parseAdl(text);
  } catch (e) {
    expect(e).toBeInstanceOf(DescriptionError);
    return e as DescriptionError;
  }
  throw new Error("expected the ADL to be rejected");
}

describe("ADL PreExecutable and PostExecutable", () => {
  it("reads PreExecutable and PostExecutable in order, with arguments and expected codes", () => {
    const d = one(
      adl(`<Application><Executable><Path>/bin/true</Path></Executable>
        <PreExecutable><Path> setup.sh </Path><Argument> a b </Argument><Argument>c</Argument></PreExecutable>
        <PreExecutable><Path>/bin/check</Path><FailIfExitCodeNotEqualTo>4</FailIfExitCodeNotEqualTo></PreExecutable>
        <PostExecutable><Path>$HOME/report</Path></PostExecutable></Application>`),
    );
    expect(d.preExecutables).toEqual([
      { path: "setup.sh", arguments: [" a b ", "c"] },
      { path: "/bin/check", arguments: [], successExitCode: 4 },
    ]);
    expect(d.postExecutables).toEqual([{ path: "$HOME/report", arguments: [] }]);
    expect(one(adl("<Application/>")).preExecutables).toBeUndefined();
  });

  it.each(["PreExecutable", "PostExecutable"])("%s needs a Path and a whole-number expected code", (el) => {
    expect(error(adl(`<Application><${el}><Argument>x</Argument></${el}></Application>`)).message).toMatch(
      new RegExp(`<${el}> \\(line 1, column \\d+\\): <Path> is required`),
    );
    expect(error(adl(`<Application><${el}><Path> </Path></${el}></Application>`)).message).toMatch(/<Path> must not be empty/);
    expect(
      error(adl(`<Application><${el}><Path>/x</Path><FailIfExitCodeNotEqualTo>ok</FailIfExitCodeNotEqualTo></${el}></Application>`))
        .message,
    ).toMatch(/<FailIfExitCodeNotEqualTo>.*'ok' is not a whole number/);
  });
});

describe("ADL Resources A-REX refuses or checks", () => {
  it.each([
    ["NetworkInfo", "network type"],
    ["Benchmark", "benchmarks it publishes"],
  ])("refuses %s by name, with the reason", (el, why) => {
    const e = error(adl(`<Resources><${el}>x</${el}></Resources>`));
    expect(e.code).toBe("INVALID_DESCRIPTION");
    expect(e.message).toMatch(new RegExp(`<${el}> \\(line 1, column \\d+\\): is not supported by this computing element: .*${why}`));
  });

  it("NodeAccess is one of inbound, outbound, inoutbound (kept as a hint), as A-REX requires", () => {
    expect(one(adl("<Resources><NodeAccess>inoutbound</NodeAccess></Resources>")).hints.nodeaccess).toBe("inoutbound");
    expect(error(adl("<Resources><NodeAccess>sideways</NodeAccess></Resources>")).message).toMatch(
      /<NodeAccess>.*'sideways' is not one of inbound, outbound, inoutbound/,
    );
  });

  it("ParallelEnvironment counts must be whole numbers and options need a Name, as A-REX requires", () => {
    expect(
      one(adl("<Resources><ParallelEnvironment><Type>MPI</Type><ProcessesPerSlot>2</ProcessesPerSlot></ParallelEnvironment></Resources>"))
        .hints.parallelenvironment,
    ).toBe("MPI");
    expect(
      error(adl("<Resources><ParallelEnvironment><ThreadsPerProcess>many</ThreadsPerProcess></ParallelEnvironment></Resources>")).message,
    ).toMatch(/<ThreadsPerProcess>.*'many'/);
    expect(
      error(adl("<Resources><ParallelEnvironment><Option><Value>x</Value></Option></ParallelEnvironment></Resources>")).message,
    ).toMatch(/<Name> is required/);
  });
});

describe("ADL elements A-REX keeps without acting on them", () => {
  it("RemoteLogging URLs become the jobreport hint (as xRSL jobreport); a missing or bad URL is refused", () => {
    const d = one(
      adl(
        "<Application><RemoteLogging><ServiceType>SGAS</ServiceType><URL>https://sgas.example.org/r</URL></RemoteLogging><RemoteLogging><ServiceType>APEL</ServiceType><URL>https://apel.example.org</URL></RemoteLogging></Application>",
      ),
    );
    expect(d.hints.jobreport).toBe("https://sgas.example.org/r; https://apel.example.org");
    expect(error(adl("<Application><RemoteLogging><ServiceType>SGAS</ServiceType></RemoteLogging></Application>")).message).toMatch(
      /<URL> is required/,
    );
    expect(error(adl("<Application><RemoteLogging><URL>not a url</URL></RemoteLogging></Application>")).message).toMatch(
      /'not a url' is not a URL/,
    );
  });

  it("RemoteSessionAccess and Target Mandatory must be booleans, and are not used", () => {
    expect(one(adl("<Resources><RemoteSessionAccess>true</RemoteSessionAccess></Resources>")).hints).toEqual({});
    expect(error(adl("<Resources><RemoteSessionAccess>maybe</RemoteSessionAccess></Resources>")).message).toMatch(
      /<RemoteSessionAccess>.*'maybe'/,
    );
    expect(
      error(
        adl(
          "<DataStaging><OutputFile><Name>o</Name><Target><URI>https://h/o</URI><Mandatory>often</Mandatory></Target></OutputFile></DataStaging>",
        ),
      ).message,
    ).toMatch(/<Mandatory>/);
  });

  it("identification details and unknown elements are ignored", () => {
    const d = one(
      adl(
        "<ActivityIdentification><Name>n</Name><Description>d</Description><Type>single</Type><Annotation>a</Annotation></ActivityIdentification><Application><Executable><Path>/bin/true</Path></Executable><Whatever/></Application>",
      ),
    );
    expect(d.jobName).toBe("n");
    expect(d.hints).toEqual({});
  });
});
