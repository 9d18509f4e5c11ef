/**
 * Checks a parsed description before a job is created (docs/decisions.md #20: fail at submission, not
 * later in the batch system) and returns a normalized copy. Everything a file name can reach is
 * kept inside the session directory; names that end up in control files or batch commands are
 * restricted to safe characters.
 */
import { InvalidDescriptionError } from "../errors.js";
import { checkLocalInput, localSourcePath } from "./local.js";
import { normalizeSessionPath } from "./paths.js";
import type { InputFile, JobDescription, OutputFile } from "./types.js";

export { normalizeSessionPath } from "./paths.js";

export interface ValidateOptions {
  /** Upper bound for `rerun` (A-REX `maxrerun`); larger requests are lowered to it. */
  maxRerun?: number | undefined;
  /** Absolute path prefixes of site-shared read-only areas that inputs may name (`/cvmfs`). */
  localInputPrefixes?: readonly string[] | undefined;
}

const LABELS: Record<string, string> = {
  wallTimeSeconds: "wall time (xRSL walltime, ADL WallTime)",
  cpuTimeSeconds: "CPU time (xRSL cputime, ADL TotalCPUTime/IndividualCPUTime)",
  lifetimeSeconds: "lifetime (xRSL lifetime, ADL WipeTime)",
  memoryMB: "memory (xRSL memory, ADL IndividualPhysicalMemory)",
  virtualMemoryMB: "virtual memory (ADL IndividualVirtualMemory)",
  diskMB: "disk space (xRSL disk, ADL DiskSpaceRequirement)",
  count: "slot count (xRSL count, ADL NumberOfSlots)",
  countPerNode: "slots per node (xRSL countpernode, ADL SlotsPerHost)",
  gpus: "GPUs (xRSL gpus, ADL Coprocessor)",
  rerun: "rerun (xRSL rerun, ADL Rerun)",
  priority: "priority",
  successExitCode: "expected exit code (ADL FailIfExitCodeNotEqualTo)",
};

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const SAFE_ID = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;
const QUEUE = /^[A-Za-z0-9][A-Za-z0-9._+@-]*$/;
const RTE_NAME = /^[A-Za-z0-9][A-Za-z0-9._+/-]*$/;
const RTE_VERSION = /^[A-Za-z0-9][A-Za-z0-9._+-]*$/;
const NOTIFY_FLAGS = /^[bqfedc]+$/;

function fail(field: string, message: string): never {
  throw new InvalidDescriptionError(`invalid job description: ${message}`, field);
}

function label(field: string): string {
  return LABELS[field] ?? field;
}

function integer(field: string, v: number | undefined, min: number): void {
  if (v === undefined) return;
  if (!Number.isSafeInteger(v)) fail(field, `${label(field)} must be a whole number, got ${v}`);
  if (v < min) {
    fail(field, `${label(field)} must be ${min === 0 ? "0 or more" : min === 1 ? "greater than 0" : `at least ${min}`}, got ${v}`);
  }
}

function noControl(field: string, v: string | undefined, what: string): void {
  if (v !== undefined && /[\x00-\x1f\x7f]/.test(v)) fail(field, `${what} must not contain control characters`);
}

/** A file name inside the session directory; `dirOk` allows a trailing `/`. */
function sessionName(field: string, name: string, what: string, dirOk = false): string {
  if (name === "") fail(field, `${what} must not be empty`);
  if (name.includes("\0")) fail(field, `${what} '${name.replace(/\0/g, "\\0")}' contains a NUL byte`);
  if (name.startsWith("/")) fail(field, `${what} '${name}' must be relative to the session directory, not absolute`);
  const n = normalizeSessionPath(name);
  if (n === undefined) fail(field, `${what} '${name}' leaves the session directory`);
  if (n === "") fail(field, `${what} '${name}' names the session directory itself`);
  if (!dirOk && n.endsWith("/")) fail(field, `${what} '${name}' must be a file, not a directory`);
  return n;
}

