import { Failure, toRestState, waitsOnlyForUploads } from "@ce/model";
import { type JobRecord, type JobStore, mapLimit } from "@ce/store";
import type { ControlDir } from "./controldir.js";
import { fileq } from "./files.js";
import { appendInputs } from "./inputstatus.js";
import { type JobFilesInput, jobFiles } from "./jobfiles.js";

/**
 * The control-directory protocol, one owner: everything that creates a job (gateway, JEM tests,
 * JEM bench) calls `createJobs`; every completed client upload goes through `completeUpload`;
 * `input_status` is written only by appending (inputstatus.ts). The rule that keeps two processes
 * from fighting: the gateway writes a file only while the job has no record yet (creation, O_EXCL),
 * or by appending; after the commit every rewrite is the JEM's. Who writes each file: writers.ts.
 */

/** The commit failed (Redis unreachable, script error): no job of the call was created; its files are gone. */
export class JobCommitError extends Failure<"STORE_UNAVAILABLE"> {
  constructor(cause: unknown) {
    super("STORE_UNAVAILABLE", "job records could not be created", { cause });
  }
}

export interface NewJob {
  record: JobRecord;
  files: JobFilesInput;
}

export interface CreateJobsOptions {
  maxTotal: number;
  /** All or nothing below this many (instances_min); default: every job. */
  minRequired?: number | undefined;
  maxPerOwner?: number | undefined;
  /**
   * Admission at creation (@ce/model CREATION_STATES): a job that would only wait for client
   * uploads (`waitsOnlyForUploads`) is created in PREPARING, due for the JEM at its upload deadline,
   * while its owner stays within `maxActivePerOwner` (checked in the atomic create). Absent: every
   * job is created in ACCEPTED for the JEM to admit.
   */
  admit?: { maxActivePerOwner: number; uploadTimeoutMs: number } | undefined;
  /**
   * Deadline (ms) of the submission hold of the records that carry one (`hold`, holds.ts): they
   * cannot run before the caller releases the hold, and are withdrawn after this time otherwise.
   */
  holdUntil?: number | undefined;
  /** The pool lease that must still be the identity's at the commit (@ce/store CreateLimits.lease). */
  lease?: { account: string; identity: string } | undefined;
  /** Parallel removals and rewrites of a failed or demoted batch (creation goes to the file threads in one message each). */
  concurrency?: number | undefined;
  /** After the commit: delegation binding (the JEM's work list is part of the commit itself). Its failure is reported, not thrown (the jobs exist). */
  notify?: ((committed: JobRecord[]) => Promise<void>) | undefined;
  /** Non-fatal problems: a job's files could not be written, notify failed, the creating marks were not cleared. */
  warn?: ((what: string, err: unknown, jobId?: string) => void) | undefined;
}

/** Per job, in input order: created, files not written, or stopped by a limit. */
export type CreateOutcome = "created" | "files-failed" | "limited";

export interface CreateJobsResult {
  outcomes: CreateOutcome[];
  committed: JobRecord[];
  limitedBy?: "total" | "owner" | "lease" | undefined;
}

/**
 * Creates jobs: creating mark → control files (no `status`: the JEM's) → ONE atomic Redis create within the
 * limits (the commit point, which also clears the mark) → notify. Files of jobs not committed are removed again;
 * if this process dies before the commit, the mark lets the JEM's sweep remove the orphans.
 */
