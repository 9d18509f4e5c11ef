/**
 * Job states: the internal states of the job execution manager (JEM), the 17 REST states of the
 * interface, and the one mapping between them (docs/interface.md "States and transitions").
 */

/** Internal states as written to the control-directory `status` file (note `SUBMIT`, `CANCELING`). */
export const INTERNAL_STATES = ["ACCEPTED", "PREPARING", "SUBMIT", "INLRMS", "FINISHING", "FINISHED", "CANCELING", "DELETED"] as const;
export type InternalState = (typeof INTERNAL_STATES)[number];

/** The 17 REST states, in lifecycle order. */
export const REST_STATES = [
  "ACCEPTING",
  "ACCEPTED",
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
  "FINISHED",
  "FAILED",
  "KILLING",
  "KILLED",
  "WIPED",
] as const;
export type RestState = (typeof REST_STATES)[number];

/** Fine-grained state of a job inside the batch system, from the live batch-system poll. */
export const LRMS_STATES = ["QUEUING", "RUNNING", "HELD", "EXITINGLRMS", "OTHER"] as const;
export type LrmsState = (typeof LRMS_STATES)[number];

export const FINAL_REST_STATES: ReadonlySet<RestState> = new Set(["FINISHED", "FAILED", "KILLED", "WIPED"]);
/** Internal states in which the job is no longer active (nothing runs or stages for it). */
export const FINAL_INTERNAL_STATES: ReadonlySet<InternalState> = new Set(["FINISHED", "DELETED"]);

/** How a finished job ended; only meaningful in FINISHED/DELETED. */
export type Outcome = "success" | "failed" | "killed";

export interface StateView {
  state: InternalState;
  pending: boolean;
  /** Only used when `state` is FINISHED. */
  outcome?: Outcome | undefined;
  /** Only used when `state` is INLRMS and not pending. Unknown → RUNNING is wrong, so it is OTHER. */
  lrms?: LrmsState | undefined;
}

export function isInternalState(s: string): s is InternalState {
  return (INTERNAL_STATES as readonly string[]).includes(s);
}

export function isRestState(s: string): s is RestState {
  return (REST_STATES as readonly string[]).includes(s);
}

/** The single internal → REST mapping. */
export function toRestState(v: StateView): RestState {
  switch (v.state) {
    case "ACCEPTED":
      return v.pending ? "ACCEPTED" : "ACCEPTING";
    case "PREPARING":
      return v.pending ? "PREPARED" : "PREPARING";
    case "SUBMIT":
      return "SUBMITTING";
    case "INLRMS":
      // Before the first poll has seen the job it is queued from the batch system's point of view.
      return v.pending ? "EXECUTED" : (v.lrms ?? "QUEUING");
    case "FINISHING":
      return "FINISHING";
    case "CANCELING":
      return "KILLING";
    case "FINISHED":
      if (v.pending) return "EXECUTED";
      return v.outcome === "killed" ? "KILLED" : v.outcome === "failed" ? "FAILED" : "FINISHED";
    case "DELETED":
      return "WIPED";
  }
}

/** The `status` control file content: `STATE` or `PENDING:STATE`. */
export function formatStatusFile(state: InternalState, pending: boolean): string {
  return pending ? `PENDING:${state}` : state;
}

export function parseStatusFile(text: string): { state: InternalState; pending: boolean } | undefined {
  const line = text.split("\n", 1)[0]?.trim() ?? "";
  const pending = line.startsWith("PENDING:");
  const state = pending ? line.slice("PENDING:".length) : line;
  return isInternalState(state) ? { state, pending } : undefined;
}

/** GLUE2 `State` values of a job, in the order A-REX publishes them (nordugrid, bes, arcrest, emies). */
export function glueStates(v: StateView, rest: RestState = toRestState(v)): string[] {
  const ng = nordugridState(v);
  return [`nordugrid:${ng}`, `bes:${besState(rest)}`, `arcrest:${rest}`, `emies:${emiesState(v, rest)}`];
}

function nordugridState(v: StateView): string {
  if (v.state === "FINISHED" && v.outcome === "failed") return "FAILED";
  if (v.state === "FINISHED" && v.outcome === "killed") return "KILLED";
  if (v.state === "INLRMS" && !v.pending) {
    const letter = { QUEUING: "Q", RUNNING: "R", HELD: "S", EXITINGLRMS: "EXECUTED", OTHER: "O" } as const;
    return `INLRMS:${letter[v.lrms ?? "QUEUING"]}`;
  }
  return v.pending ? `PENDING:${v.state}` : v.state;
}

function besState(rest: RestState): string {
  switch (rest) {
    case "ACCEPTING":
    case "ACCEPTED":
    case "PREPARING":
    case "PREPARED":
    case "SUBMITTING":
    case "QUEUING":
      return "Pending";
    case "FINISHED":
      return "Finished";
    case "FAILED":
    case "WIPED":
      return "Failed";
    case "KILLED":
      return "Cancelled";
    default:
      return "Running";
  }
}

function emiesState(v: StateView, rest: RestState): string {
  switch (rest) {
    case "ACCEPTING":
    case "ACCEPTED":
      return "accepted";
    case "PREPARING":
    case "PREPARED":
      return "preprocessing";
    case "SUBMITTING":
      return "processing-accepting";
    case "QUEUING":
      return "processing-queued";
    case "FINISHING":
      return "postprocessing";
    case "FINISHED":
    case "FAILED":
    case "KILLED":
    case "WIPED":
      return "terminal";
    default:
      return v.state === "CANCELING" ? "processing" : "processing-running";
  }
}
