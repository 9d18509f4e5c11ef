import { execFileSync, spawnSync } from "node:child_process";
import { chmodSync, existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createBackend, type Backend, type PollState } from "../src/lrms/index.js";
import { makeConfig, makeJob, parseDiag, readIf, silentLog, tempRoot, waitFor } from "../src/lrms/testdata/harness.js";
import { waitFor as poll } from "@ce/testing";

// The fork back end for real: detached wrapper jobs on this host, polled and cancelled.

let root: string;
let backend: Backend;

async function pollOne(jobId: string, localId: string, jobDir: string): Promise<PollState> {
  const m = await backend.poll([{ jobId, localId, jobDir }]);
  return m.get(jobId)!;
}

async function untilDone(jobId: string, localId: string, jobDir: string, timeoutMs = 15_000) {
  return waitFor(
    async () => {
      const s = await pollOne(jobId, localId, jobDir);
      return s.kind === "done" ? s : undefined;
    },
    timeoutMs,
    100,
  );
}

function script(dir: string, name: string, body: string): void {
  writeFileSync(join(dir, name), `#!/bin/bash\n${body}\n`);
  chmodSync(join(dir, name), 0o644); // not executable: the wrapper's chmod +x must do it
}

beforeAll(() => {
  root = tempRoot("ce-fork-");
  backend = createBackend(makeConfig(root, { backend: "fork", callsPerSecond: 1000 }), silentLog);
});
afterAll(() => {
  // temp dirs are left for inspection on failure; they live under the OS tmpdir
});

