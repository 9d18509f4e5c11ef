import { describe, expect, it } from "vitest";
import { InvalidDescriptionError } from "../../errors.js";
import type { JobDescription } from "../types.js";
import { parseXrsl, parseXrslSettled } from "./index.js";

function one(text: string): JobDescription {
  const all = parseXrsl(text);
  expect(all).toHaveLength(1);
  return all[0] as JobDescription;
}

function invalid(text: string): InvalidDescriptionError {
  try {
    parseXrsl(text);
  } catch (e) {
    expect(e).toBeInstanceOf(InvalidDescriptionError);
    return e as InvalidDescriptionError;
  }
  throw new Error(`expected ${text} to be rejected`);
}

describe("xRSL basic attributes", () => {
  it("maps executable, arguments, std streams, gmlog, jobname, queue", () => {
    const d = one(`&(executable="run.sh")(arguments="a" "b c")(stdin=in.txt)(stdout=out.txt)
      (stderr=err.txt)(gmlog=log)(jobName="my job")(queue=short)`);
    expect(d).toMatchObject({
      language: "nordugrid:xrsl",
      executable: "run.sh",
      arguments: ["a", "b c"],
      stdin: "in.txt",
      stdout: "out.txt",
      stderr: "err.txt",
      logDir: "log",
      jobName: "my job",
      queue: "short",
    });
  });

  it("join=yes makes stderr the stdout file", () => {
    expect(one("&(executable=/bin/true)(stdout=o.txt)(stderr=e.txt)(join=yes)").stderr).toBe("o.txt");
    expect(one("&(executable=/bin/true)(stdout=o.txt)(join=no)").stderr).toBeUndefined();
  });

  it("rejects an attribute given twice and a multi-valued executable", () => {
    expect(invalid("&(executable=a)(executable=b)").message).toMatch(/'executable' \(line 1, column 16\): is given more than once/);
    expect(invalid("&(executable=a b)").message).toMatch(/expects exactly one value/);
  });

  it("rejects operators other than = on job attributes", () => {
    expect(invalid("&(queue!=long)").message).toMatch(/operator '!=' is not supported here; use '='/);
  });

  it("ignores bookkeeping, Globus and unknown attributes", () => {
    const d = one('&(executable=/bin/true)(jobid=x)(hostname=h)(clientxrsl="&(a=b)")(maxcputime=5)(frobnicate=1)');
    expect(d.executable).toBe("/bin/true");
    expect(d.hints).toEqual({});
  });

  it("action must be request", () => {
    expect(one("&(action=request)(executable=/bin/true)").executable).toBe("/bin/true");
    expect(invalid("&(action=cancel)").message).toMatch(/only 'request'/);
  });
});

describe("xRSL time units (docs/decisions.md #21)", () => {
  it.each([
    ["90", 5400],
    ["90s", 90],
    ["2h", 7200],
    ["1h 30m", 5400],
    ["1d", 86400],
    ["1w", 604800],
    ["PT1H30M", 5400],
    ["P1DT1S", 86401],
    ["1.5", 90],
  ])("cputime=%s is %i seconds", (value, seconds) => {
    expect(one(`&(cputime="${value}")`).cpuTimeSeconds).toBe(seconds);
  });

  it("applies to walltime and lifetime too", () => {
    const d = one('&(walltime=10)(lifetime="2d")');
    expect(d.wallTimeSeconds).toBe(600);
    expect(d.lifetimeSeconds).toBe(172800);
  });

  it("rejects a time that is not one", () => {
    expect(invalid('&(walltime="soon")').message).toMatch(/'walltime' .*'soon' is not a time/);
    expect(invalid('&(walltime="PT")').field).toBe("walltime");
  });
});

