import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { CompiledConfig } from "@ce/config";
import { shq, wrapperExecutable, type AuxCommand, type BatchFile } from "./batch.js";
import { BackendError } from "./types.js";

/**
 * RTE stage 0 as ARC defines it (docs/runtime-environments.md): the job's options go in as
 * `joboption_*` variables (ARC's `grami`), the RTEs are sourced with `0` in one shell, and the
 * options they leave behind become the job's batch files. This module is the two pure halves:
 * the grami of a batch file, and a batch file from what stage 0 printed.
 */

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const NUMERIC = ["cputime", "walltime", "memory", "virtualmemory", "disk", "count", "countpernode", "priority"] as const;

/** The job's options as ARC names them (`JobDescriptionHandler::write_grami`), values as text. */
export function gramiOf(b: BatchFile): Map<string, string> {
  const g = new Map<string, string>();
  const n = (v: number | null) => (v === null ? "" : String(Math.ceil(v)));
  const r = b.resources;
  g.set("joboption_directory", b.sessionDir);
  g.set("joboption_controldir", b.jobDir);
  g.set("joboption_gridid", b.jobId);
  g.set("joboption_queue", b.queue);
  g.set("joboption_jobname", b.jobName ?? "");
  [b.executable ?? "", ...b.arguments].forEach((a, i) => g.set(`joboption_arg_${i}`, a));
  // Read-only for RTEs: the JEM judges the executable's end by the description's code.
  if (b.successExitCode !== null) g.set("joboption_arg_code", String(b.successExitCode));
  // ADL Pre/PostExecutable as ARC names them: joboption_pre_<n>_0 the program, _1.. its arguments.
  for (const [kind, list] of [
    ["pre", b.preExecutables],
    ["post", b.postExecutables],
  ] as const) {
    list.forEach((x, n) => {
      [x.executable, ...x.arguments].forEach((a, i) => g.set(`joboption_${kind}_${n}_${i}`, a));
      if (x.successExitCode !== null) g.set(`joboption_${kind}_${n}_code`, String(x.successExitCode));
    });
  }
  g.set("joboption_stdin", b.stdin ?? "/dev/null");
  // ARC gives stdout/stderr as absolute paths in the session dir.
  g.set("joboption_stdout", b.stdout && b.stdout !== "/dev/null" ? join(b.sessionDir, b.stdout) : "/dev/null");
  g.set("joboption_stderr", b.stderr && b.stderr !== "/dev/null" ? join(b.sessionDir, b.stderr) : "/dev/null");
  b.environment.forEach((e, i) => g.set(`joboption_env_${i}`, `${e.name}=${e.value}`));
  g.set("joboption_cputime", n(r.cpuTimeSeconds));
  g.set("joboption_walltime", n(r.wallTimeSeconds));
  g.set("joboption_memory", n(r.memoryMB));
  g.set("joboption_virtualmemory", n(r.virtualMemoryMB));
  g.set("joboption_disk", n(r.diskMB));
  g.set("joboption_count", String(r.count));
  g.set("joboption_countpernode", n(r.countPerNode));
  if (r.countPerNode) g.set("joboption_numnodes", String(Math.ceil(r.count / r.countPerNode)));
  if (r.exclusive) g.set("joboption_exclusivenode", "true");
  g.set("joboption_priority", String(r.priority));
  g.set("joboption_starttime", r.startTime === null ? "" : String(r.startTime));
  if (b.project !== null) g.set("joboption_rsl_project", b.project);
  b.runtimeEnvironments.forEach((rte, i) => {
    g.set(`joboption_runtime_${i}`, rte.name);
    rte.options.forEach((o, j) => g.set(`joboption_runtime_${i}_${j + 1}`, o));
  });
  b.nodeProperties.forEach((p, i) => g.set(`joboption_nodeproperty_${i}`, p));
  return g;
}

export function renderGrami(g: ReadonlyMap<string, string>): string {
  return [...g].map(([k, v]) => `${k}=${shq(v)}\n`).join("");
}

const stage0Bodies = new Map<string, string>();

/** The shipped stage-0 driver (common/rte-stage0.sh), run as `bash -c` text. */
export function loadStage0Body(scriptsDir: string): string {
  let body = stage0Bodies.get(scriptsDir);
  if (body === undefined) {
    body = readFileSync(join(scriptsDir, "common", "rte-stage0.sh"), "utf8");
    stage0Bodies.set(scriptsDir, body);
  }
  return body;
}

