import { chmodSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, beforeEach, describe, expect, it } from "vitest";
import { createBackend, type Backend, type PollState } from "./index.js";
import { makeConfig, silentLog, tempRoot } from "./testdata/harness.js";

// The shipped slurm/poll script against fake squeue/scontrol/sacct whose outputs are fixtures:
// state mapping, exit-code rules, the one-squeue-call guarantee, and failure → unknown.

let root: string;
let bin: string;
let backend: Backend;

function fake(name: string, body: string) {
  writeFileSync(join(bin, name), `#!/bin/bash\nd=\${0%/*}\necho "$*" >> "$d/${name}.calls"\n${body}\n`);
  chmodSync(join(bin, name), 0o755);
}

beforeAll(() => {
  root = tempRoot("ce-spoll-");
  bin = join(root, "bin");
  mkdirSync(bin);
  // Records where its stderr points and that place's directory mode (the temp-file check below).
  fake(
    "squeue",
    'e=$(readlink /proc/$$/fd/2); echo "$e $(stat -c %a "${e%/*}")" > "$d/squeue.stderr"\n[[ -f $d/squeue.err ]] && { cat "$d/squeue.err" >&2; exit 1; }\ncat "$d/squeue.out"',
  );
  // scontrol -o show job ID → a line with ExitCode from scontrol.tab ("id a:b"), else error
  fake(
    "scontrol",
    'code=$(awk -v id="$4" \'$1 == id { print $2 }\' "$d/scontrol.tab")\n[[ -n $code ]] || { echo "slurm_load_jobs error: Invalid job id specified" >&2; exit 1; }\necho "JobId=$4 JobName=x UserId=root(0) JobState=X Reason=None Dependency=(null) ExitCode=$code DerivedExitCode=0:0"',
  );
  // sacct.err: every call fails; jobcomp.err: only `sacct -c` (no completion log); sacct.dbd.out: what accounting storage answers.
  fake(
    "sacct",
    '[[ -f $d/sacct.err || ( $1 == -c && -f $d/jobcomp.err ) ]] && { echo "sacct: error" >&2; exit 1; }\n[[ $1 != -c && -f $d/sacct.dbd.out ]] && { cat "$d/sacct.dbd.out"; exit; }\ncat "$d/sacct.out"',
  );
  backend = createBackend(
    makeConfig(root, { backend: "slurm", callsPerSecond: 1000, slurm: { binPath: bin, extraDirectives: [] } }),
    silentLog,
  );
});

beforeEach(() => {
  for (const f of ["squeue.err", "sacct.err", "jobcomp.err", "sacct.dbd.out", "squeue.calls", "scontrol.calls", "sacct.calls"])
    rmSync(join(bin, f), { force: true });
});

function fixtures(squeue: string, scontrol: string, sacct: string) {
  writeFileSync(join(bin, "squeue.out"), squeue);
  writeFileSync(join(bin, "scontrol.tab"), scontrol);
  writeFileSync(join(bin, "sacct.out"), sacct);
}

function jobsFor(ids: number[], doneFiles: Record<number, string> = {}) {
  return ids.map((id) => {
    const jobDir = join(root, "control", `j${id}`);
    mkdirSync(jobDir, { recursive: true });
    rmSync(join(jobDir, "lrms_done"), { force: true });
    rmSync(join(jobDir, "cancelled"), { force: true });
    if (doneFiles[id] !== undefined) writeFileSync(join(jobDir, "lrms_done"), doneFiles[id]!);
    return { jobId: `j${id}`, localId: String(id), jobDir };
  });
}

const calls = (name: string) => {
  try {
    return readFileSync(join(bin, `${name}.calls`), "utf8")
      .trim()
      .split("\n");
  } catch {
    return [];
  }
};

