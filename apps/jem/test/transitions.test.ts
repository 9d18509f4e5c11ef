import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { Writable } from "node:stream";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { canMove, IllegalMoveError, parseStatusFile } from "@ce/model";
import type { Jem } from "../src/daemon.js";
import { logSubmitted } from "../src/states/submit.js";
import { finish } from "../src/states/finishing.js";
import { failToFinishing, logMove, repairControlFiles, transition } from "../src/states/transition.js";
import { letJemSee, shellJob, submitTestJob, testEnv, testJem, transitionsOf, waitForRest, type TestEnv } from "./helpers.js";

let env: TestEnv;
let jem: Jem;
const logged: Array<Record<string, unknown>> = [];

beforeAll(async () => {
  env = await testEnv();
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString().split("\n").filter(Boolean)) logged.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  jem = await testJem(env, { logger: pino({ level: "error" }, sink) });
});
afterAll(async () => {
  await jem?.stop();
  await env?.close();
});

/** What a refused move must not touch: the record and the control files that mirror it. */
async function snapshot(id: string) {
  return { record: await env.jobs.get(id), status: await env.control.read(id, "status"), errors: await env.control.read(id, "errors") };
}

describe("transition() and the table of allowed moves", () => {
  it("every move a real job made is in the table", async () => {
    const id = await submitTestJob(env, shellJob("true"));
    await waitForRest(env, id, "FINISHED");
    const moves = await transitionsOf(env, id);
    expect(moves.map((m) => m.to)).toEqual(["PREPARING", "SUBMIT", "INLRMS", "FINISHING", "FINISHED"]);
    for (const m of moves) {
      const from = parseStatusFile(m.from)!;
      const to = parseStatusFile(m.to)!;
      expect(canMove(from.state, to.state, to.pending), `${m.from} -> ${m.to}`).toBe(true);
    }
  });

  it.each([
    ["FINISHING", false],
    ["INLRMS", false], // only a restart leaves FINISHED for INLRMS, and then PENDING
    ["FINISHED", true],
  ] as const)("refuses FINISHED -> %s (pending %s), logs it, and leaves the job untouched", async (to, pending) => {
    const id = await submitTestJob(env, shellJob("true"));
    const job = await waitForRest(env, id, "FINISHED");
    const before = await snapshot(id);
    logged.length = 0;
    const err = await transition(jem.ctx, job!, to, { pending, reason: "test", change: { exitCode: 99 } }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(IllegalMoveError);
    expect(err).toMatchObject({ code: "ILLEGAL_STATE_MOVE", jobId: id, from: "FINISHED", to: pending ? `PENDING:${to}` : to });
    expect(await snapshot(id)).toEqual(before);
    expect(logged).toContainEqual(
      expect.objectContaining({ jobId: id, code: "ILLEGAL_STATE_MOVE", from: "FINISHED", to: pending ? `PENDING:${to}` : to }),
    );
  });

  it("refuses any move out of DELETED (WIPED)", async () => {
    const id = await submitTestJob(env, shellJob("true"));
    const finished = await waitForRest(env, id, "FINISHED");
    const wiped = await transition(jem.ctx, finished!, "DELETED", { reason: "test wipe" });
    expect(wiped?.rest).toBe("WIPED");
    const before = await snapshot(id);
    for (const to of ["ACCEPTED", "PREPARING", "FINISHED"] as const) {
      for (const pending of [false, true]) {
        await expect(transition(jem.ctx, wiped!, to, { pending, reason: "test" })).rejects.toMatchObject({
          code: "ILLEGAL_STATE_MOVE",
          from: "DELETED",
        });
      }
    }
    expect(await snapshot(id)).toEqual(before);
  });

  it("no JEM or ops code changes `state` or `pending` with a bare jobs.update (only transition.ts does)", async () => {
    const root = join(import.meta.dirname, "../../..");
    const files = [...(await sources(join(root, "apps/jem/src"))), ...(await sources(join(root, "packages/ops/src")))];
    let calls = 0;
    for (const f of files) {
      const text = await readFile(f, "utf8");
      for (const m of text.matchAll(/jobs\.update\(\s*[\w.!]+\s*,\s*(\{[^}]*\}|[\w.]+)/g)) {
        calls++;
        if (f.endsWith("states/transition.ts")) continue;
        expect(m[1], `${f}: ${m[0]}`).toMatch(/^\{/);
        expect(m[1], `${f}: ${m[0]}`).not.toMatch(/\b(state|pending)\b/);
      }
    }
    expect(calls).toBeGreaterThanOrEqual(3); // the scan itself must see the known call sites
  });
});

async function sources(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const e of await readdir(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) out.push(...(await sources(p)));
    else if (e.name.endsWith(".ts") && !e.name.endsWith(".test.ts")) out.push(p);
  }
  return out;
}

describe("repairControlFiles: a move whose control files were never written (a JEM killed after its CAS)", () => {
  it("with no status file yet, logs the move from the creation state ACCEPTED (or the last logged state) and writes status", async () => {
    // Not notified: no JEM looks at these jobs while the test moves them by hand.
    const plain = await submitTestJob(env, shellJob("true"), {}, { notify: false });
    const moved = await env.jobs.update((await env.jobs.get(plain))!, { state: "PREPARING" });
    expect(await env.control.read(plain, "status")).toBeUndefined(); // the gateway writes none
    await repairControlFiles(jem.ctx, moved!);
    expect(await transitionsOf(env, plain)).toEqual([{ from: "ACCEPTED", to: "PREPARING" }]);
    expect(await env.control.read(plain, "status")).toBe("PREPARING");

    // Admitted at creation: the errors file already holds ACCEPTED -> PREPARING; the lost move is the next one.
    const admitted = await submitTestJob(env, shellJob("true"), {}, { notify: false });
    await env.control.logState(admitted, "ACCEPTED", "PREPARING", "Starting job processing");
    const prep = await env.jobs.update((await env.jobs.get(admitted))!, { state: "PREPARING" });
    const sub = await env.jobs.update(prep!, { state: "SUBMIT" });
    await repairControlFiles(jem.ctx, sub!);
    expect(await transitionsOf(env, admitted)).toEqual([
      { from: "ACCEPTED", to: "PREPARING" },
      { from: "PREPARING", to: "SUBMIT" },
    ]);
    expect(await env.control.read(admitted, "status")).toBe("SUBMIT");
  });
});

describe("state change log lines", () => {
  const capture = (level: string) => {
    const lines: Array<Record<string, unknown>> = [];
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        for (const line of chunk.toString().split("\n").filter(Boolean)) lines.push(JSON.parse(line) as Record<string, unknown>);
        done();
      },
    });
    return { lines, log: pino({ level }, sink) };
  };
  const move = (jobId: string, to: string) => ({ jobId, requestId: "r1", from: "ACCEPTED", to, rest: to, reason: "test" });
  // The move log flushes a turn's moves in a setImmediate; one queued after it runs once they are out.
  const turn = () => new Promise((r) => setImmediate(r));

  it("a lone move is one info line with the job; a burst in one turn is one info line of job ids by move, each job at debug", async () => {
    const info = capture("info");
    logMove(info, move("a", "PREPARING"));
    await turn();
    expect(info.lines).toMatchObject([
      { level: 30, msg: "state change", jobId: "a", requestId: "r1", from: "ACCEPTED", to: "PREPARING", reason: "test" },
    ]);
    info.lines.length = 0;
    logMove(info, move("a", "PREPARING"));
    logMove(info, move("b", "PREPARING"));
    logMove(info, move("c", "FINISHING"));
    await turn();
    expect(info.lines).toEqual([
      expect.objectContaining({
        level: 30,
        msg: "state changes",
        count: 3,
        moves: { "ACCEPTED -> PREPARING": ["a", "b"], "ACCEPTED -> FINISHING": ["c"] },
      }),
    ]);
    const debug = capture("debug");
    logMove(debug, move("a", "PREPARING"));
    logMove(debug, move("b", "PREPARING"));
    await turn();
    expect(debug.lines.map((l) => [l.msg, l.jobId])).toEqual([
      ["state changes", undefined],
      ["state change", "a"],
      ["state change", "b"],
    ]);
  });

  it('a failure\'s lines carry its reason: the move into FINISHING and the final "Job failed" move', async () => {
    const info = capture("info");
    const ctx = { ...jem.ctx, log: info.log };
    // The job's lease is the test's: the running JEM leaves it alone.
    const id = await submitTestJob(env, shellJob("true"), {}, { notify: false });
    const job = (await env.jobs.get(id))!;
    const failing = await failToFinishing(ctx, job, "Walltime exceeded: the job ran 11 s, limit 10 s", { state: "INLRMS", cause: "user" });
    await turn();
    await finish(ctx, failing!, {});
    await turn();
    expect(info.lines.map((l) => [l.to, l.reason, l.failure, l.failedCause])).toEqual([
      ["FINISHING", "Job failure detected", "Walltime exceeded: the job ran 11 s, limit 10 s", "user"],
      ["FINISHED", "Job failed", "Walltime exceeded: the job ran 11 s, limit 10 s", "user"],
    ]);
    await letJemSee(env, id);
    // In a burst, the one info line groups the failed jobs by reason.
    info.lines.length = 0;
    logMove(info, { ...move("a", "FINISHING"), failure: "Node failure: n1" });
    logMove(info, { ...move("b", "FINISHING"), failure: "Node failure: n1" });
    logMove(info, move("c", "PREPARING"));
    await turn();
    expect(info.lines).toEqual([expect.objectContaining({ msg: "state changes", count: 3, failures: { "Node failure: n1": ["a", "b"] } })]);
  });

  it("submissions: alone one line with the job's local id; a burst in one turn one line of local ids by job", async () => {
    const info = capture("info");
    const sub = (jobId: string, localId: string) => ({ jobId, requestId: "r1", backend: "fork", localId, queue: "main", ms: 5 });
    logSubmitted(info, sub("a", "1:2"));
    await turn();
    expect(info.lines).toMatchObject([{ msg: "submitted to the batch system", jobId: "a", localId: "1:2", backend: "fork" }]);
    info.lines.length = 0;
    logSubmitted(info, sub("a", "1:2"));
    logSubmitted(info, { ...sub("b", "3:4"), resumed: true });
    await turn();
    expect(info.lines).toEqual([
      expect.objectContaining({
        msg: "submitted to the batch system",
        count: 2,
        backend: "fork",
        localIds: { a: "1:2", b: "3:4" },
        resumed: ["b"],
      }),
    ]);
  });
});
