import { Failure } from "@ce/model";
import type { JobDescription, LrmsState } from "@ce/model";
import type { BatchUsage } from "./batch-usage.js";
import type { Expected } from "./micro-batch.js";

/**
 * The batch-system ("LRMS") boundary of the JEM. One `Backend` per daemon; the shipped
 * implementation drives the script contract of apps/jem/backends/README.md.
 */

/** The nothing-shared layout's settings for one batch job. */
export interface NodeTransfer {
  /** `<endpoint.url>/node/1/jobs/<id>`. */
  url: string;
  /** PEM of the CA(s) the node trusts that URL with. */
  caPem: string;
  /** The job's capability (secret). */
  capability: string;
  /** `lrms.scratchDir`. */
  scratchDir: string;
}

export interface BatchJobSpec {
  jobId: string;
  /** Completion doorbell the wrapper touches after writing lrms_done (ControlDir.eventFile). */
  eventFile?: string | undefined;
  owner: string;
  /** FQANs / token groups recorded at submission (placement rules match on them). */
  fqans?: readonly string[] | undefined;
  sessionDir: string;
  /** The job's batch dir (`<session>.lrms`, ControlDir.batchDir): batch.json, job.sh, diag, lrms_done and comment live here. */
  jobDir: string;
  description: JobDescription;
  queue: string;
  /** Overrides the queue's configured partition (default: queue name). */
  partition?: string;
  rteDir: string;
  /** RTE names for this job (requested); configured defaults are appended when missing. */
  runtimeEnvironments: string[];
  credentialFile?: string;
  /** The job's bearer token in its session (ENV/TOKEN's BEARER_TOKEN_FILE; credential-files.ts). */
  tokenFile?: string;
  requestId?: string;
  /**
   * `lrms.sharedSession: false`: what the wrapper needs to fetch and send the job's files over
   * HTTPS (routes/node.ts of the gateway). Only in job.sh (never in batch.json/batch.env or a log).
   */
  node?: NodeTransfer | undefined;
  /** Mapping on: scripts run as the job's account and job files are written owned by it (src/priv). */
  runAs?: RunAsJob | undefined;
  /**
   * Names this submission attempt in the batch system (Slurm `--comment`, fork's start record):
   * a back end never starts two batch jobs for one tag. The JEM keeps it in the `submitting`
   * marker; a fresh random one per call when absent.
   */
  submitTag?: string;
  /** An earlier attempt with this tag may have reached the batch system (a JEM died in between): adopt it. */
  resume?: boolean;
  /** Fork containment (src/contain): the job's cgroup and the limits the kernel enforces per process. */
  contain?: JobContainment;
}

export interface JobContainment {
  /** The job's cgroup as /proc/<pid>/cgroup names it; the job waits until it is in it `cgroupCount` times. */
  cgroup?: string;
  cgroupCount?: number;
  /** The cgroup's OOM counter file (the wrapper names "memory exceeded" from it). */
  oomFile?: string;
  /** RLIMIT_AS in KiB, where no memory cgroup limits the job. */
  rlimitAsKB?: number;
}

/** How a back end runs a job's scripts as its mapped account (provided by src/priv/priv.ts). */
export interface RunAsJob {
  /** The account: jobs of one account share a script run (bulk submit/cancel), never two accounts. */
  account: string;
  /** Its uid (fork containment checks the job's first process runs as it). */
  uid?: number;
  /** Its primary gid (private directories handed to the account, src/staging/tools.ts). */
  gid?: number;
  /** argv of `file args` as the account. */
  wrap(file: string, args: string[]): { file: string; args: string[] };
  /** The whole environment of such a process (nothing of the JEM's own). */
  env(extra: Record<string, string>): Record<string, string>;
  /** Writes a file into the job's batch dir owned by the account. */
  writeFile(name: string, content: string, mode: number): Promise<string>;
}

export interface SubmitResult {
  localId: string;
  /** What RTE stage 0 changed (`joboption_x: old → new`), for the job's `errors`. */
  rteChanges?: string[];
  /** What the RTEs printed in stage 0 (bounded). */
  rteLog?: string;
}

/**
 * Result of one poll for one job. `unknown` is never a final answer: the caller keeps the job
 * INLRMS and asks again (a failed batch query must never look like "finished").
 */
export type PollState =
  | {
      kind: "active";
      lrms: LrmsState;
      /**
       * Why a waiting job waits, as the batch system states it (Slurm `%r`: `Priority`,
       * `JobHeldAdmin`, …; Grid Engine's scheduling info): only for QUEUING, HELD and OTHER, absent
       * when the back end printed none. Sanitized (`lrmsReasonText`).
       */
      reason?: string;
    }
  | { kind: "done"; exitCode: number; message: string }
  | { kind: "unknown"; reason: string };

export interface Backend {
  readonly name: string;
  /**
   * Writes batch.json + job.sh into spec.jobDir, runs RTE stage 0, then the back end's submit
   * (concurrent calls share one script run per account). Exactly once per `submitTag`.
   */
  submit(spec: BatchJobSpec, expected?: Expected): Promise<SubmitResult>;
  /**
   * Announces a submit() call that is still being prepared (its job's files, its account): bulk
   * calls wait for it. Pass the result to that submit(), and settle it if the call never comes.
   */
  expectSubmit?(): Expected;
  /**
   * The batch job has ended (its lrms_done is there): whatever it left running ends now (fork:
   * its cgroup is emptied and removed). Called by the INLRMS and CANCELING handlers; idempotent.
   */
  ended?(jobId: string, localId: string | undefined): Promise<void>;
  /** Succeeds also when the job is already gone. */
  cancel(localId: string, spec: { jobId: string; jobDir: string; runAs?: RunAsJob | undefined }): Promise<void>;
  /**
   * One batch-system query for all jobs. Never throws: a failed or garbled query yields
   * `unknown` for the affected jobs (reason starts with the BackendError code).
   */
  poll(jobs: Array<{ jobId: string; localId: string; jobDir: string }>): Promise<Map<string, PollState>>;
  /**
   * What the batch system measured of ended jobs (the optional `usage` script), for the usage
   * record. Never throws: jobs it has no figures for (or a failed query) are absent from the map.
   */
  usage?(jobs: Array<{ jobId: string; localId: string }>): Promise<Map<string, BatchUsage>>;
}

/** BUSY: not done yet, nothing failed (an earlier submission of the job is still in flight): ask again later. */
export type BackendErrorCode = "SUBMIT_FAILED" | "CANCEL_FAILED" | "POLL_FAILED" | "TIMEOUT" | "BAD_OUTPUT" | "BUSY";

export class BackendError extends Failure<BackendErrorCode> {
  /** Script stderr (trimmed, ≤ 4 KiB) when a script failed. */
  readonly stderr: string | undefined;
  readonly exitCode: number | undefined;

  constructor(code: BackendErrorCode, message: string, opts: { stderr?: string; exitCode?: number; cause?: unknown } = {}) {
    super(code, message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.stderr = opts.stderr;
    this.exitCode = opts.exitCode;
  }
}
