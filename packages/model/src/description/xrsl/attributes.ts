/**
 * xRSL attribute semantics as A-REX reads them → the normalized `JobDescription`.
 * Range and path checks are left to validate.ts; this layer only reads the values.
 */
import { InvalidDescriptionError, positionAt } from "../../errors.js";
import { emptyDescription, type InputFile, type JobDescription, type OutputFile } from "../types.js";
import { MINUTE, parseBoolean, parseDuration, parseInteger, parseTimestamp, splitUrlOptions } from "../values.js";
import type { EvaluatedRelation, XValue } from "./evaluate.js";
import { normalizeSessionPath } from "../paths.js";

/** Attributes that may appear more than once (their values accumulate). */
const REPEATABLE = new Set([
  "runtimeenvironment",
  "inputfiles",
  "outputfiles",
  "executables",
  "environment",
  "notify",
  "middleware",
  "opsys",
]);
/** Brokering hints: stored, not acted upon; any operator accepted. */
const HINTS = new Set(["middleware", "opsys", "architecture", "nodeaccess", "gridtime", "benchmarks", "credentialserver", "jobreport"]);
/** GM-side bookkeeping and Globus attributes: accepted and ignored. */
const IGNORED = new Set([
  "jobid",
  "hostname",
  "clientxrsl",
  "clientsoftware",
  "savestate",
  "replicacollection",
  "maxcputime",
  "maxwalltime",
  "maxtime",
  "maxmemory",
  "mincputime",
  "directory",
  "project",
  "jobtype",
  "filestagein",
  "filestageout",
]);

class Reader {
  constructor(
    readonly rel: EvaluatedRelation,
    private readonly text: string,
  ) {}

  fail(detail: string): never {
    const pos = positionAt(this.text, this.rel.start);
    throw new InvalidDescriptionError(
      `xRSL attribute '${this.rel.rawAttribute}' (line ${pos.line}, column ${pos.column}): ${detail}`,
      this.rel.attribute,
      pos,
    );
  }

  single(): string {
    const [v, ...rest] = this.rel.values;
    if (typeof v !== "string" || rest.length > 0) this.fail("expects exactly one value");
    return v;
  }

  strings(): string[] {
    return this.rel.values.map((v) => (typeof v === "string" ? v : this.fail("expects plain values, not ( ) lists")));
  }

  /** Each value must be a `( ... )` list of strings. */
  entries(what: string): string[][] {
    return this.rel.values.map((v) => {
      if (!Array.isArray(v) || v.some((x) => typeof x !== "string")) this.fail(`each entry must be a list like ${what}`);
      return v as string[];
    });
  }

  integer(): number {
    const n = parseInteger(this.single());
    return n ?? this.fail(`'${this.single()}' is not a whole number`);
  }

  bool(): boolean {
    const b = parseBoolean(this.single());
    return b ?? this.fail(`'${this.single()}' is not yes/no/true/false`);
  }

  /** Bare numbers are MINUTES (client-side xRSL default, docs/decisions.md #21); units as ARC reads them. */
  duration(): number {
    const s = this.single();
    const v = parseDuration(s, MINUTE);
    const shown = s.length > 64 ? `${s.slice(0, 64)}…` : s;
    return (
      v ??
      this.fail(
        `'${shown}' is not a time; use minutes (90), numbers with units (1h30m, "2 minutes", "1 hour 30 minutes", 45s) or ISO-8601 (PT1H30M)`,
      )
    );
  }
}

