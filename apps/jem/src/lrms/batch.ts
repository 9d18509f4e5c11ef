import { readFileSync } from "node:fs";
import { isAbsolute, join, normalize, sep } from "node:path";
import type { CompiledConfig } from "@ce/config";
import type { AuxExecutable } from "@ce/model";
import { checkRteName, defaultRtes, RteError, rteNeeds, rteParams, rteScript, type RteConfig, type RteCredential } from "@ce/store";
import { placementFor } from "./placement.js";
import { BackendError, type BatchJobSpec, type NodeTransfer } from "./types.js";

/**
 * Everything a back end needs, computed once on the TS side and written to `<jobDir>/batch.json`
 * (for any language) and `<jobDir>/batch.env` (the same values, shell-quoted, for `source` in
 * bash scripts). Format version 1 is documented in apps/jem/backends/README.md.
 */
export interface BatchFile {
  version: 1;
  jobId: string;
  owner: string;
  requestId: string | null;
  /** Raw description name; back ends sanitize it for their batch system. */
  jobName: string | null;
  sessionDir: string;
  jobDir: string;
  wrapper: string;
  commentFile: string;
  diagFile: string;
  doneFile: string;
  /** Completion doorbell (control dir `events/<id>`), touched after doneFile; null = none. */
  eventFile: string | null;
  queue: string;
  partition: string;
  credentialFile: string | null;
  /** The bearer token in the session (ENV/TOKEN: BEARER_TOKEN_FILE); null = the job has none. */
  tokenFile: string | null;
  resources: {
    wallTimeSeconds: number | null;
    cpuTimeSeconds: number | null;
    memoryMB: number | null;
    virtualMemoryMB: number | null;
    diskMB: number | null;
    count: number;
    countPerNode: number | null;
    /** GPUs for the whole job (Slurm `--gres=gpu:N`); 0 = none. */
    gpus: number;
    exclusive: boolean;
    priority: number;
    /** Do not start before (epoch seconds). */
    startTime: number | null;
  };
  project: string | null;
  /** `params`: the site's parameters of the RTE (`ceadm rte params`), set before each stage. */
  runtimeEnvironments: Array<{ name: string; path: string; options: string[]; params: Array<{ name: string; value: string }> }>;
  executable: string | null;
  arguments: string[];
  /** Exit code the executable must end with (ADL FailIfExitCodeNotEqualTo); null = not given (0). */
  successExitCode: number | null;
  /** ADL PreExecutable/PostExecutable, in order, as the wrapper runs them (relative → `./x`). */
  preExecutables: AuxCommand[];
  postExecutables: AuxCommand[];
  /** Session-relative (or /dev/null); null = /dev/null for stdin, discarded for stdout/stderr. */
  stdin: string | null;
  stdout: string | null;
  stderr: string | null;
  /** Session-relative input files the wrapper makes executable. */
  executableInputs: string[];
  environment: Array<{ name: string; value: string }>;
  /**
   * `extraDirectives`: lrms.slurm.extraDirectives, then the placement rule's; `account`/`qos`: the
   * placement rule's (the account wins over `project`); `placementRule`: its index, or null.
   */
  slurm: { extraDirectives: string[]; account: string | null; qos: string | null; placementRule: number | null };
  /** Raw batch-system requests an RTE made in stage 0 (`joboption_nodeproperty_N`; Slurm: `#SBATCH` lines). */
  nodeProperties: string[];
  /**
   * Node-local scratch an RTE chose in stage 0 (`RUNTIME_LOCAL_SCRATCH_DIR`, e.g. `${WORKDIR}`):
   * the wrapper runs the job there and moves the session back. A literal path or one variable
   * (`$NAME`/`${NAME}`, expanded on the node), optionally followed by `/more`.
   */
  localScratchDir: string | null;
  /** Submission attempt: `tag` names it in the batch system; `resume` = it may be there already. */
  submit: { tag: string; resume: boolean };
  /** Fork containment (absent elsewhere): see BatchJobSpec.contain. */
  contain: { cgroup: string | null; cgroupCount: number; oomFile: string | null; rlimitAsKB: number | null };
}

