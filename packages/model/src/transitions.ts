/**
 * The allowed moves between internal job states: the one table the JEM's `transition()` checks
 * before it changes a record (as A-REX moves jobs; docs/architecture.md, "Job flow"). Targets are written
 * as in the `status` file: PENDING is a flag on the target, so `PENDING:X` in row X means "the
 * job may be parked where it is", and a restart may only enter its state PENDING. Where the job
 * came from being PENDING or not does not matter. Removing a record (clean, expiry of a WIPED
 * record) is not a move and is not listed.
 */
import { Failure } from "./failure.js";
import type { JobDescription } from "./description/types.js";
import type { InternalState, RestState } from "./states.js";

/** A move's target as the `status` file spells it: `STATE` or `PENDING:STATE`. */
export type MoveTarget = InternalState | `PENDING:${InternalState}`;

export const ALLOWED_MOVES: Readonly<Record<InternalState, readonly MoveTarget[]>> = {
  // Parked by the per-DN limit; starts processing; or fails (bad description, dry run, kill) into
  // FINISHING, which builds the failure output list.
  ACCEPTED: ["PENDING:ACCEPTED", "PREPARING", "FINISHING"],
  // Parked for the client's stage-in confirmation or the running-jobs limit; on to the batch
  // system; or FINISHING directly (data-only job, stage-in failure, kill).
  PREPARING: ["PENDING:PREPARING", "SUBMIT", "FINISHING"],
  // Submitted (batch id known) or submission failed. A kill waits until INLRMS (Job flow: Kill).
  SUBMIT: ["INLRMS", "FINISHING"],
  // Parked by the staging limit (EXECUTED); a kill with a batch id cancels (CANCELING), without
  // one fails straight to FINISHING; `lrms_done` → FINISHING.
  INLRMS: ["PENDING:INLRMS", "CANCELING", "FINISHING"],
  // The batch job ended (or the cancel gave up): outputs are handled in FINISHING.
  CANCELING: ["FINISHING"],
  // Stage-out done or failed: a failure in FINISHING still ends in FINISHED.
  FINISHING: ["FINISHED"],
  // Expiry wipes the session dir (DELETED = REST WIPED); restart re-enters the failed state's
  // entry point, always PENDING: PREPARING → ACCEPTED, SUBMIT/INLRMS → ACCEPTED or PREPARING,
  // FINISHING → INLRMS (docs/architecture.md, Job flow: Restart).
  FINISHED: ["DELETED", "PENDING:ACCEPTED", "PENDING:PREPARING", "PENDING:INLRMS"],
  // Terminal: the record is only ever removed.
  DELETED: [],
};

/**
 * The states a record is created in: ACCEPTED (the JEM admits it), or PREPARING — the move
 * ACCEPTED -> PREPARING above, made by the atomic create script (@ce/store create.lua) under the
 * same per-owner limit the JEM applies, for a job whose admission would only start a wait for
 * client uploads (`waitsOnlyForUploads`). Such a job costs the JEM nothing until an upload
 * completes or its upload deadline passes.
 */
export const CREATION_STATES: readonly InternalState[] = ["ACCEPTED", "PREPARING"];

/** The `errors` reason of the admission move (A-REX wording), whoever makes it. */
export const ADMISSION_REASON = "Starting job processing";

/**
 * REST states of an active job (PREPARING…FINISHING incl. pending ones): what counts against
 * `jobs.maxActivePerOwner`, for the JEM's admission and for admission at creation alike.
 */
export const ACTIVE_REST_STATES: readonly RestState[] = [
  "PREPARING",
  "PREPARED",
  "SUBMITTING",
  "QUEUING",
  "RUNNING",
  "HELD",
  "EXITINGLRMS",
  "OTHER",
  "EXECUTED",
  "FINISHING",
  "KILLING",
];

/**
 * True when admitting the job would do nothing but start waiting for client uploads, so it may be
 * created in PREPARING: no dry run and no start time ahead (the JEM's ACCEPTED handler acts on
 * those), no remote input and no free stage-in (PREPARING would start a download or park), and at
 * least one file the client uploads (else PREPARING would move straight on to the batch system).
 */
export function waitsOnlyForUploads(d: Pick<JobDescription, "dryRun" | "startTime" | "freeStageIn" | "inputFiles">, now: number): boolean {
  if (d.dryRun || d.freeStageIn || d.inputFiles.length === 0) return false;
  if (d.startTime !== undefined && !(d.startTime.getTime() <= now)) return false;
  return d.inputFiles.every((f) => !f.source);
}

/** The target word of a move, as `formatStatusFile` writes it. */
export const moveTarget = (to: InternalState, pending = false): MoveTarget => (pending ? `PENDING:${to}` : to);

/** True when the JEM may move a job in `from` to `to` (PENDING when `pending`). */
export function canMove(from: InternalState, to: InternalState, pending = false): boolean {
  return ALLOWED_MOVES[from]?.includes(moveTarget(to, pending)) ?? false;
}

/** A state change that the table above does not allow; the record is left as it was. */
export class IllegalMoveError extends Failure<"ILLEGAL_STATE_MOVE"> {
  readonly jobId: string;
  readonly from: InternalState;
  readonly to: MoveTarget;

  constructor(jobId: string, from: InternalState, to: InternalState, pending = false) {
    const target = moveTarget(to, pending);
    const allowed = ALLOWED_MOVES[from]?.join(", ") || "none";
    super("ILLEGAL_STATE_MOVE", `job ${jobId}: state move ${from} -> ${target} is not allowed (from ${from}: ${allowed})`);
    this.jobId = jobId;
    this.from = from;
    this.to = target;
  }
}
