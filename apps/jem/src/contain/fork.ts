import { stat } from "node:fs/promises";
import type { CompiledConfig } from "@ce/config";
import type { JobDescription } from "@ce/model";
import type { Logger } from "pino";
import type { Expected } from "../lrms/micro-batch.js";
import {
  BackendError,
  type Backend,
  type BatchJobSpec,
  type JobContainment,
  type PollState,
  type RunAsJob,
  type SubmitResult,
} from "../lrms/types.js";
import { JobCgroups } from "./cgroup.js";
import { CLK_TCK, killPid, pidsWithEnv, procStat, procUids, uptimeSeconds } from "./procs.js";

/**
 * The fork back end with its jobs contained and their limits kept (docs/fork-containment.md).
 * Wraps the script back end: before a job starts, its cgroup is made; once the submit script
 * answers, the JEM moves the job's first process into it (the job waits for that); every poll
 * checks the running jobs' walltime, CPU time and OOM kills and ends a job over a limit with the
 * reason; a job that ended or was cancelled has everything left in its cgroup killed and the
 * cgroup removed. Without a usable cgroup: the job's process group and every process carrying
 * its GRID_GLOBAL_JOBID are killed, memory is bounded per process (RLIMIT_AS), and the account's
 * remaining processes are killed by uid before a pool lease changes hands (src/contain/scrub.ts).
 */

export interface Limits {
  wallSeconds?: number | undefined;
  cpuSeconds?: number | undefined;
  memoryMB?: number | undefined;
}

export interface ContainOptions {
  config: CompiledConfig;
  log: Logger;
  /** A running job's description (from the control dir: root's, never the job's files), for limits after a JEM restart. */
  description?: (jobId: string) => Promise<JobDescription | undefined>;
}

/** Exit code recorded for a job the JEM killed for a limit (the kernel's for SIGKILL). */
export const LIMIT_EXIT = 137;

export function limitsOf(d: JobDescription, queue: string, config: CompiledConfig): Limits {
  const q = config.jobs.queues.find((x) => x.name === queue);
  return {
    wallSeconds: d.wallTimeSeconds ?? q?.defaultWallTimeSeconds,
    cpuSeconds: d.cpuTimeSeconds,
    memoryMB: d.memoryMB ?? q?.defaultMemoryMB,
  };
}

const parseLocal = (localId: string) => {
  const m = /^(\d+):(\d+)$/.exec(localId);
  return m ? { pid: Number(m[1]), start: Number(m[2]) } : undefined;
};

export class ContainedFork implements Backend {
  readonly name: string;
  private readonly log: Logger;
  private cgroups: JobCgroups | undefined;
  /** The cgroup detection (at construction; every operation waits for it). */
  readonly ready: Promise<void>;
  private readonly scale: number;
  /** Limits by job id (from submit, or the description after a restart). */
  private readonly limits = new Map<string, Limits>();
  /** Jobs the JEM ended for a limit: the answer their polls give from then on. */
  private readonly verdicts = new Map<string, { exitCode: number; message: string }>();
  /** Jobs this process placed in their cgroup or found placed (a restarted JEM checks each once). */
  private readonly placed = new Set<string>();

  constructor(
    private readonly inner: Backend,
    private readonly opts: ContainOptions,
  ) {
    this.name = inner.name;
    this.log = opts.log.child({ component: "contain" });
    this.scale = opts.config.lrms.fork.timeLimitScale;
    this.ready = JobCgroups.detect(opts.config.lrms.fork).then(({ cgroups, reason }) => {
      this.cgroups = cgroups;
      if (cgroups) this.log.info({ cgroups: cgroups.describe() }, "fork jobs are contained in per-job cgroups");
      else {
        this.log.warn(
          { reason },
          "no cgroup for fork jobs: a job's end kills its process group and every process carrying its job id; memory is limited per process (RLIMIT_AS), CPU time per process (RLIMIT_CPU); a pool account's remaining processes are killed by uid before its lease is released",
        );
      }
    });
  }