/** A pre- or post-executable; `successExitCode` null = not given (0). */
export interface AuxCommand {
  executable: string;
  arguments: string[];
  successExitCode: number | null;
}

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** Single-quote for bash; the only safe way to hand a description value to a shell. */
export function shq(value: string): string {
  if (value.includes("\0")) throw new BackendError("SUBMIT_FAILED", "value contains a NUL byte");
  return `'${value.replace(/'/g, `'\\''`)}'`;
}

function shArray(values: readonly string[]): string {
  return `(${values.map(shq).join(" ")})`;
}

function fail(msg: string): never {
  throw new BackendError("SUBMIT_FAILED", msg);
}

/** A session-relative path that cannot leave the session dir, or /dev/null. */
function sessionPath(what: string, p: string | undefined): string | null {
  if (p === undefined || p === "") return null;
  if (p === "/dev/null") return p;
  const n = normalize(p);
  if (isAbsolute(n) || n === ".." || n.startsWith(`..${sep}`))
    fail(`${what} must be relative to the session directory: ${JSON.stringify(p)}`);
  return n;
}

/**
 * Requested RTEs + the site's defaults (configured and `ceadm rte default`), each resolved to its
 * script (an enabled/default link under the control dir, else `<rteDir>/<NAME>`) with its
 * parameters. A missing one fails the submission, in A-REX's words.
 */
export function resolveRtes(spec: BatchJobSpec, config: CompiledConfig): BatchFile["runtimeEnvironments"] {
  const cfg = rteConfigOf(config, spec.rteDir);
  return jobRteNames(spec.runtimeEnvironments, cfg).map((name) => {
    let path: string | undefined;
    try {
      path = rteScript(cfg, name);
    } catch (e) {
      if (e instanceof RteError) fail(e.message);
      throw e;
    }
    if (!path) fail(`Requested runtime environment ${name} is missing, broken or not enabled`);
    const req = spec.description.runtimeEnvironments.find(
      (r) => r.name === name || (r.version !== undefined && `${r.name}-${r.version}` === name),
    );
    return { name, path, options: req?.options ?? [], params: rteParams(cfg, name) };
  });
}

function rteConfigOf(config: CompiledConfig, rteDir: string): RteConfig {
  return { paths: { controlDir: config.paths.controlDir, rteDir }, jobs: config.jobs };
}

/** The RTEs a job runs with: the ones it asked for, then the site's defaults it did not ask for. */
function jobRteNames(requested: readonly string[], cfg: RteConfig): string[] {
  const names = [...requested];
  for (const d of defaultRtes(cfg)) if (!names.includes(d)) names.push(d);
  return names;
}

/** The credentials the job's RTEs need (`# needs:` headers, ENV/PROXY), for its credential files. */
export function jobRteNeeds(requested: readonly string[], config: CompiledConfig, rteDir: string): RteCredential[] {
  const cfg = rteConfigOf(config, rteDir);
  const names = jobRteNames(requested, cfg);
  return [...new Set(names.flatMap((n) => (checkable(n) ? rteNeeds(cfg, n) : [])))].sort();
}

/** A name rteScript can look up (a bad one fails the submission later, in resolveRtes). */
function checkable(name: string): boolean {
  try {
    checkRteName(name);
    return true;
  } catch {
    return false;
  }
}

/** Executable as the wrapper runs it: relative → `./x`, absolute and `$VAR/...` kept. */
export function wrapperExecutable(exe: string | undefined): string | null {
  if (exe === undefined || exe === "") return null;
  if (exe.startsWith("/") || exe.startsWith("$") || exe.startsWith("./")) return exe;
  return `./${exe}`;
}

/** Validated description entries → wrapper commands (the path rules are validate.ts's). */
function auxCommands(list: readonly AuxExecutable[] | undefined): AuxCommand[] {
  return (list ?? []).map((x) => ({
    executable: wrapperExecutable(x.path) ?? fail("a pre- or post-executable has no path"),
    arguments: [...x.arguments],
    successExitCode: x.successExitCode ?? null,
  }));
}

export function buildBatchFile(spec: BatchJobSpec, config: CompiledConfig): BatchFile {
  const d = spec.description;
  const queueCfg = config.jobs.queues.find((q) => q.name === spec.queue);
  const env: Array<{ name: string; value: string }> = [];
  for (const e of d.environment) {
    if (!ENV_NAME.test(e.name)) fail(`invalid environment variable name ${JSON.stringify(e.name)}`);
    env.push({ name: e.name, value: e.value });
  }
  const base = config.endpoint.url.replace(/\/+$/, "");
  env.push(
    { name: "GRID_GLOBAL_JOBID", value: spec.jobId },
    { name: "GRID_GLOBAL_JOBURL", value: `${base}/${spec.jobId}` },
    { name: "GRID_GLOBAL_JOBINTERFACE", value: "org.nordugrid.arcrest" },
    { name: "GRID_GLOBAL_JOBHOST", value: new URL(base).hostname },
  );
  const place = placementFor(config, spec.owner, spec.fqans);
  const count = d.count ?? 1;
  if (!Number.isInteger(count) || count < 1) fail(`invalid slot count ${count}`);
  return {
    version: 1,
    jobId: spec.jobId,
    owner: spec.owner,
    requestId: spec.requestId ?? null,
    jobName: d.jobName ?? null,
    // Nothing shared: the batch system starts the job in the node's scratch dir (the session is
    // not there) and the wrapper keeps its own output for `comment` (the batch dir is not there either).
    sessionDir: spec.node ? spec.node.scratchDir : spec.sessionDir,
    jobDir: spec.jobDir,
    wrapper: join(spec.jobDir, "job.sh"),
    // The batch dir (the JEM's `<session>.lrms`, under the session root the nodes share): the
    // batch system's output (the diagnose "comment") and the wrapper's diag and lrms_done go there.
    commentFile: spec.node ? "/dev/null" : join(spec.jobDir, "comment"),
    diagFile: join(spec.jobDir, "diag"),
    doneFile: join(spec.jobDir, "lrms_done"),
    eventFile: spec.eventFile ?? null,
    queue: spec.queue,
    partition: place?.partition ?? spec.partition ?? queueCfg?.partition ?? spec.queue,
    credentialFile: spec.credentialFile ?? null,
    tokenFile: spec.tokenFile ?? null,
    resources: {
      wallTimeSeconds: d.wallTimeSeconds ?? queueCfg?.defaultWallTimeSeconds ?? null,
      cpuTimeSeconds: d.cpuTimeSeconds ?? null,
      memoryMB: d.memoryMB ?? queueCfg?.defaultMemoryMB ?? null,
      virtualMemoryMB: d.virtualMemoryMB ?? null,
      diskMB: d.diskMB ?? null,
      count,
      countPerNode: d.countPerNode ?? null,
      gpus: d.gpus ?? 0,
      exclusive: d.exclusive ?? false,
      priority: Math.min(100, Math.max(1, Math.round(d.priority ?? 50))),
      startTime: d.startTime ? Math.floor(d.startTime.getTime() / 1000) : null,
    },
    project: d.projectName ?? null,
    runtimeEnvironments: resolveRtes(spec, config),
    executable: wrapperExecutable(d.executable),
    arguments: [...d.arguments],
    successExitCode: d.successExitCode ?? null,
    preExecutables: auxCommands(d.preExecutables),
    postExecutables: auxCommands(d.postExecutables),
    stdin: sessionPath("stdin", d.stdin),
    stdout: sessionPath("stdout", d.stdout),
    stderr: sessionPath("stderr", d.stderr),
    executableInputs: d.inputFiles.filter((f) => f.executable).map((f) => sessionPath("input file", f.name)!),
    environment: env,
    slurm: {
      extraDirectives: [...config.lrms.slurm.extraDirectives, ...(place?.directives ?? [])],
      account: place?.account ?? null,
      qos: place?.qos ?? null,
      placementRule: place?.rule ?? null,
    },
    nodeProperties: [],
    localScratchDir: null,
    submit: { tag: submitTag(spec), resume: spec.resume === true },
    contain: {
      cgroup: spec.contain?.cgroup ?? null,
      cgroupCount: spec.contain?.cgroupCount ?? 0,
      oomFile: spec.contain?.oomFile ?? null,
      rlimitAsKB: spec.contain?.rlimitAsKB ?? null,
    },
  };
}

const TAG = /^[A-Za-z0-9._-]{1,100}$/;

function submitTag(spec: BatchJobSpec): string {
  if (spec.submitTag === undefined) throw new BackendError("SUBMIT_FAILED", "no submission tag");
  if (!TAG.test(spec.submitTag))
    throw new BackendError("SUBMIT_FAILED", `invalid submission tag ${JSON.stringify(spec.submitTag.slice(0, 80))}`);
  return spec.submitTag;
}

const num = (v: number | null) => (v === null ? "''" : String(Math.ceil(v)));
const str = (v: string | null) => (v === null ? "''" : shq(v));

/** `batch.env`: the batch file as bash assignments (arrays for lists). */
export function renderBatchEnv(b: BatchFile): string {
  const r = b.resources;
  const lines = [
    "# Generated by the JEM from batch.json; source it from bash. Values are single-quoted.",
    `JOB_ID=${shq(b.jobId)}`,
    `JOB_OWNER=${shq(b.owner)}`,
    `JOB_NAME=${str(b.jobName)}`,
    `JOB_SESSION_DIR=${shq(b.sessionDir)}`,
    `JOB_DIR=${shq(b.jobDir)}`,
    `JOB_WRAPPER=${shq(b.wrapper)}`,
    `JOB_COMMENT_FILE=${shq(b.commentFile)}`,
    `JOB_DIAG_FILE=${shq(b.diagFile)}`,
    `JOB_DONE_FILE=${shq(b.doneFile)}`,
    `JOB_QUEUE=${shq(b.queue)}`,
    `JOB_PARTITION=${shq(b.partition)}`,
    `JOB_CREDENTIAL_FILE=${str(b.credentialFile)}`,
    `JOB_TOKEN_FILE=${str(b.tokenFile)}`,
    `JOB_WALLTIME=${num(r.wallTimeSeconds)}`,
    `JOB_CPUTIME=${num(r.cpuTimeSeconds)}`,
    `JOB_MEMORY=${num(r.memoryMB)}`,
    `JOB_VIRTUALMEMORY=${num(r.virtualMemoryMB)}`,
    `JOB_DISK=${num(r.diskMB)}`,
    `JOB_COUNT=${num(r.count)}`,
    `JOB_COUNTPERNODE=${num(r.countPerNode)}`,
    `JOB_GPUS=${num(r.gpus)}`,
    `JOB_EXCLUSIVE=${r.exclusive ? "yes" : "''"}`,
    `JOB_PRIORITY=${num(r.priority)}`,
    `JOB_STARTTIME=${num(r.startTime)}`,
    `JOB_PROJECT=${str(b.project)}`,
    `JOB_RTES=${shArray(b.runtimeEnvironments.map((x) => x.name))}`,
    `JOB_SLURM_EXTRA=${shArray(b.slurm.extraDirectives)}`,
    `JOB_SLURM_ACCOUNT=${str(b.slurm.account)}`,
    `JOB_SLURM_QOS=${str(b.slurm.qos)}`,
    `JOB_NODEPROPERTIES=${shArray(b.nodeProperties)}`,
    `JOB_TAG=${shq(b.submit.tag)}`,
    `JOB_RESUME=${b.submit.resume ? "yes" : "''"}`,
    `JOB_CGROUP=${str(b.contain.cgroup)}`,
    `JOB_CGROUP_COUNT=${num(b.contain.cgroupCount)}`,
    `JOB_OOM_FILE=${str(b.contain.oomFile)}`,
    `JOB_RLIMIT_AS=${num(b.contain.rlimitAsKB)}`,
  ];
  return `${lines.join("\n")}\n`;
}

const wrapperBodies = new Map<string, string>();

/** The static wrapper body shipped in <scriptsDir>/common/job-wrapper.sh (read once per dir). */
export function loadWrapperBody(scriptsDir: string): string {
  let body = wrapperBodies.get(scriptsDir);
  if (body === undefined) {
    body = readFileSync(join(scriptsDir, "common", "job-wrapper.sh"), "utf8");
    wrapperBodies.set(scriptsDir, body);
  }
  return body;
}

/** An expected exit code as bash arithmetic reads it (null = 0). */
function exitCode(c: number | null): string {
  if (c === null) return "0";
  if (!Number.isSafeInteger(c)) fail(`invalid expected exit code ${JSON.stringify(c)}`);
  return String(c);
}

/** `JEM_<KIND>_CODES=(expected codes)` and per command `JEM_<KIND>_<i>=(executable args...)`. */
function auxHeader(kind: "PRE" | "POST", list: readonly AuxCommand[]): string[] {
  const codes = list.map((x) => exitCode(x.successExitCode));
  return [`JEM_${kind}_CODES=(${codes.join(" ")})`, ...list.map((x, i) => `JEM_${kind}_${i}=${shArray([x.executable, ...x.arguments])}`)];
}

/** `job.sh`: shell-quoted settings of this job followed by the static wrapper body. */
export function renderJobScript(b: BatchFile, body: string, node?: NodeTransfer): string {
  const header = [
    "#!/bin/bash",
    `# Job wrapper for ${b.jobId}, generated by the JEM. Settings (all values single-quoted):`,
    `JEM_JOB_ID=${shq(b.jobId)}`,
    `JEM_SESSION_DIR=${shq(b.sessionDir)}`,
    `JEM_JOB_DIR=${shq(b.jobDir)}`,
    `JEM_DIAG_FILE=${shq(b.diagFile)}`,
    `JEM_DONE_FILE=${shq(b.doneFile)}`,
    `JEM_EVENT_FILE=${str(b.eventFile)}`,
    `JEM_CREDENTIAL_FILE=${str(b.credentialFile)}`,
    `JEM_TOKEN_FILE=${str(b.tokenFile)}`,
    `JEM_EXECUTABLE=${str(b.executable)}`,
    `JEM_ARGS=${shArray(b.arguments)}`,
    `JEM_SUCCESS_CODE=${exitCode(b.successExitCode)}`,
    ...auxHeader("PRE", b.preExecutables),
    ...auxHeader("POST", b.postExecutables),
    `JEM_STDIN=${str(b.stdin)}`,
    `JEM_STDOUT=${str(b.stdout)}`,
    `JEM_STDERR=${str(b.stderr)}`,
    `JEM_ENV=${shArray(b.environment.map((e) => `${e.name}=${e.value}`))}`,
    `JEM_RTE_NAMES=${shArray(b.runtimeEnvironments.map((r) => r.name))}`,
    `JEM_RTE_PATHS=${shArray(b.runtimeEnvironments.map((r) => r.path))}`,
    ...b.runtimeEnvironments.map((r, i) => `JEM_RTE_OPTS_${i}=${shArray(r.options)}`),
    ...b.runtimeEnvironments.map((r, i) => `JEM_RTE_PARAMS_${i}=${shArray(r.params.map((p) => `${p.name}=${p.value}`))}`),
    `JEM_LOCAL_SCRATCH=${str(b.localScratchDir)}`,
    `JEM_EXEC_INPUTS=${shArray(b.executableInputs)}`,
    // Not exported: the payload's environment never holds the capability.
    ...(node
      ? [
          `JEM_NODE_URL=${shq(node.url)}`,
          `JEM_NODE_CA=${shq(node.caPem)}`,
          `JEM_NODE_CAP=${shq(node.capability)}`,
          `JEM_NODE_SCRATCH=${shq(node.scratchDir)}`,
        ]
      : []),
  ];
  return `${header.join("\n")}\n${body.replace(/^#!.*\n/, "")}`;
}