/** argv after the two files: per RTE `NAME PATH NPARAMS KEY=value… NOPTS OPTION…`. */
export function stage0Args(b: BatchFile): string[] {
  return b.runtimeEnvironments.flatMap((r) => [
    r.name,
    r.path,
    String(r.params.length),
    ...r.params.map((p) => `${p.name}=${p.value}`),
    String(r.options.length),
    ...r.options,
  ]);
}

export type Stage0Output =
  { kind: "ok"; vars: Map<string, string> } | { kind: "failed"; rte: string; code: string } | { kind: "incomplete" };

export function parseStage0Output(stdout: string): Stage0Output {
  const parts = stdout.split("\0");
  if (parts[0] === "__jem_failed") return { kind: "failed", rte: parts[1] ?? "?", code: parts[2] ?? "?" };
  const vars = new Map<string, string>();
  for (const p of parts) {
    if (p === "__jem_end") return { kind: "ok", vars };
    const i = p.indexOf("=");
    if (i > 0) vars.set(p.slice(0, i), p.slice(i + 1));
  }
  return { kind: "incomplete" };
}

function fail(msg: string): never {
  throw new BackendError("SUBMIT_FAILED", `Runtime environment stage 0: ${msg}`);
}

/** `prefix0..prefixN` while set (ARC reads indexed options until the first gap). */
function indexed(vars: ReadonlyMap<string, string>, prefix: string): string[] {
  const out: string[] = [];
  for (let i = 0; vars.has(`${prefix}${i}`); i++) out.push(vars.get(`${prefix}${i}`)!);
  return out;
}

function oneLine(what: string, v: string): string {
  if (/[\0\n\r]/.test(v)) fail(`${what} must be one line`);
  return v;
}

function count(what: string, v: string | undefined, min: number): number | null {
  if (v === undefined || v.trim() === "") return null;
  if (!/^\d{1,12}$/.test(v.trim())) fail(`${what} must be a whole number, got ${JSON.stringify(v.slice(0, 40))}`);
  const n = Number(v.trim());
  if (n < min) fail(`${what} must be at least ${min}`);
  return n;
}

const AUX_KEY = /^joboption_(pre|post)_\d+_/;

/**
 * Pre- or post-executables after stage 0: `joboption_<kind>_<n>_0..` while set, `_code` the
 * expected exit code. What an RTE adds must be one line, as for the arguments.
 */
function auxFrom(vars: ReadonlyMap<string, string>, kind: "pre" | "post", before: BatchFile): AuxCommand[] {
  const own = new Set([...before.preExecutables, ...before.postExecutables].flatMap((x) => [x.executable, ...x.arguments]));
  const out: AuxCommand[] = [];
  for (let n = 0; vars.has(`joboption_${kind}_${n}_0`); n++) {
    const cmd = indexed(vars, `joboption_${kind}_${n}_`);
    cmd.forEach((a, i) => own.has(a) || oneLine(`joboption_${kind}_${n}_${i}`, a));
    if (cmd[0]!.trim() === "") fail(`joboption_${kind}_${n}_0 must name a program`);
    const code = count(`joboption_${kind}_${n}_code`, vars.get(`joboption_${kind}_${n}_code`), 0);
    if (code !== null && code > 255) fail(`joboption_${kind}_${n}_code must be 0 to 255`);
    out.push({ executable: wrapperExecutable(cmd[0])!, arguments: cmd.slice(1), successExitCode: code });
  }
  return out;
}

export interface Stage0Result {
  batch: BatchFile;
  /** `joboption_x: old → new` for every option stage 0 changed, for the job's `errors`. */
  changes: string[];
  /** The options after stage 0 (the job's `grami`). */
  grami: Map<string, string>;
}

/**
 * The batch file after stage 0: every option the RTEs changed is taken over, checked like a
 * description value (whole numbers, known queues, one-line node properties and arguments);
 * options nobody changed keep their typed value.
 */