export function xrslToDescription(relations: EvaluatedRelation[], text: string): JobDescription {
  const d = emptyDescription("nordugrid:xrsl");
  const seen = new Set<string>();
  const executables: Array<{ names: string[]; r: Reader }> = [];
  let join = false;
  let cache: string | undefined;
  let threads: string | undefined;

  for (const rel of relations) {
    const r = new Reader(rel, text);
    const a = rel.attribute;
    if (seen.has(a) && !REPEATABLE.has(a)) r.fail("is given more than once");
    seen.add(a);
    if (rel.op !== "=" && !HINTS.has(a) && !IGNORED.has(a)) {
      r.fail(
        a === "runtimeenvironment"
          ? `operator '${rel.op}' cannot be resolved by the CE; request an exact runtime environment with '='`
          : `operator '${rel.op}' is not supported here; use '='`,
      );
    }
    switch (a) {
      case "executable":
        d.executable = r.single();
        break;
      case "arguments":
        d.arguments = r.strings();
        break;
      case "inputfiles":
        for (const e of r.entries('("name" "source" ["option=value" ...])')) readInput(r, e, d);
        break;
      case "outputfiles":
        for (const e of r.entries('("name" "target" ["option=value" ...])')) d.outputFiles.push(readOutput(r, e));
        break;
      case "executables":
        executables.push({ names: r.strings(), r });
        break;
      case "stdin":
        d.stdin = r.single();
        break;
      case "stdout":
        d.stdout = r.single();
        break;
      case "stderr":
        d.stderr = r.single();
        break;
      case "join":
        join = r.bool();
        break;
      case "gmlog":
        d.logDir = r.single();
        break;
      case "jobname":
        d.jobName = r.single();
        break;
      case "queue":
        d.queue = r.single();
        break;
      case "cputime":
        d.cpuTimeSeconds = r.duration();
        break;
      case "walltime":
        d.wallTimeSeconds = r.duration();
        break;
      case "lifetime":
        d.lifetimeSeconds = r.duration();
        break;
      case "memory":
        d.memoryMB = r.integer();
        break;
      case "disk":
        d.diskMB = r.integer();
        break;
      case "count":
        d.count = r.integer();
        break;
      case "countpernode":
        d.countPerNode = r.integer();
        break;
      // Not an ARC attribute (A-REX gives GPUs through RTEs only): the CE's own, docs/gpus.md.
      case "gpus":
        d.gpus = r.integer();
        break;
      case "exclusiveexecution":
        d.exclusive = r.bool();
        break;
      case "runtimeenvironment":
        d.runtimeEnvironments.push(readRte(r));
        break;
      case "environment":
        for (const e of r.entries('("NAME" "value")')) {
          if (e.length !== 2) r.fail('each entry must be a pair ("NAME" "value")');
          d.environment.push({ name: e[0] as string, value: e[1] as string });
        }
        break;
      case "delegationid":
        d.delegationId = r.single();
        break;
      case "starttime": {
        const s = r.single();
        d.startTime = parseTimestamp(s) ?? r.fail(`'${s}' is not a time such as 2025-03-01T12:00:00Z or 20250301120000Z`);
        break;
      }
      case "notify":
        d.notify.push(...r.strings());
        break;
      case "rerun":
        d.rerun = r.integer();
        break;
      case "priority":
        d.priority = r.integer();
        break;
      case "dryrun":
        d.dryRun = r.bool();
        break;
      case "acl":
        d.acl = r.single();
        break;
      case "cache":
        cache = r.single();
        break;
      case "ftpthreads": {
        const n = r.integer();
        if (n < 1 || n > 10) r.fail("must be between 1 and 10");
        threads = String(n);
        break;
      }
      case "action":
        if (r.single().toLowerCase() !== "request") r.fail("only 'request' is accepted");
        break;
      default:
        // A time-valued hint must still be a time (ARC reads it as one), even if the CE ignores it.
        if (a === "gridtime") r.duration();
        if (HINTS.has(a)) {
          const text = flatten(rel.values).join(" ");
          const value = rel.op === "=" ? text : `${rel.op}${text}`;
          d.hints[a] = d.hints[a] === undefined ? value : `${d.hints[a]}; ${value}`;
        }
      // Everything else (bookkeeping, Globus, unknown) is ignored, as A-REX does.
    }
  }

  for (const { names, r } of executables) {
    for (const n of names) {
      const key = normalizeSessionPath(n) ?? n;
      const input =
        d.inputFiles.find((f) => f.name === n || normalizeSessionPath(f.name) === key) ??
        r.fail(`'${n}' is listed as executable but is not one of the inputfiles`);
      input.executable = true;
    }
  }
  if (join && d.stdout !== undefined) d.stderr = d.stdout;
  for (const f of d.inputFiles) {
    if (f.source === undefined) continue;
    if (cache !== undefined && f.options.cache === undefined) f.options.cache = cache;
    if (threads !== undefined && f.options.threads === undefined) f.options.threads = threads;
  }
  if (threads !== undefined) {
    for (const f of d.outputFiles) if (f.target !== undefined && f.options.threads === undefined) f.options.threads = threads;
  }
  return d;
}

