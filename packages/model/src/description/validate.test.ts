import { describe, expect, it } from "vitest";
import { InvalidDescriptionError } from "../errors.js";
import { emptyDescription, type JobDescription } from "./types.js";
import { MAX_AUX_CHARS, MAX_AUX_EXECUTABLES, normalizeSessionPath, validateDescription } from "./validate.js";

function base(patch: Partial<JobDescription> = {}): JobDescription {
  return { ...emptyDescription("nordugrid:xrsl"), executable: "/bin/true", ...patch };
}

function rejected(d: JobDescription): InvalidDescriptionError {
  try {
    validateDescription(d);
  } catch (e) {
    expect(e).toBeInstanceOf(InvalidDescriptionError);
    expect((e as InvalidDescriptionError).code).toBe("INVALID_DESCRIPTION");
    return e as InvalidDescriptionError;
  }
  throw new Error("expected the description to be rejected");
}

const input = (name: string, extra: object = {}) => ({ name, executable: false, options: {}, ...extra });
const output = (name: string, extra: object = {}) => ({
  name,
  options: {},
  useIfSuccess: true,
  useIfFailure: false,
  useIfCancel: false,
  ...extra,
});

describe("normalizeSessionPath", () => {
  it.each([
    ["a", "a"],
    ["./a", "a"],
    ["a//b/./c", "a/b/c"],
    ["a/../b", "b"],
    ["dir/", "dir/"],
    ["./dir//", "dir/"],
    [".", ""],
    ["", ""],
  ])("%j → %j", (p, expected) => {
    expect(normalizeSessionPath(p)).toBe(expected);
  });

  it.each(["..", "../x", "a/../../x", "/etc/passwd", "a\0b", "./../x"])("%j escapes or is unsafe", (p) => {
    expect(normalizeSessionPath(p)).toBeUndefined();
  });
});

describe("validateDescription: the copy", () => {
  it("is as deep as structuredClone's: dates, nested lists and objects, client-named keys (even __proto__) copied as data", () => {
    const hints = JSON.parse('{"__proto__": "x", "a": "b"}') as Record<string, string>;
    const d = base({
      startTime: new Date(1_700_000_000_000),
      inputFiles: [
        input("in", { source: "https://x/in", options: JSON.parse('{"__proto__": "p", "threads": "4"}'), locations: ["https://y/in"] }),
      ],
      runtimeEnvironments: [{ name: "ENV/X", options: ["o"] }],
      environment: [{ name: "A", value: "1" }],
      hints,
      jobName: undefined,
    });
    const v = validateDescription(d);
    expect(v).toEqual(structuredClone(d));
    expect(JSON.stringify(v)).toBe(JSON.stringify(structuredClone(d)));
    expect(v.startTime).toBeInstanceOf(Date);
    expect(v.startTime).not.toBe(d.startTime);
    expect(v.inputFiles[0]!.options).not.toBe(d.inputFiles[0]!.options);
    expect(v.inputFiles[0]!.locations).not.toBe(d.inputFiles[0]!.locations);
    expect(Object.getPrototypeOf(v.hints)).toBe(Object.prototype);
    expect(Object.keys(v.hints)).toEqual(["__proto__", "a"]);
    expect(Object.keys(v.inputFiles[0]!.options)).toEqual(["__proto__", "threads"]);
  });
});

describe("validateDescription: paths", () => {
  it("normalizes file names and does not mutate the input", () => {
    const d = base({
      inputFiles: [input("./in//a.txt")],
      outputFiles: [output("out/./b.txt"), output("results//"), output("@./list.txt")],
      stdout: "./o.txt",
      stderr: "logs/../e.txt",
      stdin: "in/a.txt",
      logDir: "gmlog/",
    });
    const v = validateDescription(d);
    expect(v.inputFiles[0]?.name).toBe("in/a.txt");
    expect(v.outputFiles.map((f) => f.name)).toEqual(["out/b.txt", "results/", "@list.txt"]);
    expect([v.stdin, v.stdout, v.stderr, v.logDir]).toEqual(["in/a.txt", "o.txt", "e.txt", "gmlog"]);
    expect(d.inputFiles[0]?.name).toBe("./in//a.txt");
  });

  it.each([
    [{ inputFiles: [input("../secret")] }, "inputFiles[0].name", /leaves the session directory/],
    [{ inputFiles: [input("/etc/passwd")] }, "inputFiles[0].name", /must be relative to the session directory/],
    [{ inputFiles: [input("a\0b")] }, "inputFiles[0].name", /NUL byte/],
    [{ inputFiles: [input("")] }, "inputFiles[0].name", /must not be empty/],
    [{ inputFiles: [input("dir/")] }, "inputFiles[0].name", /must be a file/],
    [{ outputFiles: [output("x/../../y")] }, "outputFiles[0].name", /leaves the session directory/],
    [{ outputFiles: [output("@../list")] }, "outputFiles[0].name", /leaves the session directory/],
    [{ stdout: "/dev/null" }, "stdout", /absolute/],
    [{ stderr: "../err" }, "stderr", /leaves/],
    [{ stdin: "." }, "stdin", /names the session directory itself/],
    [{ logDir: "../../log" }, "logDir", /leaves/],
  ])("rejects %j", (patch, field, re) => {
    const e = rejected(base(patch as Partial<JobDescription>));
    expect(e.field).toBe(field);
    expect(e.message).toMatch(re);
  });

  it("rejects duplicate input names after normalization", () => {
    expect(rejected(base({ inputFiles: [input("a"), input("./a")] })).message).toMatch(/'a' is listed more than once/);
  });
});