  /** How jobs are contained here (undefined: no cgroup). */
  async cgroupsInUse(): Promise<JobCgroups | undefined> {
    await this.ready;
    return this.cgroups;
  }

  expectSubmit(): Expected {
    return this.inner.expectSubmit!();
  }

  async submit(spec: BatchJobSpec, expected?: Expected): Promise<SubmitResult> {
    await this.ready;
    const limits = limitsOf(spec.description, spec.queue, this.opts.config);
    this.limits.set(spec.jobId, limits);
    const contain: JobContainment = {};
    if (this.cgroups) {
      try {
        await this.cgroups.create(spec.jobId, { memoryMB: limits.memoryMB });
      } catch (e) {
        expected?.settle();
        throw new BackendError("SUBMIT_FAILED", `cannot create the job's cgroup: ${(e as Error).message}`, { cause: e });
      }
      contain.cgroup = this.cgroups.rel(spec.jobId);
      contain.cgroupCount = this.cgroups.count;
      const oom = this.cgroups.oomFile(spec.jobId);
      if (oom) contain.oomFile = oom;
    }
    if (limits.memoryMB && !this.cgroups?.memory) contain.rlimitAsKB = limits.memoryMB * 1024;
    let r: SubmitResult;
    try {
      r = await this.inner.submit({ ...spec, contain }, expected);
    } catch (e) {
      // Nothing started (or an earlier attempt's start lives on in it: end() only removes an empty one).
      if (this.cgroups && (await this.cgroups.members(spec.jobId)).length === 0) await this.cgroups.end(spec.jobId, this.log);
      throw e;
    }
    if (this.cgroups) await this.place(spec.jobId, r.localId, spec.runAs?.uid);
    this.placed.add(spec.jobId);
    return r;
  }

  /**
   * A JEM killed between starting a job and placing it leaves the job waiting for its cgroup (it
   * fails by itself after a while): the next JEM adopts the job and places it on its first poll.
   * The account is the batch dir's owner (the dir is the account's, 2770): a local id the job could
   * have planted names a process of that account or none.
   */
  private async placeIfNeeded(j: { jobId: string; localId: string; jobDir: string }): Promise<void> {
    if (!this.cgroups || this.placed.has(j.jobId)) return;
    this.placed.add(j.jobId);
    if ((await this.cgroups.members(j.jobId)).length > 0) return;
    const owner = await stat(j.jobDir).then(
      (st) => st.uid,
      () => undefined,
    );
    if (owner === undefined) return;
    try {
      await this.place(j.jobId, j.localId, owner);
      this.log.warn({ jobId: j.jobId }, "job found outside its cgroup after a JEM restart: placed now");
    } catch (e) {
      this.log.error({ jobId: j.jobId, err: e }, "job found outside its cgroup after a JEM restart and not placed");
    }
  }

  /** Moves the job's first process into its cgroup: only the process the local id names, of the job's account. */
  private async place(jobId: string, localId: string, uid: number | undefined): Promise<void> {
    const id = parseLocal(localId);
    if (!id || id.pid <= 1) return; // a claim whose starter died: nothing runs
    const st = await procStat(id.pid);
    if (!st || st.start !== id.start || st.state === "Z") return; // already over (it failed before waiting)
    if (uid !== undefined && !(await procUids(id.pid))?.includes(uid)) {
      throw new BackendError("SUBMIT_FAILED", `process ${id.pid} of job ${jobId} does not run as uid ${uid}`);
    }
    try {
      await this.cgroups!.place(jobId, id.pid);
    } catch (e) {
      // The job waits for placement and fails by itself when it never comes.
      this.log.error({ jobId, pid: id.pid, err: e }, "job could not be placed in its cgroup");
    }
  }

  async ended(jobId: string, localId: string | undefined): Promise<void> {
    await this.ready;
    await this.endJob(jobId, localId ?? "");
    this.limits.delete(jobId);
    this.placed.delete(jobId);
  }