function flatten(values: XValue[]): string[] {
  return values.flatMap((v) => (typeof v === "string" ? [v] : flatten(v)));
}

function url(r: Reader, raw: string, name: string): { url: string; options: Record<string, string> } {
  return splitUrlOptions(raw) ?? r.fail(`URL '${raw}' of '${name}' has an option without '=value'`);
}

/** Trailing `name=value` entries: delegationid and location are special, the rest are URL options. */
function applyOptions(
  r: Reader,
  name: string,
  opts: string[],
  file: { options: Record<string, string>; delegationId?: string | undefined; locations?: string[] | undefined },
  onOption?: (key: string, value: string) => boolean,
): void {
  for (const o of opts) {
    const eq = o.indexOf("=");
    if (eq <= 0) r.fail(`option '${o}' of '${name}' must be written name=value`);
    const key = o.slice(0, eq).trim();
    const value = o.slice(eq + 1).trim();
    const lower = key.toLowerCase();
    if (lower === "delegationid") file.delegationId = value;
    else if (lower === "location") (file.locations ??= []).push(value);
    else if (!onOption?.(lower, value)) file.options[key] = value;
  }
}

function readInput(r: Reader, e: string[], d: JobDescription): void {
  const [name, src, ...opts] = e;
  if (name === undefined || src === undefined) {
    r.fail('each entry needs a name and a source, e.g. ("data.txt" "https://host/data.txt") or ("data.txt" "") for a file you upload');
  }
  // An entry named "/" means: the client may upload anything (free stage-in).
  if (name === "/") {
    d.freeStageIn = true;
    return;
  }
  const f: InputFile = { name, executable: false, options: {} };
  const sized = /^(\d+)(?:\.(.+))?$/.exec(src);
  if (src === "") {
    // client upload
  } else if (sized) {
    f.size = Number(sized[1]);
    if (sized[2] !== undefined) f.checksum = sized[2];
  } else {
    const u = url(r, src, name);
    f.source = u.url;
    Object.assign(f.options, u.options);
  }
  applyOptions(r, name, opts, f);
  d.inputFiles.push(f);
}

function readOutput(r: Reader, e: string[]): OutputFile {
  const [name, target, ...opts] = e;
  if (name === undefined || target === undefined) {
    r.fail('each entry needs a name and a target, e.g. ("out.txt" "https://host/out.txt") or ("out.txt" "") to keep it');
  }
  // Files kept in the session dir stay available whatever the outcome; uploads only on success.
  const kept = target === "";
  const f: OutputFile = { name, options: {}, useIfSuccess: true, useIfFailure: kept, useIfCancel: kept };
  if (!kept) {
    const u = url(r, target, name);
    f.target = u.url;
    Object.assign(f.options, u.options);
  }
  applyOptions(r, name, opts, f, (key, value) => {
    if (key !== "preserve") return false;
    const b = parseBoolean(value) ?? r.fail(`option 'preserve' of '${name}' must be yes or no`);
    f.useIfFailure = b || kept;
    f.useIfCancel = b || kept;
    return true;
  });
  return f;
}

/** `name[-version] [option ...]`; the version starts at the first `-` followed by a digit. */
function readRte(r: Reader): { name: string; version?: string; options: string[] } {
  const [first, ...options] = r.strings();
  if (first === undefined || first.trim() === "") r.fail("needs a runtime environment name");
  const m = /^(.+?)-(\d.*)$/.exec(first);
  return m ? { name: m[1] as string, version: m[2] as string, options } : { name: first, options };
}