describe("validateDescription: executable", () => {
  it("accepts absolute and $VAR executables without inputs", () => {
    expect(validateDescription(base({ executable: "/bin/echo" })).executable).toBe("/bin/echo");
    expect(validateDescription(base({ executable: "$HOME/run" })).executable).toBe("$HOME/run");
  });

  it("a relative executable must be an input and is marked executable", () => {
    const v = validateDescription(base({ executable: "./run.sh", inputFiles: [input("run.sh")] }));
    expect(v.executable).toBe("run.sh");
    expect(v.inputFiles[0]?.executable).toBe(true);
    expect(rejected(base({ executable: "run.sh" })).message).toMatch(/neither an absolute path nor one of the input files/);
    expect(validateDescription(base({ executable: "run.sh", freeStageIn: true })).executable).toBe("run.sh");
  });

  it("rejects an escaping executable", () => {
    expect(rejected(base({ executable: "../bin/x" })).field).toBe("executable");
  });
});

describe("validateDescription: numbers", () => {
  it.each([
    [{ wallTimeSeconds: 0 }, "wallTimeSeconds", /wall time .* must be greater than 0, got 0/],
    [{ cpuTimeSeconds: -1 }, "cpuTimeSeconds", /greater than 0/],
    [{ lifetimeSeconds: 1.5 }, "lifetimeSeconds", /whole number/],
    [{ memoryMB: -1 }, "memoryMB", /memory .* must be 0 or more/],
    [{ diskMB: -3 }, "diskMB", /0 or more/],
    [{ count: 0 }, "count", /slot count .* greater than 0/],
    [{ countPerNode: 2 }, "countPerNode", /requires a slot count/],
    [{ count: 6, countPerNode: 4 }, "countPerNode", /6 is not a multiple of .* 4/],
    [{ rerun: -1 }, "rerun", /0 or more/],
    [{ priority: 2.5 }, "priority", /whole number/],
    [{ startTime: new Date("garbage") }, "startTime", /not a valid time/],
  ])("rejects %j", (patch, field, re) => {
    const e = rejected(base(patch as Partial<JobDescription>));
    expect(e.field).toBe(field);
    expect(e.message).toMatch(re);
  });

  it("clamps priority to 1..100 and caps rerun", () => {
    expect(validateDescription(base({ priority: 500 })).priority).toBe(100);
    expect(validateDescription(base({ priority: -4 })).priority).toBe(1);
    expect(validateDescription(base({ rerun: 9 }), { maxRerun: 5 }).rerun).toBe(5);
    expect(validateDescription(base({ rerun: 2 }), { maxRerun: 5 }).rerun).toBe(2);
  });

  it("accepts valid slot layouts", () => {
    expect(validateDescription(base({ count: 8, countPerNode: 4 })).countPerNode).toBe(4);
  });
});

