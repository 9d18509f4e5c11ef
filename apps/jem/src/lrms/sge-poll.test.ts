import { chmodSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { createBackend, type Backend } from "./index.js";
import { makeConfig, silentLog, tempRoot } from "./testdata/harness.js";

// The shipped sge/poll script against a fake qstat and an accounting file: the cases a real cell
// (tests/arc/arc-gridengine.test.ts) does not reach within a test's time: error states, CPU and
// memory limits, a category with h:m:s limits, set-up failures, and qstat failing → all unknown.

let root: string;
let bin: string;
let backend: Backend;

/** One accounting(5) line: 45 ':'-separated fields, those poll reads set. */
function acct(id: number, failed: number, exit: number, wall: number, cpu: number, category: string, maxvmem = 5e6): string {
  const f = Array.from({ length: 45 }, () => "0");
  Object.assign(f, {
    0: "main",
    1: "localhost",
    2: "g",
    3: "u",
    4: "name",
    5: String(id),
    11: String(failed),
    12: String(exit),
    13: String(wall),
    36: `${cpu}.5`,
    39: category,
    42: String(maxvmem),
  });
  return f.slice(0, 39).join(":") + ":" + f[39] + ":" + f.slice(40).join(":");
}

beforeAll(() => {
  root = tempRoot("ce-sgepoll-");
  bin = join(root, "bin");
  mkdirSync(bin);
  writeFileSync(
    join(bin, "qstat"),
    `#!/bin/bash\nd=\${0%/*}\necho "$*" >> "$d/qstat.calls"\n[[ -f $d/qstat.err ]] && { cat "$d/qstat.err" >&2; exit 1; }\nif [[ $1 == -j ]]; then cat "$d/qstat.j"; else cat "$d/qstat.xml"; fi\n`,
  );
  chmodSync(join(bin, "qstat"), 0o755);
  process.env.JEM_SGE_ACCOUNTING = join(bin, "accounting");
  backend = createBackend(makeConfig(root, { backend: "sge", callsPerSecond: 1000, sge: { binPath: bin } }), silentLog);
});
afterAll(() => {
  delete process.env.JEM_SGE_ACCOUNTING;
});
beforeEach(() => {
  for (const f of ["qstat.err", "qstat.calls"]) rmSync(join(bin, f), { force: true });
});

const xml = (jobs: Array<[number, string]>) =>
  `<?xml version='1.0'?>\n<job_info>\n  <queue_info>\n${jobs.map(([id, st]) => `    <job_list state="x">\n      <JB_job_number>${id}</JB_job_number>\n      <JB_name>a</JB_name>\n      <state>${st}</state>\n    </job_list>\n`).join("")}  </queue_info>\n</job_info>\n`;

function jobsFor(ids: number[], marks: Record<number, { done?: string; cancelled?: boolean }> = {}) {
  return ids.map((id) => {
    const jobDir = join(root, "control", `j${id}`);
    mkdirSync(jobDir, { recursive: true });
    rmSync(join(jobDir, "lrms_done"), { force: true });
    rmSync(join(jobDir, "cancelled"), { force: true });
    if (marks[id]?.done !== undefined) writeFileSync(join(jobDir, "lrms_done"), marks[id]!.done!);
    if (marks[id]?.cancelled) writeFileSync(join(jobDir, "cancelled"), "");
    return { jobId: `j${id}`, localId: String(id), jobDir };
  });
}

describe("sge poll", () => {
  it("maps live states with one qstat for all jobs (an error state is HELD)", async () => {
    writeFileSync(
      join(bin, "qstat.xml"),
      xml([
        [1, "qw"],
        [2, "r"],
        [3, "hqw"],
        [4, "Eqw"],
        [5, "dr"],
        [6, "s"],
        [7, "t"],
      ]),
    );
    writeFileSync(join(bin, "accounting"), "");
    // qstat -j of the waiting jobs (issue 36): scheduling info where schedd_job_info is on, the error reason of an error state.
    writeFileSync(
      join(bin, "qstat.j"),
      [
        "==============================================================",
        "job_number:                 1",
        "owner:                      u",
        'scheduling info:            queue instance "all.q@n1" dropped because it is full',
        '                            cannot run in PE "mpi" because it only offers 0 slots',
        "==============================================================",
        "job_number:                 3",
        "scheduling info:            (Collecting of scheduler job information is turned off)",
        "==============================================================",
        "job_number:                 4",
        "error reason    1:          12/02/2026 10:00:00 [0:42]: error: can't chdir to /nowhere",
        "scheduling info:            (Collecting of scheduler job information is turned off)",
        "",
      ].join("\n"),
    );
    const m = await backend.poll(jobsFor([1, 2, 3, 4, 5, 6, 7]));
    const lrms = Object.fromEntries([...m].map(([k, v]) => [k, v.kind === "active" ? v.lrms : v.kind]));
    expect(lrms).toEqual({ j1: "QUEUING", j2: "RUNNING", j3: "HELD", j4: "HELD", j5: "EXITINGLRMS", j6: "HELD", j7: "RUNNING" });
    expect(m.get("j1")).toEqual({
      kind: "active",
      lrms: "QUEUING",
      reason: 'queue instance "all.q@n1" dropped because it is full; cannot run in PE "mpi" because it only offers 0 slots',
    });
    expect(m.get("j3")).toEqual({ kind: "active", lrms: "HELD", reason: "hqw" });
    expect(m.get("j4")).toEqual({
      kind: "active",
      lrms: "HELD",
      reason: "error state Eqw: 12/02/2026 10:00:00 [0:42]: error: can't chdir to /nowhere",
    });
    // One qstat for the states and one -j for every waiting job together: never one call per job.
    expect(readFileSync(join(bin, "qstat.calls"), "utf8").trim().split("\n")).toEqual(["-u * -xml", "-j 1,3,4"]);
  });

  it("words the accounting records of ended jobs", async () => {
    writeFileSync(join(bin, "qstat.xml"), xml([]));
    writeFileSync(
      join(bin, "accounting"),
      [
        "# Version: 8.1.9",
        acct(11, 0, 3, 1, 0, "NONE"),
        acct(12, 37, 137, 61, 0, "-l h_rt=00:01:00,h_vmem=100M"), // h:m:s holds ':' in the category
        acct(13, 37, 137, 30, 20, "-l h_cpu=20,h_rt=600"),
        acct(14, 37, 137, 3, 0, "-l h_vmem=50M"),
        acct(15, 37, 137, 3, 0, "-q main"),
        acct(16, 100, 137, 7, 0, "NONE"),
        acct(17, 100, 137, 7, 0, "NONE"),
        acct(18, 27, 0, 0, 0, "NONE"),
        acct(19, 0, 1, 0, 0, "NONE"),
        acct(19, 0, 0, 9, 0, "NONE"), // a later run of the same job wins
      ].join("\n") + "\n",
    );
    const m = await backend.poll(jobsFor([11, 12, 13, 14, 15, 16, 17, 18, 19, 20], { 11: { done: "3 \n" }, 17: { cancelled: true } }));
    expect(Object.fromEntries(m)).toEqual({
      j11: { kind: "done", exitCode: 3, message: "" },
      j12: {
        kind: "done",
        exitCode: 265,
        message: "Walltime exceeded: the batch system ended the job at its time limit (Grid Engine h_rt=60s)",
      },
      j13: {
        kind: "done",
        exitCode: 265,
        message: "CPU time exceeded: the batch system ended the job at its CPU time limit (Grid Engine h_cpu=20s)",
      },
      j14: { kind: "done", exitCode: 265, message: "Memory exceeded: the job used more memory than it asked for (Grid Engine h_vmem)" },
      j15: {
        kind: "done",
        exitCode: 265,
        message: "Limit exceeded: the batch system ended the job at a queue limit (Grid Engine h_rt, h_cpu or h_vmem)",
      },
      j16: {
        kind: "done",
        exitCode: 265,
        message: "Cancelled in the batch system by an administrator or killed from outside the job (Grid Engine: died by signal 9)",
      },
      j17: { kind: "done", exitCode: 265, message: "Job was cancelled" },
      j18: { kind: "done", exitCode: -1, message: "Job failed in Grid Engine before or while starting (Grid Engine failed code 27)" },
      j19: { kind: "done", exitCode: 0, message: "" },
      j20: { kind: "unknown", reason: "Job missing from Grid Engine (not in qstat nor yet in its accounting file)" },
    });
  });

  it("qstat failure → every job unknown (never finished)", async () => {
    writeFileSync(join(bin, "qstat.err"), "error: commlib error: can't connect to service (Connection refused)\n");
    const m = await backend.poll(jobsFor([21, 22], { 22: { done: "0 \n" } }));
    expect([...m.values()]).toEqual([
      { kind: "unknown", reason: expect.stringMatching(/^POLL_FAILED: .*Connection refused/) },
      { kind: "unknown", reason: expect.stringMatching(/^POLL_FAILED/) },
    ]);
  });
});