  async cancel(localId: string, spec: { jobId: string; jobDir: string; runAs?: RunAsJob | undefined }): Promise<void> {
    await this.ready;
    await this.inner.cancel(localId, spec);
    await this.endJob(spec.jobId, localId);
  }

  async poll(jobs: Array<{ jobId: string; localId: string; jobDir: string }>): Promise<Map<string, PollState>> {
    await this.ready;
    const states = await this.inner.poll(jobs);
    const now = await uptimeSeconds();
    await Promise.all(jobs.filter((j) => states.get(j.jobId)?.kind === "active").map((j) => this.placeIfNeeded(j)));
    await Promise.all(
      jobs.map(async (j) => {
        const s = states.get(j.jobId);
        const verdict = this.verdicts.get(j.jobId);
        if (verdict) {
          // Ended by us: make sure nothing is left, answer with the reason.
          await this.endJob(j.jobId, j.localId);
          states.set(j.jobId, { kind: "done", ...verdict });
          return;
        }
        if (s?.kind === "done") {
          await this.endJob(j.jobId, j.localId);
          this.limits.delete(j.jobId);
          this.placed.delete(j.jobId);
          return;
        }
        if (s?.kind !== "active" || s.lrms !== "RUNNING") return;
        const over = await this.overLimit(j.jobId, j.localId, now);
        if (!over) return;
        const v = { exitCode: LIMIT_EXIT, message: over };
        this.verdicts.set(j.jobId, v);
        this.log.info({ jobId: j.jobId, reason: over }, "job ended for exceeding a limit");
        await this.endJob(j.jobId, j.localId);
        states.set(j.jobId, { kind: "done", ...v });
      }),
    );
    // Verdicts of jobs no longer polled (moved on) are dropped.
    const polled = new Set(jobs.map((j) => j.jobId));
    for (const id of this.verdicts.keys()) if (!polled.has(id)) this.verdicts.delete(id);
    return states;
  }

  private async limitsFor(jobId: string): Promise<Limits> {
    const hit = this.limits.get(jobId);
    if (hit) return hit;
    const d = await this.opts.description?.(jobId).catch(() => undefined);
    const l = d ? limitsOf(d, d.queue ?? "", this.opts.config) : {};
    this.limits.set(jobId, l);
    return l;
  }

  /** The reason a running job must end now, or undefined. */
  private async overLimit(jobId: string, localId: string, now: number): Promise<string | undefined> {
    const l = await this.limitsFor(jobId);
    const id = parseLocal(localId);
    if (l.wallSeconds !== undefined && id) {
      const ran = now - id.start / CLK_TCK;
      if (ran >= l.wallSeconds * this.scale) return `Walltime exceeded: the job ran past its limit of ${l.wallSeconds} s`;
    }
    if (l.cpuSeconds !== undefined && this.cgroups?.cpu) {
      const used = await this.cgroups.cpuSeconds(jobId);
      if (used !== undefined && used >= l.cpuSeconds * this.scale)
        return `CPU time exceeded: the job used more than its limit of ${l.cpuSeconds} s`;
    }
    if (l.memoryMB !== undefined && this.cgroups?.memory && (await this.cgroups.oomKills(jobId)) > 0) {
      return `Memory exceeded: the job used more than its limit of ${l.memoryMB} MB`;
    }
    return undefined;
  }

  /** Everything of the job ends: its cgroup emptied and removed, or (no cgroup) its group and marked processes killed. */
  private async endJob(jobId: string, localId: string): Promise<void> {
    if (this.cgroups) {
      await this.cgroups.end(jobId, this.log);
      return;
    }
    const id = parseLocal(localId);
    if (id && id.pid > 1) {
      const st = await procStat(id.pid);
      if (st && st.start === id.start) killPid(-id.pid);
    }
    // The wrapper exports GRID_GLOBAL_JOBID to everything the job starts.
    for (const pid of await pidsWithEnv(`GRID_GLOBAL_JOBID=${jobId}`).catch(() => [])) killPid(pid);
  }
}