describe("xRSL resources", () => {
  it("gpus (the CE's own attribute, docs/gpus.md) is a whole number", () => {
    expect(one("&(executable=/bin/true)(gpus=2)").gpus).toBe(2);
    expect(invalid("&(executable=/bin/true)(gpus=two)").message).toMatch(/gpus/);
  });

  it("maps memory, disk, count, countpernode, exclusiveexecution, rerun, priority, dryrun", () => {
    const d = one(`&(memory=2000)(disk=500)(count=8)(countpernode=4)(exclusiveexecution=yes)
      (rerun=2)(priority=120)(dryrun=yes)`);
    expect(d).toMatchObject({
      memoryMB: 2000,
      diskMB: 500,
      count: 8,
      countPerNode: 4,
      exclusive: true,
      rerun: 2,
      priority: 120, // clamped by validation, not here
      dryRun: true,
    });
  });

  it("rejects non-numbers and non-booleans", () => {
    expect(invalid("&(memory=lots)").message).toMatch(/'lots' is not a whole number/);
    expect(invalid("&(exclusiveexecution=maybe)").message).toMatch(/not yes\/no\/true\/false/);
  });

  it("splits runtime environment name, version and options; repeatable", () => {
    const d = one(
      '&(runtimeenvironment="APPS/HEP/ATLAS-1.2.3" "opt1" "opt2")(runTimeEnvironment=ENV/PROXY)(runtimeenvironment="ENV/X-Y-2")',
    );
    expect(d.runtimeEnvironments).toEqual([
      { name: "APPS/HEP/ATLAS", version: "1.2.3", options: ["opt1", "opt2"] },
      { name: "ENV/PROXY", options: [] },
      { name: "ENV/X-Y", version: "2", options: [] },
    ]);
  });

  it("refuses runtime environment version ranges", () => {
    expect(invalid('&(runtimeenvironment>="APPS/X-1.0")').message).toMatch(/cannot be resolved by the CE/);
  });

  it("stores brokering hints, including non-= operators", () => {
    const d = one('&(opsys="linux")(opsys="centos-7")(architecture=x86_64)(nodeaccess=outbound)(middleware>="nordugrid-arc-6")');
    expect(d.hints).toEqual({
      opsys: "linux; centos-7",
      architecture: "x86_64",
      nodeaccess: "outbound",
      middleware: ">=nordugrid-arc-6",
    });
  });

  it("maps environment pairs, delegationid, acl, notify, starttime", () => {
    const d = one(`&(environment=("A" "1")("B" "two words"))(delegationid=abc123)
      (acl="<gacl><entry/></gacl>")(notify="be user@example.org" "f other@example.org")(starttime="2030-01-02T03:04:05Z")`);
    expect(d.environment).toEqual([
      { name: "A", value: "1" },
      { name: "B", value: "two words" },
    ]);
    expect(d.delegationId).toBe("abc123");
    expect(d.acl).toBe("<gacl><entry/></gacl>");
    expect(d.notify).toEqual(["be user@example.org", "f other@example.org"]);
    expect(d.startTime?.toISOString()).toBe("2030-01-02T03:04:05.000Z");
  });

  it("accepts the compact starttime form and rejects garbage", () => {
    expect(one("&(starttime=20300102030405Z)").startTime?.toISOString()).toBe("2030-01-02T03:04:05.000Z");
    expect(invalid("&(starttime=tomorrow)").field).toBe("starttime");
    expect(invalid("&(starttime=20300231000000Z)").field).toBe("starttime");
  });

  it("rejects malformed environment entries", () => {
    expect(invalid('&(environment=("A"))').message).toMatch(/pair/);
    expect(invalid("&(environment=A)").message).toMatch(/each entry must be a list/);
  });
});