function checkUrl(field: string, url: string, what: string): void {
  if (!/^[a-z][a-z0-9+.-]*:\/\//i.test(url)) fail(field, `${what} '${url}' is not a URL (scheme://host/path)`);
  try {
    new URL(url);
  } catch {
    fail(field, `${what} '${url}' is not a valid URL`);
  }
  // The data stager runs on the CE: file:// would copy the CE's own files into (or out of) the job.
  // Listed software areas were turned into file:/// sources by checkInputs and are allowed there.
  if (/^file:/i.test(url) && !(what === "source URL" && url.startsWith("file:///")))
    fail(field, `${what} '${url}': file:// URLs are not allowed; upload the file instead`);
}

function checkDelegation(field: string, id: string | undefined): void {
  if (id !== undefined && !SAFE_ID.test(id)) {
    fail(field, `delegation id '${id}' may only contain letters, digits, '.', '_' and '-'`);
  }
}

function checkTransfer(field: string, f: InputFile | OutputFile, url: string | undefined, what: string): void {
  if (url !== undefined) checkUrl(`${field}.${what}`, url, what === "source" ? "source URL" : "target URL");
  for (const loc of f.locations ?? []) checkUrl(`${field}.locations`, loc, "location URL");
  checkDelegation(`${field}.delegationId`, f.delegationId);
  for (const [k, v] of Object.entries(f.options)) {
    if (k === "" || /[\s;=\0]/.test(k) || /[\0\n\r;]/.test(v)) fail(`${field}.options`, `URL option '${k}=${v}' is not allowed`);
  }
}

function checkInputs(d: JobDescription, prefixes: readonly string[]): void {
  const seen = new Set<string>();
  d.inputFiles.forEach((f, i) => {
    const field = `inputFiles[${i}]`;
    f.name = sessionName(`${field}.name`, f.name, "input file name");
    if (seen.has(f.name)) fail(`${field}.name`, `input file '${f.name}' is listed more than once`);
    seen.add(f.name);
    if (f.size !== undefined && (!Number.isSafeInteger(f.size) || f.size < 0)) {
      fail(`${field}.size`, `size of input file '${f.name}' must be a whole number of bytes`);
    }
    if (f.checksum !== undefined && f.checksum.trim() === "") fail(`${field}.checksum`, `checksum of input file '${f.name}' is empty`);
    const local = f.source === undefined ? undefined : localSourcePath(f.source);
    if (local !== undefined) {
      const r = checkLocalInput(local, prefixes);
      if ("reason" in r) fail(`${field}.source`, `local input '${f.source}' of '${f.name}' ${r.reason}`);
      f.source = `file://${r.path}`;
    }
    checkTransfer(field, f, f.source, "source");
  });
}

function checkOutputs(d: JobDescription): void {
  d.outputFiles.forEach((f, i) => {
    const field = `outputFiles[${i}]`;
    // `@list`: the named session file holds the list of outputs.
    f.name = f.name.startsWith("@")
      ? `@${sessionName(`${field}.name`, f.name.slice(1), "output list file name")}`
      : sessionName(`${field}.name`, f.name, "output file name", true);
    checkTransfer(field, f, f.target, "target");
  });
}

/**
 * An executable path as the wrapper runs it: absolute and `$VAR/...` kept, anything else a file of
 * the session dir that must be one of the inputs (it is made executable) unless the client pushes
 * files freely.
 */
function executablePath(d: JobDescription, field: string, exe: string, what: string): string {
  if (exe.trim() === "") fail(field, `${what} must not be empty`);
  if (exe.includes("\0")) fail(field, `${what} contains a NUL byte`);
  if (exe.startsWith("/") || exe.startsWith("$")) return exe;
  const name = sessionName(field, exe, what);
  const input = d.inputFiles.find((f) => f.name === name);
  if (input) input.executable = true;
  else if (!d.freeStageIn) {
    fail(
      field,
      `${what} '${exe}' is neither an absolute path nor one of the input files; add it to the inputs (xRSL inputfiles, ADL InputFile)`,
    );
  }
  return name;
}

function checkExecutable(d: JobDescription): void {
  if (d.executable !== undefined) d.executable = executablePath(d, "executable", d.executable, "executable");
}

/** Per list (pre, post): far above real use, small enough that a job script stays a few KB. */
export const MAX_AUX_EXECUTABLES = 16;
/** Arguments of one pre/post executable, and its path and arguments in characters together. */
export const MAX_AUX_ARGUMENTS = 1000;
export const MAX_AUX_CHARS = 128 * 1024;

/** ADL Pre/PostExecutable: the main executable's rules, bounded in number and size. */
function checkAux(d: JobDescription, key: "preExecutables" | "postExecutables", what: string): void {
  const list = d[key];
  if (list === undefined) return;
  if (list.length === 0) {
    delete d[key];
    return;
  }
  if (list.length > MAX_AUX_EXECUTABLES) fail(key, `${list.length} ${what}s; at most ${MAX_AUX_EXECUTABLES} are allowed`);
  list.forEach((x, i) => {
    const field = `${key}[${i}]`;
    const name = `${what} ${i + 1}`;
    x.path = executablePath(d, `${field}.path`, x.path, name);
    if (x.arguments.length > MAX_AUX_ARGUMENTS)
      fail(`${field}.arguments`, `${name} has ${x.arguments.length} arguments; at most ${MAX_AUX_ARGUMENTS} are allowed`);
    let chars = x.path.length;
    for (const a of x.arguments) {
      if (a.includes("\0")) fail(`${field}.arguments`, `arguments of ${name} must not contain NUL bytes`);
      chars += a.length;
    }
    if (chars > MAX_AUX_CHARS)
      fail(`${field}.arguments`, `${name} and its arguments are ${chars} characters long; at most ${MAX_AUX_CHARS} are allowed`);
    const code = x.successExitCode;
    // An exit status is 0-255: any other expected code would fail every run.
    if (code !== undefined && (!Number.isSafeInteger(code) || code < 0 || code > 255)) {
      fail(`${field}.successExitCode`, `expected exit code of ${name} (ADL FailIfExitCodeNotEqualTo) must be 0 to 255, got ${code}`);
    }
  });
}

function checkResources(d: JobDescription, opts: ValidateOptions): void {
  integer("wallTimeSeconds", d.wallTimeSeconds, 1);
  integer("cpuTimeSeconds", d.cpuTimeSeconds, 1);
  integer("lifetimeSeconds", d.lifetimeSeconds, 1);
  integer("memoryMB", d.memoryMB, 0);
  integer("virtualMemoryMB", d.virtualMemoryMB, 0);
  integer("diskMB", d.diskMB, 0);
  integer("count", d.count, 1);
  integer("countPerNode", d.countPerNode, 1);
  integer("gpus", d.gpus, 0);
  if (d.gpus !== undefined && d.gpus > 1024) fail("gpus", `${label("gpus")} ${d.gpus} is more than any node has`);
  if (d.countPerNode !== undefined) {
    if (d.count === undefined) fail("countPerNode", `${label("countPerNode")} requires a ${label("count")}`);
    if (d.count % d.countPerNode !== 0) {
      fail("countPerNode", `${label("count")} ${d.count} is not a multiple of ${label("countPerNode")} ${d.countPerNode}`);
    }
  }
  integer("rerun", d.rerun, 0);
  if (d.rerun !== undefined && opts.maxRerun !== undefined) d.rerun = Math.min(d.rerun, opts.maxRerun);
  if (d.priority !== undefined) {
    if (!Number.isSafeInteger(d.priority)) fail("priority", `priority must be a whole number, got ${d.priority}`);
    d.priority = Math.min(100, Math.max(1, d.priority));
  }
  if (d.successExitCode !== undefined && !Number.isSafeInteger(d.successExitCode)) {
    fail("successExitCode", `${label("successExitCode")} must be a whole number`);
  }
  if (d.startTime !== undefined && Number.isNaN(d.startTime.getTime())) fail("startTime", "start time is not a valid time");
  if (d.queue !== undefined && !QUEUE.test(d.queue)) {
    fail("queue", `queue name '${d.queue}' may only contain letters, digits and . _ + @ -`);
  }
  d.runtimeEnvironments.forEach((r, i) => {
    const field = `runtimeEnvironments[${i}]`;
    if (!RTE_NAME.test(r.name) || r.name.split("/").includes("..")) {
      fail(`${field}.name`, `runtime environment name '${r.name}' may only contain letters, digits and . _ + - /`);
    }
    // An empty version (ARC clients send `<Version/>`) means no version.
    if (r.version !== undefined && r.version.trim() === "") r.version = undefined;
    if (r.version !== undefined && !RTE_VERSION.test(r.version)) {
      fail(`${field}.version`, `runtime environment version '${r.version}' of ${r.name} is not valid`);
    }
    r.options.forEach((o) => noControl(`${field}.options`, o, `option of runtime environment ${r.name}`));
  });
}

function checkNotify(d: JobDescription): void {
  d.notify.forEach((entry, i) => {
    const words = entry
      .trim()
      .split(/\s+/)
      .filter((w) => w !== "");
    const first = words[0];
    const emails = first !== undefined && !first.includes("@") ? words.slice(1) : words;
    if (first !== undefined && !first.includes("@") && !NOTIFY_FLAGS.test(first)) {
      fail(`notify[${i}]`, `notify flags '${first}' may only use the letters b q f e d c`);
    }
    if (emails.length === 0 || emails.some((e) => !/^[^@\s]+@[^@\s]+$/.test(e))) {
      fail(`notify[${i}]`, `notify entry '${entry}' must be "[flags] address ..." with e-mail addresses`);
    }
  });
}

/**
 * A deep copy of description data (plain objects, arrays, Dates, primitives), as structuredClone
 * makes it, at about a third of the cost (a bulk submission copies
 * every one). Keys come from clients (hints, URL options): own properties are defined, never
 * assigned, so even a `__proto__` key is copied as data.
 */
function cloneData<T>(v: T): T {
  if (v === null || typeof v !== "object") return v;
  if (v instanceof Date) return new Date(v.getTime()) as T;
  if (Array.isArray(v)) return v.map(cloneData) as T;
  const out: Record<string, unknown> = {};
  for (const k of Object.keys(v)) {
    const x = cloneData((v as Record<string, unknown>)[k]);
    if (k === "__proto__") Object.defineProperty(out, k, { value: x, enumerable: true, writable: true, configurable: true });
    else out[k] = x;
  }
  return out as T;
}

/**
 * Validates and normalizes a description; returns a copy, never mutates `desc`.
 * Throws `InvalidDescriptionError` (code INVALID_DESCRIPTION) naming the offending field.
 */
export function validateDescription(desc: JobDescription, opts: ValidateOptions = {}): JobDescription {
  const d = cloneData(desc);
  noControl("jobName", d.jobName, "job name");
  d.arguments.forEach((a) => {
    if (a.includes("\0")) fail("arguments", "arguments must not contain NUL bytes");
  });
  checkInputs(d, opts.localInputPrefixes ?? []);
  checkOutputs(d);
  checkExecutable(d);
  checkAux(d, "preExecutables", "pre-executable");
  checkAux(d, "postExecutables", "post-executable");
  if (d.stdin !== undefined) d.stdin = sessionName("stdin", d.stdin, "standard input file");
  if (d.stdout !== undefined) d.stdout = sessionName("stdout", d.stdout, "standard output file");
  if (d.stderr !== undefined) d.stderr = sessionName("stderr", d.stderr, "standard error file");
  if (d.logDir !== undefined) d.logDir = sessionName("logDir", d.logDir, "log directory", true).replace(/\/$/, "");
  d.environment.forEach((e, i) => {
    if (!ENV_NAME.test(e.name)) fail(`environment[${i}].name`, `environment variable name '${e.name}' is not valid`);
    if (e.value.includes("\0")) fail(`environment[${i}].value`, `value of environment variable ${e.name} contains a NUL byte`);
  });
  checkResources(d, opts);
  checkDelegation("delegationId", d.delegationId);
  checkNotify(d);
  return d;
}