export async function createJobs(
  store: { control: ControlDir; jobs: JobStore },
  jobs: readonly NewJob[],
  o: CreateJobsOptions,
): Promise<CreateJobsResult> {
  if (jobs.length === 0) return { outcomes: [], committed: [] };
  const { control } = store;
  const warn = o.warn ?? (() => undefined);
  const minRequired = o.minRequired ?? jobs.length;
  const concurrency = o.concurrency ?? 32;
  const ids = jobs.map((j) => j.record.id);
  const removeAll = (recs: readonly JobRecord[]) => mapLimit(recs, concurrency, (r) => control.removeAll(r.id).catch(() => undefined));
  const records = admitAtCreation(jobs, o.admit);
  await store.jobs.markCreating(ids);
  // The commit clears the marks of the jobs it creates; the rest are cleared here.
  let settled = new Set<string>();
  try {
    const written = await writeAll(control, jobs, records, warn);
    await mapLimit(
      jobs.filter((_, i) => !written[i]),
      concurrency,
      (j) => control.removeAll(j.record.id).catch(() => undefined),
    );
    let ready = records.filter((_, i) => written[i]);
    if (ready.length < minRequired) {
      await removeAll(ready);
      return { outcomes: jobs.map(() => "files-failed"), committed: [] };
    }
    let created: number;
    let limitedBy: "total" | "owner" | "active" | "lease" | undefined;
    const commit = () =>
      store.jobs.createBounded(ready, {
        maxTotal: o.maxTotal,
        minRequired,
        maxPerOwner: o.maxPerOwner ?? 0,
        maxActivePerOwner: o.admit?.maxActivePerOwner,
        admittedDue: o.admit ? Date.now() + o.admit.uploadTimeoutMs : undefined,
        holdUntil: o.holdUntil,
        lease: o.lease,
      });
    try {
      ({ created, limitedBy } = await commit());
      if (limitedBy === "active") {
        // The owner is at its active limit: the admitted jobs go back to ACCEPTED (files first,
        // nothing reads them before the commit) and wait for the JEM's admission like any other.
        ready = await mapLimit(ready, concurrency, (r) => (r.state === "PREPARING" ? unadmit(control, r) : Promise.resolve(r)));
        ({ created, limitedBy } = await commit());
      }
    } catch (err) {
      await removeAll(ready);
      throw new JobCommitError(err);
    }
    const committed = ready.slice(0, created);
    settled = new Set(committed.map((r) => r.id));
    await removeAll(ready.slice(created));
    if (o.notify && committed.length > 0) await o.notify(committed).catch((err: unknown) => warn("notification after commit failed", err));
    return {
      outcomes: jobs.map((j, i) => (settled.has(j.record.id) ? "created" : written[i] ? "limited" : "files-failed")),
      committed,
      limitedBy: limitedBy === "active" ? undefined : limitedBy,
    };
  } finally {
    await store.jobs.doneCreating(ids.filter((id) => !settled.has(id))).catch((err: unknown) => warn("creating marks not cleared", err));
  }
}

/** Every job's files, one file-thread operation per job (one message per thread); per job, whether all were written. */
async function writeAll(
  control: ControlDir,
  jobs: readonly NewJob[],
  records: readonly JobRecord[],
  warn: (what: string, err: unknown, jobId?: string) => void,
): Promise<boolean[]> {
  let batch;
  try {
    batch = jobs.map((j, i) => jobFiles(control, j.files, records[i]!.state === "PREPARING" ? "PREPARING" : "ACCEPTED"));
  } catch (err) {
    // Not a job id, or content that cannot be rendered: nothing was written.
    warn("writing control files failed", err);
    return jobs.map(() => false);
  }
  // Issued in one turn: the file queue sends them together, split over its threads.
  const results = await Promise.allSettled(batch.map((op) => fileq.one(op)));
  // A failed thread fails every job it held with one error: said once, not per job.
  const said = new Set<unknown>();
  return results.map((r, i) => {
    if (r.status === "fulfilled") return true;
    const perJob = typeof (r.reason as NodeJS.ErrnoException | undefined)?.code === "string";
    if (perJob || !said.has(r.reason)) warn("writing control files failed", r.reason, perJob ? jobs[i]!.record.id : undefined);
    said.add(r.reason);
    return false;
  });
}

/** The records to create: PREPARING for the jobs admitted at creation (one owner per call: the first such job's). */
function admitAtCreation(jobs: readonly NewJob[], admit: CreateJobsOptions["admit"]): JobRecord[] {
  if (!admit) return jobs.map((j) => j.record);
  const now = Date.now();
  let owner: string | undefined;
  return jobs.map(({ record: r, files }) => {
    if (r.state !== "ACCEPTED" || r.pending || !waitsOnlyForUploads(files.description, now)) return r;
    owner ??= r.ownerKey;
    if (r.ownerKey !== owner) return r;
    return { ...r, state: "PREPARING" as const, rest: toRestState({ state: "PREPARING", pending: r.pending }) };
  });
}

/** Back to ACCEPTED before the commit: the admission line of `errors` dropped. */
async function unadmit(control: ControlDir, r: JobRecord): Promise<JobRecord> {
  await control.remove(r.id, "errors");
  return { ...r, state: "ACCEPTED", rest: toRestState({ state: "ACCEPTED", pending: false }) };
}

/**
 * A client upload of `path` (session path) completed: recorded in `input_status` (append) and the
 * JEM told — only while the job still waits for its inputs; A-REX accepts PUTs at any time.
 * Returns whether the job was told.
 */
export async function completeUpload(
  control: ControlDir,
  job: { id: string; state: string },
  path: string,
  notify: () => Promise<unknown>,
): Promise<boolean> {
  if (job.state !== "ACCEPTED" && job.state !== "PREPARING") return false;
  await appendInputs(control, job.id, [path]);
  await notify();
  return true;
}
