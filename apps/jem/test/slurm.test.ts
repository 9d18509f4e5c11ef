import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, readFileSync, rmSync, writeFileSync, chmodSync } from "node:fs";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort } from "@ce/testing";
import { createBackend, type Backend, type PollState } from "../src/lrms/index.js";
import { makeConfig, makeJob, parseDiag, readIf, silentLog, tempRoot, waitFor } from "../src/lrms/testdata/harness.js";

// REAL Slurm (22.05, single node, started by scripts/slurm/start-slurm.sh): submit, poll, cancel,
// hold, time limit, bulk poll. Skipped only when sbatch is not installed; CI installs slurm-wlm.

const HAS_SLURM = spawnSync("sh", ["-c", "command -v sbatch && command -v slurmctld && command -v munged"]).status === 0;
if (!HAS_SLURM) console.warn("slurm.test.ts SKIPPED: sbatch/slurmctld/munged not installed (apt-get install slurm-wlm munge)");

const SCRIPTS = resolve(import.meta.dirname, "../../../scripts/slurm");
const DIR = `/tmp/ce-slurm-t${process.pid}`;
let root: string;
let backend: Backend;

function slurmCmd(cmd: string, ...args: string[]): string {
  return execFileSync(cmd, args, { env: process.env, encoding: "utf8" });
}

async function poll1(jobId: string, localId: string, jobDir: string): Promise<PollState> {
  return (await backend.poll([{ jobId, localId, jobDir }])).get(jobId)!;
}

async function until(jobId: string, localId: string, jobDir: string, pred: (s: PollState) => boolean, timeoutMs = 30_000) {
  return waitFor(
    async () => {
      const s = await poll1(jobId, localId, jobDir);
      return pred(s) ? s : undefined;
    },
    timeoutMs,
    500,
  );
}
const isDone = (s: PollState) => s.kind === "done";

