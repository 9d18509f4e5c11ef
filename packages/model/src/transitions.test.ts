import { describe, expect, it } from "vitest";
import { INTERNAL_STATES, type InternalState } from "./states.js";
import { emptyDescription, type JobDescription } from "./description/types.js";
import { ALLOWED_MOVES, canMove, CREATION_STATES, IllegalMoveError, type MoveTarget, admittedAtCreation } from "./transitions.js";

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

  it("only a job whose admission would do nothing else may be created in PREPARING: due at once, or at its upload deadline", () => {
    const out = { name: "out.dat", target: "https://x/out", options: {}, useIfSuccess: true, useIfFailure: false, useIfCancel: false };
    expect(admittedAtCreation(d({}), now)).toBe("now"); // nothing to stage in: straight on to the batch system
    expect(admittedAtCreation(d({ executable: undefined }), now)).toBe("now"); // data-only: straight on to FINISHING
    expect(admittedAtCreation(d({ outputFiles: [out] }), now)).toBe("now"); // outputs are staged out later
    expect(admittedAtCreation(d({ startTime: new Date(now - 1) }), now)).toBe("now");
    expect(admittedAtCreation(d({ inputFiles: [upload, { ...upload, name: "b" }] }), now)).toBe("uploads");
    expect(admittedAtCreation(d({ inputFiles: [upload], startTime: new Date(now - 1), outputFiles: [out] }), now)).toBe("uploads");
    expect(admittedAtCreation(d({ inputFiles: [upload, { ...upload, source: "https://x/a" }] }), now)).toBeUndefined(); // a download
    expect(admittedAtCreation(d({ inputFiles: [{ ...upload, source: "https://x/a" }] }), now)).toBeUndefined();
    for (const inputFiles of [[], [upload]]) {
      expect(admittedAtCreation(d({ inputFiles, freeStageIn: true }), now)).toBeUndefined(); // parks
      expect(admittedAtCreation(d({ inputFiles, dryRun: true }), now)).toBeUndefined();
      expect(admittedAtCreation(d({ inputFiles, startTime: new Date(now + 60_000) }), now)).toBeUndefined();
      expect(admittedAtCreation(d({ inputFiles, startTime: new Date(Number.NaN) }), now)).toBeUndefined();
    }
  });
});
