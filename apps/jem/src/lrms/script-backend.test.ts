import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { createBackend, parsePollOutput, parseSubmitOutput, type Backend } from "./index.js";
import { parseBulkOutput } from "./script-backend.js";
import { TokenBucket } from "./rate-limit.js";
import { FAKE_BACKENDS, makeConfig, makeJob, silentLog, tempRoot } from "./testdata/harness.js";
import { quietPeriod } from "@ce/testing";

// The TS side of the script contract against a fake back end that misbehaves on demand
// (testdata/fake-backends/fake: behaviour chosen by job name / local id).

let root: string;
let backend: Backend;

beforeAll(() => {
  root = tempRoot("ce-fake-");
  backend = createBackend(
    makeConfig(root, { backend: "fake", scriptsDir: FAKE_BACKENDS, scriptTimeoutMs: 1_500, callsPerSecond: 1000 }),
    silentLog,
  );
});

const job = (jobName: string) => makeJob(root, { jobName, executable: "/bin/true" });

describe("submit", () => {
  it("writes batch.json, batch.env and job.sh before calling submit, returns the local id", async () => {
    const spec = job("running");
    const { localId } = await backend.submit(spec);
    expect(localId).toMatch(/^fake-running-\d+-1$/);
    const batch = JSON.parse(readFileSync(join(spec.jobDir, "batch.json"), "utf8"));
    expect(batch).toMatchObject({
      version: 1,
      jobId: spec.jobId,
      partition: "main",
      wrapper: join(spec.jobDir, "job.sh"),
      submit: { tag: expect.stringMatching(new RegExp(`^${spec.jobId}\\.[0-9a-f]{8}$`)), resume: false },
    });
    expect(existsSync(join(spec.jobDir, "batch.env"))).toBe(true);
    expect(readFileSync(join(spec.jobDir, "job.sh"), "utf8")).toMatch(/^#!\/bin\/bash\n/);
  });

  it("ignores chatter around the localid line", async () => {
    expect(await backend.submit(job("noisy"))).toEqual({ localId: "fake-running-1" });
  });

  it("exit 1 → SUBMIT_FAILED carrying the stderr reason", async () => {
    await expect(backend.submit(job("fail"))).rejects.toMatchObject({
      name: "BackendError",
      code: "SUBMIT_FAILED",
      message: "sbatch: error: queue is closed for maintenance",
      exitCode: 1,
    });
  });

  it("concurrent submits share one script run; each job gets its own line, error or busy", async () => {
    const specs = ["running", "refuse", "running", "busy", "running"].map((n) => job(n));
    const results = await Promise.allSettled(specs.map((s) => backend.submit(s)));
    // Which run each job landed in depends on timing (MicroBatcher's own test covers that); each
    // job gets its own answer whatever the grouping.
    for (const i of [0, 2, 4])
      expect(results[i]).toMatchObject({ status: "fulfilled", value: { localId: expect.stringMatching(/^fake-running-\d+-\d+$/) } });
    expect(new Set(results.map((r) => (r.status === "fulfilled" ? r.value.localId : r.status))).size).toBe(4);
    expect(results[1]).toMatchObject({ status: "rejected", reason: { code: "SUBMIT_FAILED", message: "sbatch: error: Invalid account" } });
    expect(results[3]).toMatchObject({ status: "rejected", reason: { code: "BUSY" } });
  });

  it("a tag and resume given by the caller reach the script", async () => {
    const spec = { ...job("running"), submitTag: "abc.123", resume: true };
    await backend.submit(spec);
    expect(readFileSync(join(spec.jobDir, "submit-calls"), "utf8")).toBe("abc.123 yes\n");
    await expect(backend.submit({ ...job("running"), submitTag: "bad tag" })).rejects.toMatchObject({ code: "SUBMIT_FAILED" });
  });

  it("a hung script (with a child holding its stdout) → TIMEOUT, killed", async () => {
    const t0 = Date.now();
    await expect(backend.submit(job("hang"))).rejects.toMatchObject({ code: "TIMEOUT" });
    expect(Date.now() - t0).toBeLessThan(5_000);
  });

  it("garbage or an invalid id → BAD_OUTPUT", async () => {
    await expect(backend.submit(job("garbage"))).rejects.toMatchObject({ code: "BAD_OUTPUT" });
    await expect(backend.submit(job("badid"))).rejects.toMatchObject({ code: "BAD_OUTPUT" });
  });

  it("invalid descriptions fail before any script runs", async () => {
    const spec = makeJob(root, { executable: "x", environment: [{ name: "BAD NAME", value: "1" }] });
    await expect(backend.submit(spec)).rejects.toMatchObject({
      code: "SUBMIT_FAILED",
      message: expect.stringContaining("environment variable name"),
    });
    const spec2 = makeJob(root, { executable: "x", stdout: "../../etc/owned" });
    await expect(backend.submit(spec2)).rejects.toMatchObject({ code: "SUBMIT_FAILED", message: expect.stringContaining("stdout") });
  });
});

describe("cancel", () => {
  it("passes local id and job dir; failure → CANCEL_FAILED; hang → TIMEOUT", async () => {
    const spec = job("x");
    await backend.cancel("fake-running-7", spec);
    expect(readFileSync(join(spec.jobDir, "cancelled-by-fake"), "utf8")).toBe("fake-running-7\n");
    await expect(backend.cancel("fake-cancelfail", spec)).rejects.toMatchObject({
      code: "CANCEL_FAILED",
      message: expect.stringContaining("not responding"),
    });
    await expect(backend.cancel("fake-cancelhang", spec)).rejects.toMatchObject({ code: "TIMEOUT" });
    await expect(backend.cancel("bad id; rm -rf /", spec)).rejects.toMatchObject({ code: "CANCEL_FAILED" });
  });
});

describe("poll", () => {
  const jobs = (...ids: string[]) => ids.map((localId, i) => ({ jobId: `job${i}`, localId, jobDir: join(root, "control", `job${i}`) }));

  it("maps every state in one call; missing or garbled lines → unknown, never done", async () => {
    const m = await backend.poll(
      jobs(
        "fake-running",
        "fake-queued",
        "fake-held",
        "fake-done3",
        "fake-done0",
        "fake-gone",
        "fake-garbage",
        "fake-badcode",
        "fake-bogus",
        "fake-silent",
      ),
    );
    expect(Object.fromEntries(m)).toEqual({
      job0: { kind: "active", lrms: "RUNNING" },
      job1: { kind: "active", lrms: "QUEUING", reason: "Priority" },
      job2: { kind: "active", lrms: "HELD", reason: "JobHeldAdmin" },
      job3: { kind: "done", exitCode: 3, message: "failed on purpose" },
      job4: { kind: "done", exitCode: 0, message: "" },
      job5: { kind: "unknown", reason: "Job missing from SLURM" },
      job6: { kind: "unknown", reason: expect.stringContaining("BAD_OUTPUT") },
      job7: { kind: "unknown", reason: expect.stringContaining("BAD_OUTPUT") },
      job8: { kind: "unknown", reason: expect.stringContaining("BAD_OUTPUT") },
      job9: { kind: "unknown", reason: expect.stringContaining("BAD_OUTPUT") },
    });
  });

  it("a failed poll → all unknown with POLL_FAILED and the reason", async () => {
    const m = await backend.poll(jobs("fake-running", "fake-pollfail", "fake-done3"));
    expect([...m.values()]).toEqual(Array(3).fill({ kind: "unknown", reason: expect.stringMatching(/^POLL_FAILED: .*controller down/) }));
  });

  it("a hung poll → all unknown with TIMEOUT", async () => {
    const m = await backend.poll(jobs("fake-done3", "fake-pollhang"));
    expect([...m.values()]).toEqual(Array(2).fill({ kind: "unknown", reason: expect.stringMatching(/^TIMEOUT/) }));
  });

  it("total garbage → all unknown", async () => {
    const m = await backend.poll(jobs("fake-done0", "fake-allgarbage"));
    expect([...m.values()].every((s) => s.kind === "unknown")).toBe(true);
  });

  it("empty input → no call; unsafe ids never reach the script", async () => {
    expect((await backend.poll([])).size).toBe(0);
    const m = await backend.poll([{ jobId: "a", localId: "x\nb fake-done0", jobDir: "/tmp" }]);
    expect(m.get("a")).toMatchObject({ kind: "unknown" });
    expect(m.has("b")).toBe(false);
  });
});

describe("parsers", () => {
  it("parsePollOutput", () => {
    const { states, bad } = parsePollOutput(
      "j1 DONE -1 Job died unexpectedly\r\nj2 EXITINGLRMS\n\nj3 DONE 271   Job timeout  \nx y z\nj9 RUNNING\n",
      ["j1", "j2", "j3", "j4"],
    );
    expect(Object.fromEntries(states)).toEqual({
      j1: { kind: "done", exitCode: -1, message: "Job died unexpectedly" },
      j2: { kind: "active", lrms: "EXITINGLRMS" },
      j3: { kind: "done", exitCode: 271, message: "Job timeout" },
      j4: { kind: "unknown", reason: expect.stringContaining("nothing") },
    });
    expect(bad).toEqual(["x y z", "j9 RUNNING"]);
  });

  it("parsePollOutput keeps a waiting job's reason, one bounded printable line; none for running jobs", () => {
    const long = "x".repeat(500);
    const { states } = parsePollOutput(
      [
        "q1 QUEUING QOSMaxJobsPerUserLimit",
        "q2 HELD JobHeldAdmin\u0007\u001b[31m <b>",
        `q3 QUEUING ${long}`,
        "q4 QUEUING None",
        "q5 RUNNING some node name",
        "q6 OTHER REQUEUE_HOLD",
      ].join("\n"),
      ["q1", "q2", "q3", "q4", "q5", "q6"],
    );
    expect(states.get("q1")).toEqual({ kind: "active", lrms: "QUEUING", reason: "QOSMaxJobsPerUserLimit" });
    // Control characters become blanks (the text reaches XML, HTML and metric labels, escaped there).
    expect(states.get("q2")).toEqual({ kind: "active", lrms: "HELD", reason: "JobHeldAdmin [31m <b>" });
    const r3 = states.get("q3");
    expect(r3?.kind === "active" && r3.reason?.length).toBe(160);
    // Slurm's "None" says "no reason".
    expect(states.get("q4")).toEqual({ kind: "active", lrms: "QUEUING" });
    expect(states.get("q5")).toEqual({ kind: "active", lrms: "RUNNING" });
    expect(states.get("q6")).toEqual({ kind: "active", lrms: "OTHER", reason: "REQUEUE_HOLD" });
  });

  it("parseBulkOutput", () => {
    const m = parseBulkOutput("1 localid=12\n2 error no such queue\n3 busy\nchatter\n4 ok\n9 localid=1\n", 4);
    expect(Object.fromEntries(m)).toEqual({
      1: { kind: "localid", id: "12" },
      2: { kind: "error", reason: "no such queue" },
      3: { kind: "busy", reason: "busy without a reason" },
      4: { kind: "ok" },
    });
    expect(parseBulkOutput("localid=7\n", 1).get(1)).toEqual({ kind: "localid", id: "7" });
    expect(parseBulkOutput("localid=7\n", 2).size).toBe(0);
  });

  it("parseSubmitOutput", () => {
    expect(parseSubmitOutput("localid=123\n")).toBe("123");
    expect(parseSubmitOutput("localid=1\nlocalid=4567:89\n")).toBe("4567:89");
    expect(() => parseSubmitOutput("Submitted batch job 12")).toThrow(/localid/);
    expect(() => parseSubmitOutput("localid=$(reboot)")).toThrow();
  });
});

describe("createBackend and rate limiting", () => {
  it("refuses a back end directory without the three scripts", () => {
    const dir = join(root, "scripts");
    mkdirSync(join(dir, "half"), { recursive: true });
    expect(() => createBackend(makeConfig(root, { backend: "half", scriptsDir: dir }), silentLog)).toThrow(/half.*submit/);
  });

  it("counts operations, not script runs: 4 polls and a bulk cancel of 4 jobs take ≈ 1 s at 4/s", async () => {
    const slow = createBackend(makeConfig(root, { backend: "fake", scriptsDir: FAKE_BACKENDS, callsPerSecond: 4 }), silentLog);
    const spec = job("x");
    // 4 polls empty the bucket (burst 4); the 4 cancels of one bulk run need 4 more tokens: ≥ 1 s in all.
    const t0 = Date.now();
    await Promise.all(Array.from({ length: 4 }, () => slow.poll(jobs1())));
    await Promise.all(Array.from({ length: 4 }, (_, i) => slow.cancel(`fake-running-${i}`, spec)));
    expect(Date.now() - t0).toBeGreaterThanOrEqual(900);
    expect(readFileSync(join(spec.jobDir, "cancelled-by-fake"), "utf8").split("\n").filter(Boolean)).toHaveLength(4);
  });

  it("TokenBucket.take(n) above the burst waits for a full bucket and leaves debt", async () => {
    let now = 0;
    const b = new TokenBucket(2, () => now);
    let done = 0;
    void b.take(5).then(() => done++);
    await Promise.resolve();
    expect(done).toBe(1); // full bucket (2): served, 3 in debt
    const next = b.take(1).then(() => done++);
    now = 1000; // +2 tokens: still -1
    await quietPeriod(5, "a waiter still in debt must not be served");
    expect(done).toBe(1);
    now = 2000;
    await next;
    expect(done).toBe(2);
  });

  it("limits calls per second per back end", async () => {
    const slow = createBackend(makeConfig(root, { backend: "fake", scriptsDir: FAKE_BACKENDS, callsPerSecond: 4 }), silentLog);
    const t0 = Date.now();
    await Promise.all(Array.from({ length: 8 }, () => slow.poll(jobs1())));
    // burst of 4, then 4 more at 4/s ≈ 1 s
    expect(Date.now() - t0).toBeGreaterThanOrEqual(900);
  });

  it("TokenBucket serves waiters in order at the configured rate", async () => {
    let now = 0;
    const b = new TokenBucket(2, () => now);
    const order: number[] = [];
    const ps = [1, 2, 3, 4].map((i) => b.take().then(() => order.push(i)));
    await Promise.resolve();
    expect(order).toEqual([1, 2]);
    expect(b.waiting).toBe(2);
    now = 1000;
    await Promise.all(ps);
    expect(order).toEqual([1, 2, 3, 4]);
  });
});

function jobs1() {
  return [{ jobId: "j", localId: "fake-running", jobDir: root }];
}