describe.skipIf(!HAS_SLURM)("real Slurm back end", () => {
  beforeAll(async () => {
    const [ctld, slurmd] = [await freePort(), await freePort()];
    const out = execFileSync(join(SCRIPTS, "start-slurm.sh"), [DIR], {
      encoding: "utf8",
      env: { ...process.env, SLURM_CPUS: "8", SLURMCTLD_PORT: String(ctld), SLURMD_PORT: String(slurmd), SLURM_MIN_JOB_AGE: "15" },
    });
    const conf = /SLURM_CONF=(\S+)/.exec(out)?.[1];
    expect(conf).toBeTruthy();
    process.env.SLURM_CONF = conf!;
    root = tempRoot("ce-slurm-jobs-");
    backend = createBackend(makeConfig(root, { backend: "slurm", callsPerSecond: 50, scriptTimeoutMs: 30_000 }), silentLog);
  }, 90_000);

  afterAll(() => {
    execFileSync(join(SCRIPTS, "stop-slurm.sh"), [DIR, "--purge"], { env: process.env, stdio: "ignore" });
  }, 60_000);

  it.concurrent(
    "runs a job to success: exit 0, diag, wrapper ran under Slurm",
    async () => {
      const job = makeJob(root, {
        jobName: "ok job",
        executable: "/bin/sh",
        arguments: ["-c", 'echo "$SLURM_JOB_ID $MSG"'],
        stdout: "out",
        environment: [{ name: "MSG", value: "it's $(fine)" }],
      });
      const { localId } = await backend.submit(job);
      expect(localId).toMatch(/^\d+$/);
      expect(await until(job.jobId, localId, job.jobDir, isDone)).toEqual({ kind: "done", exitCode: 0, message: "" });
      expect(readIf(join(job.sessionDir, "out"))).toBe(`${localId} it's $(fine)\n`);
      const diag = parseDiag(readIf(join(job.jobDir, "diag")));
      expect(diag).toMatchObject({ exitcode: "0", Processors: "1" });
      expect(diag.WallTime).toMatch(/^\d+s$/);
      expect(slurmCmd("squeue", "-h", "-o", "%j", "-t", "all", "-j", localId).trim()).toBe("ok_job");
    },
    60_000,
  );

  it.concurrent(
    "reports exit code 3",
    async () => {
      const job = makeJob(root, { executable: "/bin/sh", arguments: ["-c", "exit 3"] });
      const { localId } = await backend.submit(job);
      expect(await until(job.jobId, localId, job.jobDir, isDone)).toEqual({ kind: "done", exitCode: 3, message: "" });
    },
    60_000,
  );

  it.concurrent(
    "queued (begin time) → QUEUING, hold → HELD, cancel while queued → cancelled",
    async () => {
      const job = makeJob(root, { executable: "/bin/true", startTime: new Date(Date.now() + 600_000) });
      const { localId } = await backend.submit(job);
      // Slurm's own reason comes with the state (squeue %r): the begin time, then the admin's hold.
      expect(await until(job.jobId, localId, job.jobDir, (s) => s.kind === "active" && s.reason !== undefined, 10_000)).toEqual({
        kind: "active",
        lrms: "QUEUING",
        reason: "BeginTime",
      });
      slurmCmd("scontrol", "hold", localId);
      expect(await until(job.jobId, localId, job.jobDir, (s) => s.kind === "active" && s.lrms === "HELD", 10_000)).toEqual({
        kind: "active",
        lrms: "HELD",
        reason: "JobHeldAdmin",
      });
      await backend.cancel(localId, job);
      expect(await until(job.jobId, localId, job.jobDir, isDone)).toEqual({ kind: "done", exitCode: 271, message: "Job was cancelled" });
      await backend.cancel(localId, job); // already gone: still fine
    },
    60_000,
  );

  it.concurrent(
    "cancel while running → cancelled, wrapper recorded the end",
    async () => {
      const job = makeJob(root, { executable: "/bin/sleep", arguments: ["300"] });
      const { localId } = await backend.submit(job);
      await until(job.jobId, localId, job.jobDir, (s) => s.kind === "active" && s.lrms === "RUNNING");
      // RUNNING in slurmctld comes before slurmd launched the script: wait for the wrapper's diag.
      await waitFor(() => (existsSync(join(job.jobDir, "diag")) ? true : undefined), 15_000);
      await backend.cancel(localId, job);
      const done = await until(job.jobId, localId, job.jobDir, isDone);
      expect(done).toMatchObject({ kind: "done", message: "Job was cancelled" });
      expect(done.kind === "done" && done.exitCode !== 0).toBe(true);
      // The wrapper caught Slurm's TERM and still wrote its end-of-job records.
      expect(readIf(join(job.jobDir, "lrms_done"))).toMatch(/^143 Job was terminated by SIGTERM/);
      expect(parseDiag(readIf(join(job.jobDir, "diag"))).LRMSEndTime).toMatch(/^\d{14}Z$/);
    },
    60_000,
  );

  it.concurrent(
    "polls many jobs in one call",
    async () => {
      const jobs = await Promise.all(
        Array.from({ length: 16 }, async (_, i) => {
          const job = makeJob(root, { executable: "/bin/sh", arguments: ["-c", `exit ${i % 4}`] });
          return { job, localId: (await backend.submit(job)).localId, want: i % 4 };
        }),
      );
      const batch = jobs.map((j) => ({ jobId: j.job.jobId, localId: j.localId, jobDir: j.job.jobDir }));
      const final = await waitFor(
        async () => {
          const m = await backend.poll(batch);
          expect(m.size).toBe(jobs.length);
          return [...m.values()].every(isDone) ? m : undefined;
        },
        60_000,
        1_000,
      );
      for (const j of jobs) expect(final.get(j.job.jobId)).toEqual({ kind: "done", exitCode: j.want, message: "" });
    },
    90_000,
  );

  it.concurrent(
    "after squeue forgot a job, sacct -c gives the same answer",
    async () => {
      const job = makeJob(root, { executable: "/bin/sh", arguments: ["-c", "exit 2"] });
      const { localId } = await backend.submit(job);
      expect(await until(job.jobId, localId, job.jobDir, isDone)).toMatchObject({ exitCode: 2 });
      // MinJobAge=15 s: wait until slurmctld purged it, and hide the wrapper's lrms_done.
      await waitFor(
        () => (spawnSync("squeue", ["-h", "-j", localId], { encoding: "utf8" }).stdout.trim() === "" ? true : undefined),
        150_000,
        2_000,
      );
      writeFileSync(join(job.jobDir, "lrms_done.bak"), readFileSync(join(job.jobDir, "lrms_done")));
      execFileSync("rm", [join(job.jobDir, "lrms_done")]);
      expect(await poll1(job.jobId, localId, job.jobDir)).toEqual({ kind: "done", exitCode: 2, message: "Job failed" });
      const ghost = await poll1("ghost", "999999", job.jobDir + "-none");
      expect(ghost).toEqual({ kind: "unknown", reason: "Job missing from SLURM" });
    },
    170_000,
  );

  it.concurrent(
    "[slow] a job over its 1 min time limit ends as TIMEOUT",
    async () => {
      const job = makeJob(root, { executable: "/bin/sleep", arguments: ["600"], wallTimeSeconds: 60 });
      const { localId } = await backend.submit(job);
      const done = await until(job.jobId, localId, job.jobDir, isDone, 150_000);
      // 143 when the wrapper caught TERM and exited itself, 271 (256+15) when Slurm killed it.
      expect(done).toMatchObject({
        kind: "done",
        message: "Walltime exceeded: the batch system ended the job at its time limit (Slurm TIMEOUT)",
      });
      expect(done.kind === "done" && [143, 271].includes(done.exitCode)).toBe(true);
      expect(readIf(join(job.jobDir, "comment"))).toMatch(/DUE TO TIME LIMIT/);
    },
    170_000,
  );

  it.concurrent(
    "RTE stage 1 runs on the node; a hostile job name is only a name",
    async () => {
      const rte = join(root, "rte", "SLURMRTE");
      writeFileSync(rte, '[ "$1" = 1 ] && export FROM_RTE=yes\n[ "$1" = 2 ] && echo stage2 > stage2.txt\ntrue\n');
      chmodSync(rte, 0o644);
      const job = makeJob(
        root,
        { jobName: "$(touch /tmp/ce-pwned)", executable: "/bin/sh", arguments: ["-c", 'echo "$FROM_RTE"'], stdout: "o" },
        { runtimeEnvironments: ["SLURMRTE"] },
      );
      const { localId } = await backend.submit(job);
      expect(await until(job.jobId, localId, job.jobDir, isDone)).toMatchObject({ exitCode: 0 });
      expect(readIf(join(job.sessionDir, "o"))).toBe("yes\n");
      expect(readIf(join(job.sessionDir, "stage2.txt"))).toBe("stage2\n");
      expect(existsSync("/tmp/ce-pwned")).toBe(false);
    },
    60_000,
  );

  it.concurrent(
    "sbatch rejects an impossible request → SUBMIT_FAILED with Slurm's reason",
    async () => {
      const job = makeJob(root, { executable: "/bin/true", count: 64 });
      await expect(backend.submit(job)).rejects.toMatchObject({
        code: "SUBMIT_FAILED",
        message: expect.stringMatching(/processors|Requested node configuration/i),
      });
    },
    60_000,
  );

  it.concurrent(
    "exactly once per tag: the tag is the job's comment; a resumed submission whose record was lost finds the job in Slurm",
    async () => {
      const job = makeJob(root, { executable: "/bin/true", startTime: new Date(Date.now() + 600_000) });
      const tagged = { ...job, submitTag: `${job.jobId}.c3` };
      const { localId } = await backend.submit(tagged);
      expect(slurmCmd("squeue", "-h", "-o", "%k", "-j", localId).trim()).toBe(`${job.jobId}.c3`);
      // sbatch answered but the record never reached the disk (the submit process died): the resumed
      // attempt asks Slurm by comment and adopts; a fresh attempt would have submitted again.
      rmSync(join(job.jobDir, `localid.${job.jobId}.c3`));
      expect(await backend.submit({ ...tagged, resume: true })).toEqual({ localId });
      expect(await backend.submit(tagged)).toEqual({ localId }); // the record is back
      const mine = slurmCmd("squeue", "-h", "-t", "all", "-o", "%k")
        .split("\n")
        .filter((c) => c === `${job.jobId}.c3`);
      expect(mine).toHaveLength(1);
      await backend.cancel(localId, job);
      await backend.cancel(localId, job); // idempotent
    },
    60_000,
  );
});