export function applyStage0(before: BatchFile, vars: ReadonlyMap<string, string>, config: CompiledConfig): Stage0Result {
  const old = gramiOf(before);
  const changes: string[] = [];
  const changed = (k: string) => (vars.get(k) ?? "") !== (old.get(k) ?? "");
  const keys = new Set([...old.keys(), ...[...vars.keys()].filter((k) => k.startsWith("joboption_"))]);
  for (const k of [...keys].sort()) {
    if (!changed(k)) continue;
    const o = old.get(k);
    const v = vars.get(k);
    changes.push(`${k}: ${o === undefined ? "(unset)" : JSON.stringify(o)} → ${v === undefined ? "(unset)" : JSON.stringify(v)}`);
  }
  const b: BatchFile = structuredClone(before);
  const r = b.resources;

  const args = indexed(vars, "joboption_arg_");
  if (args.some((_, i) => changed(`joboption_arg_${i}`)) || args.length !== before.arguments.length + 1) {
    // What an RTE adds must be one line; the job's own arguments, moved along by a wrapping RTE
    // (ENV/CONTAINER, APPTAINER), stay as the user wrote them (`sh -c` scripts have newlines).
    const own = new Set([before.executable ?? "", ...before.arguments]);
    args.forEach((a, i) => own.has(a) || oneLine(`joboption_arg_${i}`, a));
    b.executable = wrapperExecutable(args[0]);
    b.arguments = args.slice(1);
  }
  if ([...keys].some((k) => AUX_KEY.test(k) && changed(k))) {
    b.preExecutables = auxFrom(vars, "pre", before);
    b.postExecutables = auxFrom(vars, "post", before);
  }
  const env = indexed(vars, "joboption_env_");
  if (env.length !== before.environment.length || env.some((_, i) => changed(`joboption_env_${i}`))) {
    b.environment = env.map((kv, i) => {
      const eq = kv.indexOf("=");
      const name = eq > 0 ? kv.slice(0, eq) : "";
      if (!ENV_NAME.test(name)) fail(`joboption_env_${i} must be NAME=value, got ${JSON.stringify(kv.slice(0, 60))}`);
      return { name, value: kv.slice(eq + 1) };
    });
  }
  for (const k of NUMERIC) {
    const key = `joboption_${k}`;
    if (!changed(key)) continue;
    const v = count(key, vars.get(key), k === "count" || k === "priority" ? 1 : 0);
    if (k === "cputime") r.cpuTimeSeconds = v;
    else if (k === "walltime") r.wallTimeSeconds = v;
    else if (k === "memory") r.memoryMB = v;
    else if (k === "virtualmemory") r.virtualMemoryMB = v;
    else if (k === "disk") r.diskMB = v;
    else if (k === "count") r.count = v ?? 1;
    else if (k === "countpernode") r.countPerNode = v;
    else r.priority = Math.min(100, v ?? 50);
  }
  if (changed("joboption_exclusivenode")) r.exclusive = /^(true|yes|1)$/i.test(vars.get("joboption_exclusivenode") ?? "");
  if (changed("joboption_queue")) {
    const q = vars.get("joboption_queue") ?? "";
    const queue = config.jobs.queues.find((x) => x.name === q);
    if (!queue) fail(`joboption_queue names no queue of this CE: ${JSON.stringify(q.slice(0, 60))}`);
    b.queue = q;
    b.partition = queue.partition ?? q;
  }
  if (changed("joboption_jobname")) b.jobName = oneLine("joboption_jobname", vars.get("joboption_jobname") ?? "") || null;
  if (changed("joboption_rsl_project")) b.project = oneLine("joboption_rsl_project", vars.get("joboption_rsl_project") ?? "") || null;
  b.nodeProperties = indexed(vars, "joboption_nodeproperty_")
    .map((p, i) => oneLine(`joboption_nodeproperty_${i}`, p))
    .filter((p) => p.trim() !== "");
  const scratch = vars.get("RUNTIME_LOCAL_SCRATCH_DIR");
  b.localScratchDir = scratch ? oneLine("RUNTIME_LOCAL_SCRATCH_DIR", scratch) : null;
  if (scratch) changes.push(`RUNTIME_LOCAL_SCRATCH_DIR: ${JSON.stringify(scratch)}`);

  const grami = new Map(old);
  for (const [k, v] of vars) if (k.startsWith("joboption_")) grami.set(k, v);
  for (const k of old.keys()) if (!vars.has(k)) grami.delete(k);
  return { batch: b, changes, grami };
}