describe("fork back end", () => {
  it("runs a job to success with env, args, stdio and diag", async () => {
    const job = makeJob(root, {
      jobName: "ok",
      executable: "run.sh",
      arguments: ["a b", "$(touch pwned)", "it's"],
      environment: [{ name: "MY_VAR", value: "x'$(touch pwned2)\"\ny" }],
      stdout: "out.txt",
      stderr: "err.txt",
      inputFiles: [{ name: "run.sh", executable: true, options: {} }],
    });
    script(
      job.sessionDir,
      "run.sh",
      'printf "%s|" "$@"; echo; printf "%s" "$MY_VAR" > var.txt; echo "$GRID_GLOBAL_JOBID" > gid.txt; pwd > pwd.txt; echo oops >&2',
    );
    const { localId } = await backend.submit(job);
    expect(localId).toMatch(/^\d+:\d+$/);
    const done = await untilDone(job.jobId, localId, job.jobDir);
    expect(done).toEqual({ kind: "done", exitCode: 0, message: "" });
    expect(readIf(join(job.sessionDir, "out.txt"))).toBe("a b|$(touch pwned)|it's|\n");
    expect(readIf(join(job.sessionDir, "err.txt"))).toBe("oops\n");
    expect(readIf(join(job.sessionDir, "var.txt"))).toBe("x'$(touch pwned2)\"\ny");
    expect(readIf(join(job.sessionDir, "gid.txt"))).toBe(`${job.jobId}\n`);
    expect(readIf(join(job.sessionDir, "pwd.txt"))?.trim()).toBe(job.sessionDir);
    expect(existsSync(join(job.sessionDir, "pwned"))).toBe(false);
    expect(existsSync(join(job.sessionDir, "pwned2"))).toBe(false);
    const diag = parseDiag(readIf(join(job.jobDir, "diag")));
    expect(diag.exitcode).toBe("0");
    expect(diag.WallTime).toMatch(/^\d+s$/);
    expect(diag.UserTime).toMatch(/^[\d.]+s$/);
    expect(diag.LRMSStartTime).toMatch(/^\d{14}Z$/);
    expect(diag.LRMSEndTime).toMatch(/^\d{14}Z$/);
    expect(diag.nodename).toBeTruthy();
    if (existsSync("/usr/bin/time")) expect(diag.MaxResidentMemory).toMatch(/^\d+kB$/);
    expect(readIf(join(job.jobDir, "lrms_done"))).toBe("0 \n");
  });

  it("reports exit code 3", async () => {
    const job = makeJob(root, { executable: "/bin/sh", arguments: ["-c", "exit 3"] });
    const { localId } = await backend.submit(job);
    expect(await untilDone(job.jobId, localId, job.jobDir)).toEqual({ kind: "done", exitCode: 3, message: "" });
    expect(parseDiag(readIf(join(job.jobDir, "diag"))).exitcode).toBe("3");
  });

  it("cancels a running job (TERM to the group) and reports it cancelled", async () => {
    const job = makeJob(root, { executable: "/bin/sleep", arguments: ["300"] });
    const { localId } = await backend.submit(job);
    expect(await pollOne(job.jobId, localId, job.jobDir)).toEqual({ kind: "active", lrms: "RUNNING" });
    const t0 = Date.now();
    await backend.cancel(localId, job);
    expect(Date.now() - t0).toBeLessThan(4_000); // sleep dies on TERM, no 5 s KILL wait
    const done = await untilDone(job.jobId, localId, job.jobDir);
    expect(done.kind === "done" && done.exitCode !== 0).toBe(true);
    expect(done).toMatchObject({ message: "Job was cancelled" });
    // cancelling again (job gone) is fine
    await backend.cancel(localId, job);
  });

  it("KILLs the whole process group when the payload ignores TERM", async () => {
    const job = makeJob(root, { executable: "/bin/bash", arguments: ["-c", "trap '' TERM; sleep 300 & wait; sleep 300"] });
    const { localId } = await backend.submit(job);
    const pgid = Number(localId.split(":")[0]);
    // Cancel only once the payload has set its trap and started its children.
    await poll("the payload's sleep", () => spawnSync("pgrep", ["-g", String(pgid), "-x", "sleep"]).status === 0, 10_000);
    await backend.cancel(localId, job);
    const done = await untilDone(job.jobId, localId, job.jobDir);
    expect(done).toMatchObject({ kind: "done", message: "Job was cancelled" });
    await waitFor(() => {
      try {
        process.kill(-pgid, 0);
        return undefined;
      } catch {
        return true; // ESRCH: no process of the job is left
      }
    }, 8_000);
  }, 20_000);

  it("a vanished job without lrms_done died unexpectedly; a reused pid is not the job", async () => {
    const job = makeJob(root, {});
    const [pid] = [process.pid];
    // our own pid with a wrong start time: must not count as alive
    expect(await pollOne(job.jobId, `${pid}:1`, job.jobDir)).toEqual({ kind: "done", exitCode: -1, message: "Job died unexpectedly" });
  });

  it("runs RTE stage 0 at submit and stages 1/2 around the executable, with options", async () => {
    const rteDir = join(root, "rte");
    const { mkdirSync } = await import("node:fs");
    mkdirSync(join(rteDir, "ENV"), { recursive: true });
    writeFileSync(
      join(rteDir, "ENV", "TEST-1.0"),
      [
        'case "$1" in',
        '  0) echo "stage0 $2" > "$JOB_SESSION_DIR/stage0.txt" ;;',
        '  1) export RTE_VAR="set-by-rte-$2"; echo stage1 >> "$RUNTIME_JOB_DIR/stages.txt" ;;',
        '  2) echo "stage2 after $(cat out.txt)" >> "$RUNTIME_JOB_DIR/stages.txt" ;;',
        "esac",
      ].join("\n"),
    );
    const job = makeJob(
      root,
      {
        executable: "/bin/sh",
        arguments: ["-c", 'echo "$RTE_VAR"'],
        stdout: "out.txt",
        runtimeEnvironments: [{ name: "ENV/TEST", version: "1.0", options: ["opt1"] }],
      },
      { runtimeEnvironments: ["ENV/TEST-1.0"] },
    );
    const { localId } = await backend.submit(job);
    expect(await untilDone(job.jobId, localId, job.jobDir)).toMatchObject({ exitCode: 0 });
    expect(readIf(join(job.sessionDir, "stage0.txt"))).toBe("stage0 opt1\n");
    expect(readIf(join(job.sessionDir, "out.txt"))).toBe("set-by-rte-opt1\n");
    expect(readIf(join(job.sessionDir, "stages.txt"))).toBe("stage1\nstage2 after set-by-rte-opt1\n");
    expect(parseDiag(readIf(join(job.jobDir, "diag"))).runtimeenvironments).toBe("ENV/TEST-1.0;");
  });

  it("fails the submission for a missing RTE and for a failing stage 0", async () => {
    const job = makeJob(root, { executable: "/bin/true" }, { runtimeEnvironments: ["ENV/MISSING"] });
    await expect(backend.submit(job)).rejects.toMatchObject({
      code: "SUBMIT_FAILED",
      message: expect.stringContaining("ENV/MISSING is missing"),
    });
    writeFileSync(join(root, "rte", "BAD0"), '[ "$1" = 0 ] && { echo "no licence" >&2; exit 4; }\n');
    const job2 = makeJob(root, { executable: "/bin/true" }, { runtimeEnvironments: ["BAD0"] });
    await expect(backend.submit(job2)).rejects.toMatchObject({ code: "SUBMIT_FAILED", message: expect.stringContaining("no licence") });
    const job3 = makeJob(root, { executable: "/bin/true" }, { runtimeEnvironments: ["../etc/passwd"] });
    await expect(backend.submit(job3)).rejects.toMatchObject({ code: "SUBMIT_FAILED" });
  });

  it("a failing stage 1 fails the job with exit 1 and a reason", async () => {
    writeFileSync(join(root, "rte", "BAD1"), '[ "$1" = 1 ] && return 2\ntrue\n');
    const job = makeJob(root, { executable: "/bin/true" }, { runtimeEnvironments: ["BAD1"] });
    const { localId } = await backend.submit(job);
    expect(await untilDone(job.jobId, localId, job.jobDir)).toEqual({
      kind: "done",
      exitCode: 1,
      message: "Runtime environment BAD1 failed in stage 1",
    });
  });

  it("stdin from the session dir, joined stdout/stderr, missing executable", async () => {
    const job = makeJob(root, {
      executable: "/bin/sh",
      arguments: ["-c", "cat; echo err >&2"],
      stdin: "in.txt",
      stdout: "log/all.txt",
      stderr: "log/all.txt",
    });
    writeFileSync(join(job.sessionDir, "in.txt"), "hello\n");
    const { localId } = await backend.submit(job);
    expect(await untilDone(job.jobId, localId, job.jobDir)).toMatchObject({ exitCode: 0 });
    expect(readIf(join(job.sessionDir, "log", "all.txt"))).toBe("hello\nerr\n");

    const job2 = makeJob(root, { executable: "nothere" });
    const r2 = await backend.submit(job2);
    expect(await untilDone(job2.jobId, r2.localId, job2.jobDir)).toEqual({
      kind: "done",
      exitCode: 127,
      message: "Executable ./nothere not found",
    });
  });

  it("measures CPU time with bash `times` when GNU time is absent", async () => {
    const job = makeJob(root, { executable: "/bin/sh", arguments: ["-c", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; exit 4"] });
    const { localId } = await backend.submit(job);
    await untilDone(job.jobId, localId, job.jobDir);
    // Same generated wrapper, run directly without /usr/bin/time.
    const r = (() => {
      try {
        return execFileSync("/bin/bash", [join(job.jobDir, "job.sh")], { env: { PATH: "/usr/bin:/bin", JEM_TIME_BIN: "" } });
      } catch (e) {
        return (e as { status: number }).status;
      }
    })();
    expect(r).toBe(4);
    const diag = parseDiag(readIf(join(job.jobDir, "diag")));
    expect(diag).toMatchObject({ exitcode: "4" });
    expect(diag.UserTime).toMatch(/^\d+\.\d\ds$/);
    expect(diag.KernelTime).toMatch(/^\d+\.\d\ds$/);
    expect(diag.MaxResidentMemory).toBeUndefined();
  });

  it("exactly once per tag: a resubmission (also a concurrent one) adopts the first start, the payload runs once", async () => {
    const job = makeJob(root, { executable: "/bin/sh", arguments: ["-c", "echo ran >> runs.txt; sleep 0.3"] });
    const tagged = { ...job, submitTag: `${job.jobId}.a1`, resume: true };
    const [a, b] = await Promise.all([backend.submit(tagged), backend.submit(tagged)]);
    const c = await backend.submit(tagged);
    expect(b.localId).toBe(a.localId);
    expect(c.localId).toBe(a.localId);
    expect(readIf(join(job.jobDir, `localid.${job.jobId}.a1`))).toBe(`${a.localId}\n`);
    await untilDone(job.jobId, a.localId, job.jobDir);
    expect(readIf(join(job.sessionDir, "runs.txt"))).toBe("ran\n");
    // A new tag (restart) is a new submission.
    const d = await backend.submit({ ...job, submitTag: `${job.jobId}.b2` });
    expect(d.localId).not.toBe(a.localId);
    await untilDone(job.jobId, d.localId, job.jobDir);
    expect(readIf(join(job.sessionDir, "runs.txt"))).toBe("ran\nran\n");
  });

  it("100 /bin/true jobs in one go: one bulk run, all done within a second or so", async () => {
    const jobs = Array.from({ length: 100 }, () => makeJob(root, { executable: "/bin/true" }));
    const t0 = Date.now();
    const ids = await Promise.all(jobs.map((j) => backend.submit(j)));
    const submitMs = Date.now() - t0;
    const states = await waitFor(
      async () => {
        const m = await backend.poll(jobs.map((j, i) => ({ jobId: j.jobId, localId: ids[i]!.localId, jobDir: j.jobDir })));
        return [...m.values()].every((s) => s.kind === "done") ? m : undefined;
      },
      20_000,
      50,
    );
    console.log(`fork: 100 jobs submitted in ${submitMs} ms, all done after ${Date.now() - t0} ms`);
    expect([...states.values()].every((s) => s.kind === "done" && s.exitCode === 0)).toBe(true);
    expect(new Set(ids.map((r) => r.localId)).size).toBe(100);
  }, 30_000);

  it("bulk cancel: several running jobs cancelled in one call", async () => {
    const jobs = Array.from({ length: 3 }, () => makeJob(root, { executable: "/bin/sleep", arguments: ["30"] }));
    const ids = await Promise.all(jobs.map((j) => backend.submit(j)));
    const t0 = Date.now();
    await Promise.all(jobs.map((j, i) => backend.cancel(ids[i]!.localId, j)));
    expect(Date.now() - t0).toBeLessThan(6_000);
    for (const [i, j] of jobs.entries())
      expect(await pollOne(j.jobId, ids[i]!.localId, j.jobDir)).toMatchObject({ kind: "done", message: "Job was cancelled" });
  });
});
