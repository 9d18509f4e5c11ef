import { describe, expect, it } from "vitest";
import { INTERNAL_STATES, type InternalState } from "./states.js";
import { emptyDescription, type JobDescription } from "./description/types.js";
import { ALLOWED_MOVES, canMove, CREATION_STATES, IllegalMoveError, type MoveTarget, waitsOnlyForUploads } from "./transitions.js";

/** Every move the JEM makes (apps/jem/src/states/*, commands.ts restart, expiry.ts), read from the code. */
const JEM_MOVES: [InternalState, MoveTarget, string][] = [
  ["ACCEPTED", "PENDING:ACCEPTED", "per-DN limit"],
  ["ACCEPTED", "PREPARING", "Starting job processing"],
  ["ACCEPTED", "FINISHING", "kill, dry run, unreadable description"],
  ["PREPARING", "PENDING:PREPARING", "free stage-in, running-jobs limit"],
  ["PREPARING", "SUBMIT", "Pre-staging finished"],
  ["PREPARING", "FINISHING", "no executable, stage-in failure, kill"],
  ["SUBMIT", "INLRMS", "submitted"],
  ["SUBMIT", "FINISHING", "submission failed"],
  ["INLRMS", "PENDING:INLRMS", "staging limit (EXECUTED), kill while parked"],
  ["INLRMS", "CANCELING", "kill with a batch id"],
  ["INLRMS", "FINISHING", "lrms_done, kill without a batch id"],
  ["CANCELING", "FINISHING", "batch job ended or cancel gave up"],
  ["FINISHING", "FINISHED", "stage-out done or failed"],
  ["FINISHED", "DELETED", "expiry (WIPED)"],
  ["FINISHED", "PENDING:ACCEPTED", "restart from PREPARING (or SUBMIT/INLRMS with downloads missing)"],
  ["FINISHED", "PENDING:PREPARING", "restart from SUBMIT/INLRMS"],
  ["FINISHED", "PENDING:INLRMS", "restart from FINISHING"],
];

describe("allowed state moves", () => {
  it("has one row per internal state", () => {
    expect(Object.keys(ALLOWED_MOVES).sort()).toEqual([...INTERNAL_STATES].sort());
  });

  const split = (t: MoveTarget): [InternalState, boolean] =>
    t.startsWith("PENDING:") ? [t.slice(8) as InternalState, true] : [t as InternalState, false];

  it.each(JEM_MOVES)("allows %s -> %s (%s)", (from, target) => {
    expect(canMove(from, ...split(target))).toBe(true);
  });

  it("allows nothing the JEM does not do, PENDING or not", () => {
    const made = new Set(JEM_MOVES.map(([f, t]) => `${f}->${t}`));
    for (const from of INTERNAL_STATES)
      for (const to of INTERNAL_STATES)
        for (const pending of [false, true]) {
          const target = pending ? `PENDING:${to}` : to;
          expect(canMove(from, to, pending), `${from}->${target}`).toBe(made.has(`${from}->${target}`));
        }
  });

  it.each([
    ["FINISHED", "INLRMS", false], // only a restart, and a restart always enters PENDING
    ["FINISHED", "PREPARING", false],
    ["FINISHED", "FINISHING", false],
    ["FINISHED", "FINISHED", true],
    ["SUBMIT", "CANCELING", false], // a kill in SUBMIT waits for INLRMS
    ["ACCEPTED", "INLRMS", false],
    ["ACCEPTED", "ACCEPTED", false], // a self-move only parks the job
    ["CANCELING", "INLRMS", false],
    ["FINISHING", "ACCEPTED", true],
    ["INLRMS", "SUBMIT", false],
  ] as const)("refuses impossible move %s -> %s (pending %s)", (from, to, pending) => {
    expect(canMove(from, to, pending)).toBe(false);
  });

  it("refuses every move out of DELETED (WIPED) and from/to unknown states", () => {
    for (const to of INTERNAL_STATES) for (const p of [false, true]) expect(canMove("DELETED", to, p)).toBe(false);
    expect(canMove("UNDEFINED" as InternalState, "ACCEPTED")).toBe(false);
    expect(canMove("ACCEPTED", "WIPED" as InternalState)).toBe(false);
  });

  it("names the job, both states and what is allowed in its error", () => {
    const e = new IllegalMoveError("abc", "FINISHING", "ACCEPTED");
    expect(e).toBeInstanceOf(Error);
    expect(e.code).toBe("ILLEGAL_STATE_MOVE");
    expect([e.jobId, e.from, e.to]).toEqual(["abc", "FINISHING", "ACCEPTED"]);
    expect(e.message).toBe("job abc: state move FINISHING -> ACCEPTED is not allowed (from FINISHING: FINISHED)");
    const parked = new IllegalMoveError("x", "DELETED", "FINISHED", true);
    expect(parked.to).toBe("PENDING:FINISHED");
    expect(parked.message).toBe("job x: state move DELETED -> PENDING:FINISHED is not allowed (from DELETED: none)");
  });
});

describe("creation states", () => {
  const upload = { name: "in.dat", executable: false, options: {} };
  const d = (x: Partial<JobDescription>): JobDescription => ({ ...emptyDescription("nordugrid:xrsl"), executable: "/bin/true", ...x });
  const now = Date.now();

  it("a record is created ACCEPTED, or PREPARING: the admission move of the table, made at creation", () => {
    expect(CREATION_STATES).toEqual(["ACCEPTED", "PREPARING"]);
    for (const s of CREATION_STATES.slice(1)) expect(canMove("ACCEPTED", s)).toBe(true);
  });

  it("only a job whose admission just starts waiting for client uploads may be created in PREPARING", () => {
    expect(waitsOnlyForUploads(d({ inputFiles: [upload, { ...upload, name: "b" }] }), now)).toBe(true);
    expect(waitsOnlyForUploads(d({ inputFiles: [upload], startTime: new Date(now - 1) }), now)).toBe(true);
    expect(waitsOnlyForUploads(d({}), now)).toBe(false); // straight on to the batch system
    expect(waitsOnlyForUploads(d({ inputFiles: [upload, { ...upload, source: "https://x/a" }] }), now)).toBe(false); // a download
    expect(waitsOnlyForUploads(d({ inputFiles: [upload], freeStageIn: true }), now)).toBe(false); // parks
    expect(waitsOnlyForUploads(d({ inputFiles: [upload], dryRun: true }), now)).toBe(false);
    expect(waitsOnlyForUploads(d({ inputFiles: [upload], startTime: new Date(now + 60_000) }), now)).toBe(false);
    expect(waitsOnlyForUploads(d({ inputFiles: [upload], startTime: new Date(Number.NaN) }), now)).toBe(false);
  });
});