describe("slurm poll", () => {
  it("maps squeue states and exit codes in one squeue call", async () => {
    fixtures(
      [
        "101;PENDING;Priority",
        "102;PENDING;JobHeldAdmin",
        "103;PENDING;JobHeldUser",
        "104;RUNNING;None",
        "105;SUSPENDED;None",
        "106;COMPLETING;None",
        "107;CONFIGURING;None",
        "108;COMPLETED;None",
        "109;FAILED;NonZeroExitCode",
        "110;CANCELLED;None",
        "111;TIMEOUT;TimeLimit",
        "112;NODE_FAIL;None",
        "113;OUT_OF_MEMORY;OutOfMemory",
        "114;REQUEUE_HOLD;JobHeldAdmin",
        "115;FAILED;JobLaunchFailure",
        "116;CANCELLED;None",
        "garbage line",
      ].join("\n"),
      "108 0:0\n109 3:0\n110 0:15\n111 0:15\n112 0:0\n113 0:9\n115 0:9\n116 0:15\n",
      "",
    );
    const jobs = jobsFor([101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111, 112, 113, 114, 115, 116], { 108: "0 \n", 109: "3 \n" });
    // 110 was cancelled by the CE (cancel leaves its mark), 116 by someone else.
    writeFileSync(join(jobs[9]!.jobDir, "cancelled"), "");
    const m = await backend.poll(jobs);
    const want: Record<string, PollState> = {
      // The batch system's reason for a waiting job, as squeue's %r states it (issue 36).
      j101: { kind: "active", lrms: "QUEUING", reason: "Priority" },
      j102: { kind: "active", lrms: "HELD", reason: "JobHeldAdmin" },
      j103: { kind: "active", lrms: "HELD", reason: "JobHeldUser" },
      j104: { kind: "active", lrms: "RUNNING" },
      j105: { kind: "active", lrms: "HELD", reason: "suspended" },
      j106: { kind: "active", lrms: "EXITINGLRMS" },
      j107: { kind: "active", lrms: "QUEUING", reason: "configuring" },
      j108: { kind: "done", exitCode: 0, message: "" },
      j109: { kind: "done", exitCode: 3, message: "" },
      j110: { kind: "done", exitCode: 271, message: "Job was cancelled" },
      j111: { kind: "done", exitCode: 271, message: "Walltime exceeded: the batch system ended the job at its time limit (Slurm TIMEOUT)" },
      j112: { kind: "done", exitCode: -1, message: "Node failure: the node running the job failed (Slurm NODE_FAIL)" },
      j113: { kind: "done", exitCode: 265, message: "Memory exceeded: the job used more memory than it asked for (Slurm OUT_OF_MEMORY)" },
      j114: { kind: "active", lrms: "OTHER", reason: "REQUEUE_HOLD" },
      j115: { kind: "done", exitCode: 265, message: "Job failed" },
      j116: { kind: "done", exitCode: 271, message: "Cancelled in the batch system by an administrator (Slurm CANCELLED)" },
    };
    expect(Object.fromEntries(m)).toEqual(want);
    expect(calls("squeue")).toEqual([`-h -o %i;%T;%r -t all -j ${jobs.map((j) => j.localId).join(",")}`]);
    expect(calls("sacct")).toEqual([]);
  });

  it("jobs squeue forgot: sacct -c (TIMEOUT 0:0 is never success), then lrms_done, else unknown", async () => {
    fixtures("201;RUNNING;None\n", "", "202|COMPLETED|0:0\n203|CANCELLED by 0|0:0\n204|TIMEOUT|0:0\n205|FAILED|2:0\n205|COMPLETED|0:0\n");
    const jobs = jobsFor([201, 202, 203, 204, 205, 206, 207], { 206: "5 Job failed in RTE\n" });
    const m = await backend.poll(jobs);
    expect(Object.fromEntries(m)).toEqual({
      j201: { kind: "active", lrms: "RUNNING" },
      j202: { kind: "done", exitCode: 0, message: "" },
      j203: { kind: "done", exitCode: 271, message: "Cancelled in the batch system by an administrator (Slurm CANCELLED)" },
      j204: { kind: "done", exitCode: 271, message: "Walltime exceeded: the batch system ended the job at its time limit (Slurm TIMEOUT)" },
      j205: { kind: "done", exitCode: 0, message: "" },
      j206: { kind: "done", exitCode: 5, message: "Job failed in RTE" },
      j207: { kind: "unknown", reason: "Job missing from SLURM" },
    });
    expect(calls("sacct")).toEqual([
      "-c -n -P -j 202,203,204,205,206,207 -o JobID,State,ExitCode",
      "-X -D -n -P -j 206,207 -o JobID,State,ExitCode",
    ]);
  });

  it("jobs squeue forgot on a site with slurmdbd and no completion log: sacct -X, ended runs only", async () => {
    fixtures("", "", "");
    writeFileSync(join(bin, "jobcomp.err"), "x");
    // 602's row lags (slurmdbd has not seen it end); 603 was requeued and its last run ended.
    writeFileSync(
      join(bin, "sacct.dbd.out"),
      "601|OUT_OF_MEMORY|0:125\n602|RUNNING|0:0\n603|NODE_FAIL|0:0\n603|COMPLETED|0:0\n999|COMPLETED|0:0\n",
    );
    const m = await backend.poll(jobsFor([601, 602, 603, 604]));
    expect(Object.fromEntries(m)).toEqual({
      j601: { kind: "done", exitCode: 381, message: "Memory exceeded: the job used more memory than it asked for (Slurm OUT_OF_MEMORY)" },
      j602: { kind: "unknown", reason: "Job missing from SLURM" },
      j603: { kind: "done", exitCode: 0, message: "" },
      j604: { kind: "unknown", reason: "Job missing from SLURM" },
    });
    expect(calls("sacct")).toEqual([
      "-c -n -P -j 601,602,603,604 -o JobID,State,ExitCode",
      "-X -D -n -P -j 601,602,603,604 -o JobID,State,ExitCode",
    ]);
  });

  it("a single purged id (squeue 'Invalid job id') is an answer, not a failure", async () => {
    fixtures("", "", "301|COMPLETED|0:0\n");
    writeFileSync(join(bin, "squeue.err"), "slurm_load_jobs error: Invalid job id specified\n");
    const m = await backend.poll(jobsFor([301]));
    expect(m.get("j301")).toEqual({ kind: "done", exitCode: 0, message: "" });
  });

  it("squeue failure → every job unknown (never finished)", async () => {
    fixtures("", "", "401|COMPLETED|0:0\n");
    writeFileSync(join(bin, "squeue.err"), "squeue: error: Unable to contact slurm controller (connect failure)\n");
    const m = await backend.poll(jobsFor([401, 402], { 402: "0 \n" }));
    expect([...m.values()]).toEqual([
      { kind: "unknown", reason: expect.stringMatching(/^POLL_FAILED: .*Unable to contact/) },
      { kind: "unknown", reason: expect.stringMatching(/^POLL_FAILED/) },
    ]);
  });

  it("sacct failure → forgotten jobs unknown unless the wrapper left lrms_done", async () => {
    fixtures("", "", "");
    writeFileSync(join(bin, "sacct.err"), "x");
    const m = await backend.poll(jobsFor([501, 502], { 502: "0 \n" }));
    expect(m.get("j501")).toEqual({ kind: "unknown", reason: "sacct failed" });
    expect(m.get("j502")).toEqual({ kind: "done", exitCode: 0, message: "" });
  });

  it("chunks very long id lists, invalid local ids are unknown", async () => {
    fixtures("", "", "");
    process.env.JEM_SLURM_POLL_CHUNK = "2";
    try {
      const jobs = [...jobsFor([601, 602, 603]), { jobId: "jx", localId: "abc", jobDir: root }];
      const m = await backend.poll(jobs);
      expect(calls("squeue")).toHaveLength(2);
      expect(m.get("jx")).toEqual({ kind: "unknown", reason: "invalid slurm job id" });
    } finally {
      delete process.env.JEM_SLURM_POLL_CHUNK;
    }
  });

  it("squeue's stderr goes to a private directory, never a fixed name in the shared temp dir, and nothing is left", async () => {
    const shared = join(root, "shared-tmp");
    mkdirSync(shared, { mode: 0o1777 });
    chmodSync(shared, 0o1777);
    fixtures("701;RUNNING;None\n", "", "");
    process.env.TMPDIR = shared;
    try {
      const m = await backend.poll(jobsFor([701]));
      expect(m.get("j701")).toEqual({ kind: "active", lrms: "RUNNING" });
    } finally {
      delete process.env.TMPDIR;
    }
    const [path, mode] = readFileSync(join(bin, "squeue.stderr"), "utf8").trim().split(" ");
    expect(path).toMatch(new RegExp(`^${shared}/jem-poll\\.[A-Za-z0-9]{10}/squeue\\.err$`));
    expect(mode).toBe("700");
    expect(readdirSync(shared)).toEqual([]);
  });
});