describe("xRSL input and output files", () => {
  it("classifies input sources: URL, client upload, size, size.checksum", () => {
    const d = one(`&(inputfiles=("remote" "https://example.org/data")
      ("upload" "")("sized" "1234")("summed" "1234.adler32:0a1b2c3d"))`);
    expect(d.inputFiles).toEqual([
      { name: "remote", source: "https://example.org/data", executable: false, options: {} },
      { name: "upload", executable: false, options: {} },
      { name: "sized", size: 1234, executable: false, options: {} },
      { name: "summed", size: 1234, checksum: "adler32:0a1b2c3d", executable: false, options: {} },
    ]);
  });

  it("splits URL options after the host and reads trailing options", () => {
    const d = one(
      `&(inputfiles=("in1" "gsiftp://example.com;cache=no;threads=4/in1" "delegationid=d1" "location=gsiftp://a.org/x" "location=gsiftp://b.org/x" "checksum=md5"))`,
    );
    expect(d.inputFiles[0]).toEqual({
      name: "in1",
      source: "gsiftp://example.com/in1",
      executable: false,
      delegationId: "d1",
      locations: ["gsiftp://a.org/x", "gsiftp://b.org/x"],
      options: { cache: "no", threads: "4", checksum: "md5" },
    });
  });

  it("rejects an option without a value (ARC XRSLParserTest)", () => {
    expect(invalid('&(inputfiles=("in1" "gsiftp://example.com/in1" "threads"))').message).toMatch(
      /option 'threads' of 'in1' must be written name=value/,
    );
    expect(invalid('&(inputfiles=("in1" "http://h;cache/x"))').message).toMatch(/option without '=value'/);
  });

  it("needs at least name and source", () => {
    expect(invalid('&(inputfiles=("only-name"))').message).toMatch(/needs a name and a source/);
    expect(invalid('&(outputfiles=("only-name"))').message).toMatch(/needs a name and a target/);
  });

  it("an input named / means free stage-in", () => {
    const d = one('&(inputfiles=("/" "")("a" ""))');
    expect(d.freeStageIn).toBe(true);
    expect(d.inputFiles.map((f) => f.name)).toEqual(["a"]);
  });

  it("marks executables; unknown names are rejected", () => {
    const d = one('&(executable=/bin/true)(executables="in1")(inputfiles=("in1" "")("in2" ""))');
    expect(d.inputFiles.map((f) => [f.name, f.executable])).toEqual([
      ["in1", true],
      ["in2", false],
    ]);
    expect(invalid('&(executables="nope")(inputfiles=("in1" ""))').message).toMatch(
      /'nope' is listed as executable but is not one of the inputfiles/,
    );
  });

  it("executables inside an alternative uses the first alternative", () => {
    const d = one('&(|(executables="in1")(executables="in2"))(inputfiles=("in1" "")("in2" ""))');
    expect(d.inputFiles.filter((f) => f.executable).map((f) => f.name)).toEqual(["in1"]);
  });

  it("outputs: kept vs uploaded, preserve=yes, options", () => {
    const d = one(`&(outputfiles=("kept" "")("up" "https://se.org/up" "preserve=yes" "overwrite=yes")
      ("plain" "srm://se.org/p")("dir/" "")("@list" ""))`);
    expect(d.outputFiles).toEqual([
      { name: "kept", options: {}, useIfSuccess: true, useIfFailure: true, useIfCancel: true },
      {
        name: "up",
        target: "https://se.org/up",
        options: { overwrite: "yes" },
        useIfSuccess: true,
        useIfFailure: true,
        useIfCancel: true,
      },
      { name: "plain", target: "srm://se.org/p", options: {}, useIfSuccess: true, useIfFailure: false, useIfCancel: false },
      { name: "dir/", options: {}, useIfSuccess: true, useIfFailure: true, useIfCancel: true },
      { name: "@list", options: {}, useIfSuccess: true, useIfFailure: true, useIfCancel: true },
    ]);
  });

  it("cache and ftpthreads apply to remote files without their own option", () => {
    const d = one(`&(cache=no)(ftpthreads=3)(inputfiles=("a" "http://h/a")("b" "http://h/b" "cache=yes")("c" ""))
      (outputfiles=("o" "http://h/o")("k" ""))`);
    expect(d.inputFiles.map((f) => f.options)).toEqual([{ cache: "no", threads: "3" }, { cache: "yes", threads: "3" }, {}]);
    expect(d.outputFiles.map((f) => f.options)).toEqual([{ threads: "3" }, {}]);
    expect(invalid("&(ftpthreads=11)").message).toMatch(/between 1 and 10/);
  });
});

describe("xRSL multi-job bodies", () => {
  it("returns one description per + part with its own source text", () => {
    const text =
      '+(&(executable="/bin/echo")(arguments="m1"))\n (&(executable="/bin/echo")(arguments="m2")(runtimeenvironment="NO/SUCH/RTE"))';
    const items = parseXrslSettled(text);
    expect(items).toHaveLength(2);
    expect(items.map((i) => i.ok && i.description.arguments)).toEqual([["m1"], ["m2"]]);
    expect(items.map((i) => i.source)).toEqual([
      '&(executable="/bin/echo")(arguments="m1")',
      '&(executable="/bin/echo")(arguments="m2")(runtimeenvironment="NO/SUCH/RTE")',
    ]);
  });

  it("a bad part fails alone", () => {
    const items = parseXrslSettled("+(&(executable=/bin/a))(&(cputime=never))(&(executable=/bin/c))");
    expect(items.map((i) => i.ok)).toEqual([true, false, true]);
    const bad = items[1];
    expect(bad?.ok === false && bad.error.code).toBe("INVALID_DESCRIPTION");
    expect(bad?.ok === false && bad.error.position).toMatchObject({ line: 1, column: 26 });
  });

  it("a single description keeps the whole text as its source", () => {
    const text = "(* job *)\n&(executable=/bin/true)\n";
    expect(parseXrslSettled(text)[0]?.source).toBe("(* job *)\n&(executable=/bin/true)");
  });

  it("parseXrsl throws the first per-job error", () => {
    expect(() => parseXrsl("+(&(executable=/bin/a))(&(memory=x))")).toThrow(/'memory'/);
  });
});
