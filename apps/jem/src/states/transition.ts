import { canMove, formatStatusFile, IllegalMoveError, type InternalState, type LrmsState } from "@ce/model";
import { type JobChange, type JobRecord } from "@ce/store";
import { stateLine, fileq, type FsOp } from "@ce/controldir";
import { jobFields, jobLog, type JemContext } from "../context.js";
import type { HookState } from "../hooks.js";
import { afterTransition } from "../limits.js";
import { turnLog } from "../turn-log.js";

export const KILL_TEXT = "Job is canceled by external request";
const LOST_CAS_RETRY_MS = 200;

export interface TransitionOptions {
  pending?: boolean;
  /** Reason written to `errors` (A-REX wording where one exists). */
  reason: string;
  /** Extra record fields changed atomically with the state. */
  change?: JobChange;
  /** Line appended to the `failed` control file once the change is committed. */
  failedLine?: string;
  /** Usage facts beyond the record, appended with a move into FINISHED (usage.ts). */
  usage?: Record<string, string | number>;
}

/**
 * THE state change. Compare-and-set on (state, pending, stateSince) as read, so a job is
 * advanced at most once whatever the number of JEMs; then the control files follow Redis:
 * `status`, the `errors` line and `failed` (diagnose `xml` is rendered from the record). Returns the new record, or
 * undefined when someone else changed the job first (the caller just stops).
 */
export async function transition(
  ctx: JemContext,
  job: JobRecord,
  to: InternalState,
  opts: TransitionOptions,
): Promise<JobRecord | undefined> {
  const pending = opts.pending ?? false;
  if (job.state === to && job.pending === pending && !opts.change) return job;
  refuseIllegal(ctx, job, to, pending);
  const expect = { state: job.state, pending: job.pending ? "1" : "0", stateSince: String(job.stateSince) } as const;
  const next = await ctx.jobs.update(job, { ...opts.change, state: to, pending }, expect, opts.usage);
  if (!next) {
    // Lost CAS: the job changed under us (a command, or ioredis replaying an update already
    // applied before a connection drop). Under the advance set's lease nobody else is looking at
    // it, so it must be looked at again, or a job could sit moved with nothing due.
    await ctx.advance.ring([job.id], Date.now() + LOST_CAS_RETRY_MS);
    return undefined;
  }
  const from = formatStatusFile(job.state, job.pending);
  const toWord = job.state === to && pending ? `${to}(PENDING)` : formatStatusFile(to, pending);
  try {
    // One round trip to the file thread, in this order. `errors` first: after a crash between the
    // two, `repairControlFiles` sees the stale status and knows from the log that the line was already written.
    const status = formatStatusFile(to, pending);
    const ops: FsOp[] = [];
    if (from !== status) ops.push(ctx.control.appendOp(job.id, "errors", stateLine(from, toWord, opts.reason)));
    ops.push(ctx.control.writeOp(job.id, "status", status, 0o644));
    if (opts.failedLine) ops.push(ctx.control.appendOp(job.id, "failed", opts.failedLine));
    await fileq.run(ops);
    statusWritten(ctx, job.id, status);
  } catch (e) {
    // Redis already holds the truth; a missing control file is repaired by the next transition.
    jobLog(ctx, job).warn({ err: e }, "control files not updated after state change");
  }
  // A failure's line says what failed: the text of this failure, or on the final move the job's.
  const failure = opts.failedLine ?? (to === "FINISHED" && next.outcome !== "success" ? next.failure : undefined);
  logMove(ctx, {
    ...jobFields(job),
    from,
    to: formatStatusFile(to, pending),
    rest: next.rest,
    reason: opts.reason,
    ...(failure ? { failure, failedCause: next.failedCause } : {}),
  });
  // Site hooks of the state entered (ACCEPTED's is the admission check, run by its handler).
  if (job.state !== to && to !== "ACCEPTED" && ctx.hooks?.has(to as HookState)) ctx.hooks.notify(to as HookState, next);
  await afterTransition(ctx, job, next).catch((e: unknown) => jobLog(ctx, job).warn({ err: e }, "wake-up of pending jobs failed"));
  return next;
}

export type Move = ReturnType<typeof jobFields> & {
  from: string;
  to: string;
  rest: string;
  reason: string;
  failure?: string;
  failedCause?: string | undefined;
};
/** Failure texts in a burst line are cut to this length (the job's own line has all of it). */
const FAILURE_KEY_MAX = 200;
/**
 * The log of state changes: a lone move is one info line as ever ("state change", with the job's
 * and request's ids); the moves of a burst made in one turn of the event loop are one info line
 * ("state changes": job ids by move, failed ones by reason), each job's line then at debug
 * (turn-log.ts). A failure's line carries its text (`failure`) and whose it is (`failedCause`).
 */
const logMoves = turnLog<Move>("state change", "state changes", (all) => {
  const byMove: Record<string, string[]> = {};
  const failures: Record<string, string[]> = {};
  for (const x of all) {
    (byMove[`${x.from} -> ${x.to}`] ??= []).push(x.jobId);
    if (x.failure) (failures[x.failure.slice(0, FAILURE_KEY_MAX)] ??= []).push(x.jobId);
  }
  // Failed jobs by reason, so a burst of failures says why at info level too.
  return { count: all.length, moves: byMove, ...(Object.keys(failures).length ? { failures } : {}) };
});
export function logMove(ctx: Pick<JemContext, "log">, m: Move): void {
  logMoves(ctx, m);
}

