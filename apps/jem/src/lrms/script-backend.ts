import { randomBytes } from "node:crypto";
import { accessSync, constants } from "node:fs";
import { chmod, rename, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { CompiledConfig } from "@ce/config";
import { LRMS_STATES, WAITING_LRMS_STATES, lrmsReasonText, type LrmsState } from "@ce/model";
import type { Logger } from "pino";
import { parseUsageOutput, type BatchUsage } from "./batch-usage.js";
import { buildBatchFile, loadWrapperBody, renderBatchEnv, renderJobScript, type BatchFile } from "./batch.js";
import { MicroBatcher, type Expected } from "./micro-batch.js";
import { TokenBucket, UNLIMITED } from "./rate-limit.js";
import { runScript, type ScriptResult } from "./run-script.js";
import { applyStage0, gramiOf, loadStage0Body, parseStage0Output, renderGrami, stage0Args } from "./rte-stage0.js";
import { BackendError, type Backend, type BatchJobSpec, type PollState, type RunAsJob, type SubmitResult } from "./types.js";

type WriteJobFile = (name: string, text: string, mode: number) => Promise<unknown>;

/** Local ids travel as one argv word and one token of a poll line. */
const LOCAL_ID = /^[A-Za-z0-9._:@+-]{1,128}$/;
const TOKEN = /^\S{1,256}$/;

export interface ScriptBackendOptions {
  /** `<scriptsDir>/<name>` holding submit, cancel, poll. */
  dir: string;
  /** Where common/job-wrapper.sh lives (the shipped scripts dir). */
  wrapperDir: string;
  config: CompiledConfig;
  log: Logger;
}

/** Last non-empty stderr lines, bounded: the failure reason a user or admin gets to see. */
function reason(r: ScriptResult): string {
  const lines = r.stderr
    .split("\n")
    .map((l) => l.trim())
    .filter(Boolean);
  const text = lines.slice(-5).join("; ").slice(0, 1000);
  return text || `exit code ${r.exitCode ?? r.signal ?? "?"}`;
}

async function writeAtomic(file: string, content: string, mode: number): Promise<void> {
  const tmp = `${file}.tmp-${process.pid}-${Math.random().toString(36).slice(2)}`;
  await writeFile(tmp, content, { mode });
  await chmod(tmp, mode);
  await rename(tmp, file);
}

/**
 * Parses poll output against the jobs asked for. Unparseable lines are skipped (and reported in
 * `bad`); a job without a usable line is `unknown`, never finished.
 */
export function parsePollOutput(stdout: string, jobIds: readonly string[]): { states: Map<string, PollState>; bad: string[] } {
  const wanted = new Set(jobIds);
  const states = new Map<string, PollState>();
  const bad: string[] = [];
  for (const raw of stdout.split("\n")) {
    const line = raw.replace(/\r$/, "");
    if (line.trim() === "") continue;
    const m = /^(\S+)[ \t]+([A-Z]+)(?:[ \t]+(.*))?$/.exec(line);
    const jobId = m?.[1];
    const state = m?.[2];
    const rest = m?.[3]?.trim() ?? "";
    if (!m || !jobId || !state || !wanted.has(jobId)) {
      bad.push(line.slice(0, 200));
      continue;
    }
    if (state === "DONE") {
      const d = /^(-?\d+)(?:[ \t]+(.*))?$/.exec(rest);
      const code = d ? Number(d[1]) : NaN;
      if (!d || !Number.isSafeInteger(code)) {
        bad.push(line.slice(0, 200));
        continue;
      }
      states.set(jobId, { kind: "done", exitCode: code, message: (d[2] ?? "").trim() });
    } else if (state === "UNKNOWN") {
      states.set(jobId, { kind: "unknown", reason: rest || "batch system does not know the job" });
    } else if ((LRMS_STATES as readonly string[]).includes(state)) {
      const lrms = state as LrmsState;
      // The free text of a waiting job is the batch system's reason (docs: backends/README.md, poll).
      const reason = WAITING_LRMS_STATES.has(lrms) ? lrmsReasonText(rest) : undefined;
      states.set(jobId, reason ? { kind: "active", lrms, reason } : { kind: "active", lrms });
    } else {
      bad.push(line.slice(0, 200));
    }
  }
  for (const id of jobIds) {
    if (!states.has(id)) states.set(id, { kind: "unknown", reason: "BAD_OUTPUT: poll reported nothing for this job" });
  }
  return { states, bad };
}

/** Parses submit output: the last `localid=<id>` line. */
export function parseSubmitOutput(stdout: string): string {
  const ids = stdout
    .split("\n")
    .map((l) => /^localid=(.*)$/.exec(l.trim())?.[1])
    .filter((v): v is string => v !== undefined);
  const id = ids[ids.length - 1];
  if (id === undefined || !LOCAL_ID.test(id)) {
    throw new BackendError("BAD_OUTPUT", `submit printed no valid localid=<id> line: ${JSON.stringify(stdout.slice(0, 200))}`);
  }
  return id;
}

export type BulkLine = { kind: "localid"; id: string } | { kind: "ok" } | { kind: "error" | "busy"; reason: string };

/**
 * Parses the per-job lines of a bulk submit or cancel: `<n> localid=<id>`, `<n> ok`,
 * `<n> error <reason>`, `<n> busy <reason>` (n = 1-based position of the job in the call). Other
 * lines are ignored; for one job, a bare `localid=<id>` (the single-job contract) counts as line 1.
 */
export function parseBulkOutput(stdout: string, count: number): Map<number, BulkLine> {
  const out = new Map<number, BulkLine>();
  for (const raw of stdout.split("\n")) {
    const line = raw.replace(/\r$/, "").trim();
    const m = /^(\d+) (?:localid=(\S*)|(ok)|(error|busy)(?:\s+(.*))?)$/.exec(line);
    const bare = count === 1 ? /^localid=(.*)$/.exec(line) : null;
    if (!m && !bare) continue;
    const n = m ? Number(m[1]) : 1;
    if (!(n >= 1 && n <= count)) continue;
    if (bare) out.set(1, { kind: "localid", id: bare[1]! });
    else if (m![2] !== undefined) out.set(n, { kind: "localid", id: m![2] });
    else if (m![3]) out.set(n, { kind: "ok" });
    else out.set(n, { kind: m![4] as "error" | "busy", reason: (m![5] ?? "").trim() || `${m![4]} without a reason` });
  }
  return out;
}

/**
 * Jobs per bulk script run, how long the first one waits for company (ms), and how long a bulk
 * submit waits for submissions announced by expectSubmit (jobs still being prepared).
 */
const BULK_MAX = 100;
const BULK_WINDOW_MS = 4;
const BULK_MAX_WAIT_MS = 200;

interface CancelItem {
  localId: string;
  jobId: string;
  jobDir: string;
  runAs?: RunAsJob | undefined;
}

function hasScript(dir: string, op: string): boolean {
  try {
    accessSync(join(dir, op), constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** The `Backend` on top of the script contract (apps/jem/backends/README.md). */
export class ScriptBackend implements Backend {
  private readonly limiter: Pick<TokenBucket, "take">;
  private readonly log: Logger;
  private readonly env: Record<string, string>;
  private readonly submits: MicroBatcher<BatchJobSpec, { localId: string }>;
  private readonly cancels: MicroBatcher<CancelItem, true>;

  constructor(
    readonly name: string,
    private readonly opts: ScriptBackendOptions,
  ) {
    const rate = opts.config.lrms.callsPerSecond;
    this.limiter = rate > 0 ? new TokenBucket(rate) : UNLIMITED;
    this.log = opts.log.child({ component: "lrms", backend: name });
    const sge = opts.config.lrms.sge;
    this.env = {
      JEM_BACKEND: name,
      SLURM_BIN_PATH: opts.config.lrms.slurm.binPath,
      SGE_BIN_PATH: sge.binPath,
      ...(sge.parallelEnvironment ? { JEM_SGE_PE: sge.parallelEnvironment } : {}),
    };
    this.submits = new MicroBatcher({
      windowMs: BULK_WINDOW_MS,
      maxWaitMs: BULK_MAX_WAIT_MS,
      max: BULK_MAX,
      run: (_k, specs, early) => this.submitBulk(specs, early),
    });
    this.cancels = new MicroBatcher({ windowMs: BULK_WINDOW_MS, max: BULK_MAX, run: (_k, items) => this.cancelBulk(items) });
    if (hasScript(opts.dir, "usage")) this.usage = (jobs) => this.batchUsage(jobs);
  }

  /** Present when the back end ships a `usage` script (checked once, here). */
  readonly usage?: (jobs: Array<{ jobId: string; localId: string }>) => Promise<Map<string, BatchUsage>>;

  /** One script run; `ops` batch-system operations are taken from the rate limit first. */
  private async call(
    op: "submit" | "cancel" | "poll" | "usage",
    args: string[],
    input?: string,
    runAs?: RunAsJob,
    ops = 1,
    onLine?: (line: string) => void,
  ): Promise<ScriptResult> {
    const waited = performance.now();
    await this.limiter.take(ops);
    const queuedMs = Math.round(performance.now() - waited);
    const cmd = runAs ? runAs.wrap(join(this.opts.dir, op), args) : { file: join(this.opts.dir, op), args };
    const r = await runScript(cmd.file, cmd.args, {
      input,
      timeoutMs: this.opts.config.lrms.scriptTimeoutMs,
      env: runAs ? runAs.env(this.env) : this.env,
      extendEnv: !runAs,
      ...(onLine ? { onLine } : {}),
    });
    const fields = { op, ops, exitCode: r.exitCode, signal: r.signal, ms: r.durationMs, queuedMs, timedOut: r.timedOut };
    if (r.timedOut || r.exitCode !== 0) this.log.warn({ ...fields, stderr: r.stderr.slice(-2000) }, `lrms ${op} failed`);
    else this.log.debug(fields, `lrms ${op}`);
    return r;
  }

  private failure(code: "SUBMIT_FAILED" | "CANCEL_FAILED" | "POLL_FAILED", op: string, r: ScriptResult): BackendError {
    if (r.timedOut)
      return new BackendError("TIMEOUT", `${op} timed out after ${this.opts.config.lrms.scriptTimeoutMs} ms`, { stderr: r.stderr });
    if (r.spawnError) return new BackendError(code, `${op} could not run: ${r.spawnError}`);
    return new BackendError(code, reason(r), {
      stderr: r.stderr.slice(-4096),
      ...(r.exitCode === undefined ? {} : { exitCode: r.exitCode }),
    });
  }

  /**
   * RTE stage 0 on the front end (ARC's contract, rte-stage0.ts): the RTEs are sourced with the
   * job's options as joboption_* (the `grami` written here), in one shell as the job's account;
   * what they leave becomes the batch file. Their output goes to the job's `errors`.
   */
  private async stage0(
    batch: BatchFile,
    write: WriteJobFile,
    runAs?: RunAsJob,
  ): Promise<{ batch: BatchFile; changes: string[]; log: string }> {
    await Promise.all([write("batch.env", renderBatchEnv(batch), 0o600), write("grami", renderGrami(gramiOf(batch)), 0o600)]);
    const args = [
      "-c",
      loadStage0Body(this.opts.wrapperDir),
      "rte-stage0",
      join(batch.jobDir, "batch.env"),
      join(batch.jobDir, "grami"),
      ...stage0Args(batch),
    ];
    const cmd = runAs ? runAs.wrap("/bin/bash", args) : { file: "/bin/bash", args };
    const r = await runScript(cmd.file, cmd.args, {
      timeoutMs: this.opts.config.lrms.scriptTimeoutMs,
      cwd: batch.sessionDir,
      env: runAs ? runAs.env(this.env) : this.env,
      extendEnv: !runAs,
    });
    const out = parseStage0Output(r.stdout);
    const names = batch.runtimeEnvironments.map((x) => x.name).join(", ");
    if (r.timedOut || out.kind !== "ok") {
      const why = r.timedOut
        ? `Runtime environments ${names} timed out in stage 0`
        : out.kind === "failed"
          ? `Runtime environment ${out.rte} failed in stage 0 (exit code ${out.code})${r.stderr.trim() ? `: ${reason(r)}` : ""}`
          : `Runtime environments ${names} ended stage 0 early: ${reason(r)}`;
      throw new BackendError("SUBMIT_FAILED", why, { stderr: r.stderr.slice(-4096) });
    }
    const applied = applyStage0(batch, out.vars, this.opts.config);
    await write("grami", renderGrami(applied.grami), 0o600);
    if (applied.changes.length > 0)
      this.log.info({ jobId: batch.jobId, rtes: names, changes: applied.changes }, "runtime environments changed the job in stage 0");
    return { batch: applied.batch, changes: applied.changes, log: r.stderr.slice(-4096) };
  }

  expectSubmit(): Expected {
    return this.submits.expect();
  }

  async submit(spec: BatchJobSpec, expected?: Expected): Promise<SubmitResult> {
    try {
      if (spec.submitTag === undefined) spec = { ...spec, submitTag: `${spec.jobId}.${randomBytes(4).toString("hex")}` };
      const write: WriteJobFile = spec.runAs
        ? (name, text, mode) => spec.runAs!.writeFile(name, text, mode)
        : (name, text, mode) => writeAtomic(join(spec.jobDir, name), text, mode);
      let batch = buildBatchFile(spec, this.opts.config);
      const rte = batch.runtimeEnvironments.length > 0 ? await this.stage0(batch, write, spec.runAs) : undefined;
      if (rte) batch = rte.batch;
      const script = renderJobScript(batch, loadWrapperBody(this.opts.wrapperDir), spec.node);
      // Independent files, all written before any script reads them: together (one file-thread message with mapping on).
      await Promise.all([
        write("batch.json", `${JSON.stringify(batch, null, 2)}\n`, 0o600),
        write("batch.env", renderBatchEnv(batch), 0o600),
        write("job.sh", script, 0o700),
      ]);
      const { localId } = await this.submits.add(spec.runAs?.account ?? "", spec, expected);
      this.log.debug(
        {
          jobId: spec.jobId,
          localId,
          queue: spec.queue,
          partition: batch.partition,
          ...(spec.requestId ? { requestId: spec.requestId } : {}),
          ...(spec.resume ? { resumed: true } : {}),
        },
        "job submitted to the batch system",
      );
      return { localId, ...(rte ? { rteChanges: rte.changes, rteLog: rte.log } : {}) };
    } finally {
      // Failed before its batch (a file, RTE stage 0): the others stop waiting for it.
      expected?.settle();
    }
  }

  /**
   * One submit run for jobs of one account: one result line per job dir. A job's local id counts
   * from its line on (`early`): its caller records it while the script still starts the others.
   */
  private async submitBulk(
    specs: BatchJobSpec[],
    early?: (i: number, r: { localId: string }) => void,
  ): Promise<Array<{ localId: string } | Error>> {
    const onLine = early
      ? (line: string) => {
          const l = parseBulkOutput(line, specs.length).values().next().value;
          const n = /^(\d+) /.exec(line.trim())?.[1];
          if (l?.kind === "localid" && n !== undefined && LOCAL_ID.test(l.id)) early(Number(n) - 1, { localId: l.id });
        }
      : undefined;
    const r = await this.call(
      "submit",
      specs.map((s) => s.jobDir),
      undefined,
      specs[0]!.runAs,
      specs.length,
      onLine,
    );
    const lines = parseBulkOutput(r.stdout, specs.length);
    const failed = r.timedOut || r.exitCode !== 0;
    return specs.map((_, i) => {
      const l = lines.get(i + 1);
      if (l?.kind === "localid") {
        return LOCAL_ID.test(l.id)
          ? { localId: l.id }
          : new BackendError("BAD_OUTPUT", `submit printed an invalid local id: ${JSON.stringify(l.id.slice(0, 200))}`);
      }
      if (l?.kind === "error") return new BackendError("SUBMIT_FAILED", l.reason.slice(0, 1000), { stderr: r.stderr.slice(-4096) });
      if (l?.kind === "busy") return new BackendError("BUSY", l.reason.slice(0, 1000));
      if (failed) return this.failure("SUBMIT_FAILED", "submit", r);
      return new BackendError("BAD_OUTPUT", `submit printed no result line for this job: ${JSON.stringify(r.stdout.slice(0, 200))}`);
    });
  }

  async cancel(localId: string, spec: { jobId: string; jobDir: string; runAs?: RunAsJob | undefined }): Promise<void> {
    if (!LOCAL_ID.test(localId)) throw new BackendError("CANCEL_FAILED", `invalid local id ${JSON.stringify(localId.slice(0, 80))}`);
    await this.cancels.add(spec.runAs?.account ?? "", { localId, jobId: spec.jobId, jobDir: spec.jobDir, runAs: spec.runAs });
    this.log.info({ jobId: spec.jobId, localId }, "job cancelled in the batch system");
  }

  /** One cancel run for jobs of one account: `<localid> <jobdir>` pairs, one result line per job. */
  private async cancelBulk(items: CancelItem[]): Promise<Array<true | Error>> {
    const r = await this.call(
      "cancel",
      items.flatMap((c) => [c.localId, c.jobDir]),
      undefined,
      items[0]!.runAs,
      items.length,
    );
    const lines = parseBulkOutput(r.stdout, items.length);
    const failed = r.timedOut || r.exitCode !== 0;
    return items.map((_, i) => {
      const l = lines.get(i + 1);
      if (l?.kind === "ok") return true;
      if (l?.kind === "error" || l?.kind === "busy") return new BackendError("CANCEL_FAILED", l.reason.slice(0, 1000));
      // The single-job contract prints nothing: exit 0 is the answer.
      return failed ? this.failure("CANCEL_FAILED", "cancel", r) : true;
    });
  }

  async poll(jobs: Array<{ jobId: string; localId: string; jobDir: string }>): Promise<Map<string, PollState>> {
    const result = new Map<string, PollState>();
    const asked = jobs.filter((j) => {
      const ok = TOKEN.test(j.jobId) && LOCAL_ID.test(j.localId) && !/[\n\r]/.test(j.jobDir);
      if (!ok) result.set(j.jobId, { kind: "unknown", reason: "invalid job id, local id or job dir" });
      return ok;
    });
    if (asked.length === 0) return result;
    const input = asked.map((j) => `${j.jobId} ${j.localId} ${j.jobDir}\n`).join("");
    let r: ScriptResult;
    try {
      r = await this.call("poll", [], input);
    } catch (e) {
      r = { exitCode: undefined, signal: undefined, stdout: "", stderr: String(e), timedOut: false, durationMs: 0, spawnError: String(e) };
    }
    if (r.timedOut || r.exitCode !== 0) {
      const err = this.failure("POLL_FAILED", "poll", r);
      for (const j of asked) result.set(j.jobId, { kind: "unknown", reason: `${err.code}: ${err.message}` });
      return result;
    }
    const { states, bad } = parsePollOutput(
      r.stdout,
      asked.map((j) => j.jobId),
    );
    if (bad.length > 0) this.log.warn({ lines: bad.slice(0, 5), count: bad.length }, "poll printed unparseable lines");
    for (const [id, s] of states) result.set(id, s);
    return result;
  }

  private async batchUsage(jobs: Array<{ jobId: string; localId: string }>): Promise<Map<string, BatchUsage>> {
    const asked = jobs.filter((j) => TOKEN.test(j.jobId) && LOCAL_ID.test(j.localId));
    if (asked.length === 0) return new Map();
    const r = await this.call("usage", [], asked.map((j) => `${j.jobId} ${j.localId}\n`).join("")).catch((e: unknown) => {
      this.log.warn({ err: e, reason: String(e) }, "lrms usage could not run");
      return undefined;
    });
    if (!r || r.timedOut || r.exitCode !== 0) return new Map();
    const { usage, bad } = parseUsageOutput(
      r.stdout,
      asked.map((j) => j.jobId),
    );
    if (bad > 0) this.log.warn({ count: bad }, "usage printed unparseable lines");
    return usage;
  }
}