describe("validateDescription: URLs, names, ids", () => {
  it("accepts the usual transfer schemes", () => {
    const v = validateDescription(
      base({
        inputFiles: [input("a", { source: "https://h.org/a" }), input("b", { source: "gsiftp://h.org:2811/b" })],
        outputFiles: [output("o", { target: "davs://se.org/o", locations: ["srm://se.org/o"] })],
      }),
    );
    expect(v.inputFiles).toHaveLength(2);
  });

  it.each([
    [{ inputFiles: [input("a", { source: "not a url" })] }, "inputFiles[0].source", /is not a URL/],
    [{ inputFiles: [input("a", { source: "http://[bad/x" })] }, "inputFiles[0].source", /not a valid URL/],
    [{ inputFiles: [input("a", { source: "file:///etc/passwd" })] }, "inputFiles[0].source", /local paths are not allowed/],
    [{ outputFiles: [output("o", { target: "/tmp/x" })] }, "outputFiles[0].target", /not a URL/],
    [{ outputFiles: [output("o", { locations: ["nope"] })] }, "outputFiles[0].locations", /location URL/],
    [{ inputFiles: [input("a", { source: "https://h/a", options: { "a b": "x" } })] }, "inputFiles[0].options", /not allowed/],
    [{ environment: [{ name: "1BAD", value: "x" }] }, "environment[0].name", /'1BAD' is not valid/],
    [{ environment: [{ name: "A-B", value: "x" }] }, "environment[0].name", /not valid/],
    [{ delegationId: "../x" }, "delegationId", /may only contain/],
    [{ inputFiles: [input("a", { delegationId: "a/b" })] }, "inputFiles[0].delegationId", /may only contain/],
    [{ queue: "short; rm -rf" }, "queue", /queue name/],
    [{ runtimeEnvironments: [{ name: "../../etc/x", options: [] }] }, "runtimeEnvironments[0].name", /runtime environment name/],
    [{ runtimeEnvironments: [{ name: "APPS/X", version: "1 2", options: [] }] }, "runtimeEnvironments[0].version", /version/],
    [{ jobName: "a\nb" }, "jobName", /control characters/],
    [{ arguments: ["a\0"] }, "arguments", /NUL/],
    [{ notify: ["zz user@example.org"] }, "notify[0]", /flags 'zz'/],
    [{ notify: ["be"] }, "notify[0]", /e-mail addresses/],
  ])("rejects %j", (patch, field, re) => {
    const e = rejected(base(patch as Partial<JobDescription>));
    expect(e.field).toBe(field);
    expect(e.message).toMatch(re);
  });

  it("accepts notify entries with and without flags", () => {
    expect(validateDescription(base({ notify: ["user@example.org", "bqfedc a@b.org c@d.org"] })).notify).toHaveLength(2);
  });
});

describe("validateDescription: pre- and post-executables", () => {
  const aux = (path: string, extra: object = {}) => ({ path, arguments: [], ...extra });

  it("follow the executable's rules: relative ones are inputs made executable, absolute and $VAR kept", () => {
    const v = validateDescription(
      base({
        inputFiles: [input("setup.sh")],
        preExecutables: [aux("./setup.sh", { arguments: ["a\nb"] })],
        postExecutables: [aux("/bin/true"), aux("$X/y", { successExitCode: 3 })],
      }),
    );
    expect(v.preExecutables).toEqual([{ path: "setup.sh", arguments: ["a\nb"] }]);
    expect(v.inputFiles[0]?.executable).toBe(true);
    expect(v.postExecutables?.map((x) => x.path)).toEqual(["/bin/true", "$X/y"]);
    expect(validateDescription(base({ preExecutables: [] })).preExecutables).toBeUndefined();
  });

  it("refuses hostile paths, arguments, codes and counts, naming which one", () => {
    expect(rejected(base({ preExecutables: [aux("/bin/true"), aux("setup.sh")] })).message).toMatch(
      /pre-executable 2 'setup.sh' is neither an absolute path nor one of the input files/,
    );
    expect(rejected(base({ freeStageIn: true, postExecutables: [aux("../../etc/x")] })).message).toMatch(
      /post-executable 1 '..\/..\/etc\/x' leaves the session directory/,
    );
    expect(rejected(base({ preExecutables: [aux("/bin/\0x")] })).message).toMatch(/pre-executable 1 contains a NUL byte/);
    expect(rejected(base({ preExecutables: [aux(" ")] })).message).toMatch(/pre-executable 1 must not be empty/);
    expect(rejected(base({ postExecutables: [aux("/bin/echo", { arguments: ["a\0"] })] })).message).toMatch(
      /arguments of post-executable 1 must not contain NUL bytes/,
    );
    expect(rejected(base({ postExecutables: [aux("/bin/echo", { arguments: ["x".repeat(MAX_AUX_CHARS)] })] })).message).toMatch(
      /post-executable 1 and its arguments are \d+ characters long/,
    );
    expect(rejected(base({ preExecutables: [aux("/bin/true", { successExitCode: 256 })] })).message).toMatch(/must be 0 to 255, got 256/);
    const many = Array.from({ length: MAX_AUX_EXECUTABLES + 1 }, () => aux("/bin/true"));
    expect(rejected(base({ preExecutables: many })).message).toMatch(
      new RegExp(`${MAX_AUX_EXECUTABLES + 1} pre-executables; at most ${MAX_AUX_EXECUTABLES}`),
    );
  });
});