/**
 * Refuses a move that `ALLOWED_MOVES` (packages/model) does not list, before any write: a bug in a
 * handler must stop loudly, never rewrite a job's history.
 */
function refuseIllegal(ctx: JemContext, job: JobRecord, to: InternalState, pending: boolean): void {
  if (canMove(job.state, to, pending)) return;
  const err = new IllegalMoveError(job.id, job.state, to, pending);
  jobLog(ctx, job).error({ code: err.code, from: formatStatusFile(job.state, job.pending), to: err.to }, err.message);
  throw err;
}

/**
 * The batch poll's INLRMS sub-state (QUEUING, RUNNING, ...) and the batch system's reason a waiting job waits: not a state move, so no table check
 * and no `errors` line, but the CAS pins `state` to INLRMS (not pending) as read, so it can never
 * change the state or overwrite a move made meanwhile. Returns the new record, or undefined.
 */
export async function setLrmsSubstate(ctx: JemContext, job: JobRecord, lrms: LrmsState, reason?: string): Promise<JobRecord | undefined> {
  if (job.state !== "INLRMS" || job.pending) return undefined;
  // "" clears a reason the batch system no longer gives (an empty field reads as absent).
  const change = reason === undefined && job.lrmsReason === undefined ? { lrms } : { lrms, lrmsReason: reason ?? "" };
  const next = await ctx.jobs.update(job, change, { state: "INLRMS", pending: "0", stateSince: String(job.stateSince) });
  return next;
}

/** Whose the failure is: the client's (a kill), the user's (their job or request), or the site's (`internal`). */
export type FailedCause = NonNullable<JobRecord["failedCause"]>;

/**
 * Record fields of a failure. The first failure wins for failedState/failedCause (restart point),
 * texts accumulate. `state` undefined = not restartable (description errors, dry run).
 */
export function failureChange(job: JobRecord, text: string, where: { state?: InternalState; cause: FailedCause }): JobChange {
  const change: JobChange = { failure: job.failure ? `${job.failure}\n${text}` : text };
  if (!job.failedCause) change.failedCause = where.cause;
  if (!job.failedState && where.state) change.failedState = where.state;
  // A kill after an internal failure still makes the job KILLED: the client asked for it.
  if (where.cause === "client") change.failedCause = "client";
  return change;
}

/** Fails the job from its current state into FINISHING (docs/architecture.md, Job flow: the failure path). */
export async function failToFinishing(
  ctx: JemContext,
  job: JobRecord,
  text: string,
  where: { state?: InternalState; cause: FailedCause },
  extra: JobChange = {},
): Promise<JobRecord | undefined> {
  return transition(ctx, job, "FINISHING", {
    reason: where.cause === "client" ? "Request to cancel job" : "Job failure detected",
    change: { ...extra, ...failureChange(job, text, where) },
    failedLine: text,
  });
}

/**
 * The `status` this process last wrote or read per job (bounded, oldest dropped first), so the
 * repair check before each look costs no file read in the common case. A status changed by another
 * JEM goes with a record change, so `want` then differs and the file is read again.
 */
const writtenStatus = new WeakMap<object, Map<string, string>>();
const WRITTEN_STATUS_MAX = 200_000;

function statusWritten(ctx: JemContext, id: string, status: string): void {
  let m = writtenStatus.get(ctx.control);
  if (!m) writtenStatus.set(ctx.control, (m = new Map()));
  m.delete(id);
  m.set(id, status);
  if (m.size > WRITTEN_STATUS_MAX) m.delete(m.keys().next().value!);
}

/**
 * A JEM killed between the CAS and the control-file writes leaves `status` (and maybe the
 * `errors` line) behind Redis. Run under the job's lease before any handler.
 */
export async function repairControlFiles(ctx: JemContext, job: JobRecord): Promise<void> {
  const want = formatStatusFile(job.state, job.pending);
  // This JEM wrote exactly this status itself: nothing to repair, no file read.
  if (writtenStatus.get(ctx.control)?.get(job.id) === want) return;
  // Never changed since the gateway created it (in a @ce/model CREATION_STATES state): the gateway
  // writes no `status` (the first move does), and an admission at creation wrote its `errors` line.
  if (job.updated === job.created && (want === "ACCEPTED" || want === "PREPARING")) return;
  const have = ((await ctx.control.read(job.id, "status")) ?? "").trim();
  if (have === want) {
    statusWritten(ctx, job.id, want);
    return;
  }
  const last = [...((await ctx.control.read(job.id, "errors")) ?? "").matchAll(/Job state change \S+ -> (\S+)/g)].at(-1)?.[1];
  const logged = last === want || last === `${job.state}(PENDING)`;
  // No `status` yet: the interrupted move was the job's first written one, so it came from the
  // last state logged (an admission at creation) or else from the creation state ACCEPTED.
  const from = have || (last ? last.replace(/^(\S+)\(PENDING\)$/, "PENDING:$1") : "ACCEPTED");
  if (!logged) await ctx.control.logState(job.id, from, want, "State change completed after a JEM restart");
  await ctx.control.write(job.id, "status", want, 0o644);
  statusWritten(ctx, job.id, want);
  jobLog(ctx, job).info({ from, to: want }, "control files repaired after an interrupted state change");
}
