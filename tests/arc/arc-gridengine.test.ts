/**
 * The REAL ARC client against the whole CE on the Grid Engine back end (apps/jem/backends/sge), the
 * third batch system after fork and Slurm: arcsub (uploads, one call) → arcstat → arcget, arckill
 * of a running job, a job Grid Engine kills at its h_rt and one an administrator qdels, each with
 * the words the user reads in `arcstat -l`; slot numbers in /info and the usage record's figures
 * come from Grid Engine.
 *
 * Grid Engine: a private cell (own SGE_ROOT and spool, free ports, @ce/testing/gridengine),
 * started once. The walltime job runs in a queue whose default wall time is 4 s, so Grid Engine's
 * h_rt kill comes within seconds. The cell's daemons must listen on loopback only. Skipped only when
 * ARC / Grid Engine are not installed.
 */
import { execFileSync } from "node:child_process";
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { AccountingDb } from "../../packages/accounting/src/index.js";
import { startStack, type Stack } from "@ce/testing/stack";
import { HAS_GRIDENGINE, startGridEngine, type GridEngineCluster } from "@ce/testing/gridengine";
import { isLoopback, listeningAddresses } from "@ce/testing/listening";
import { arc, HAS_ARC, ok, restCall, parseArcstat, processesIn, submittedJobs, waitFor, type ArcJob } from "./arc-tools.js";

const SKIP = !HAS_ARC || !HAS_GRIDENGINE;
if (SKIP) console.warn("arc-gridengine.test.ts SKIPPED: needs the ARC client and Grid Engine (scripts/ensure-system-deps.sh arc sge)");

const RUN_SH = `#!/bin/sh
cat in.txt > out.txt
mkdir -p res
echo "on $(hostname)" > res/where.txt
echo "stdout line $1"
echo "stderr line" >&2
`;
/** Slots of each queue of the cell: a number no test host has as its CPU count, so /info shows it came from qhost. */
const SLOTS = 7;
const JOBS: Record<string, string> = {
  "io.xrsl": `&(executable="run.sh")(arguments="A1")(jobname="sge-io")(queue="main")
 (inputfiles=("run.sh" "")("in.txt" ""))(outputfiles=("out.txt" "")("res/" ""))(stdout="stdout.txt")(stderr="stderr.txt")`,
  "sleep.xrsl": `&(executable="/bin/sh")(arguments="-c" "echo started; exec sleep 300")(jobname="sge-sleep")(queue="main")(stdout="sleep.out")`,
  "admin.xrsl": `&(executable="/bin/sleep")(arguments="300")(jobname="sge-admin")(queue="main")`,
  "walltime.xrsl": `&(executable="/bin/sleep")(arguments="300")(jobname="sge-walltime")(queue="short")`,
};

describe.skipIf(SKIP)("real ARC client against the CE (Grid Engine back end)", () => {
  let sge: GridEngineCluster;
  let stack: Stack;
  let env: NodeJS.ProcessEnv;
  let work: string;
  let jobsDat: string;
  const ids: Record<string, string> = {};
  const run = (tool: string, args: string[], timeoutMs?: number) => arc(tool, args, { env, cwd: work, timeoutMs });
  const jobUrl = (id: string) => `${stack.url}/rest/1.0/jobs/${id}`;
  const stat = async (jobIds: string[]): Promise<Map<string, ArcJob>> =>
    parseArcstat((await run("arcstat", ["-j", jobsDat, "-l", ...jobIds.map(jobUrl)])).stdout);
  const until = (want: Record<string, string>, timeoutMs = 40_000) =>
    waitFor(
      `arcstat states ${JSON.stringify(want)}`,
      async () => {
        const s = await stat(Object.keys(want));
        const seen = Object.fromEntries(Object.keys(want).map((id) => [id, s.get(id)?.state]));
        for (const [id, st] of Object.entries(want)) if (seen[id] !== st) throw new Error(`seen ${JSON.stringify(seen)}`);
        return s;
      },
      timeoutMs,
    );
  /** qstat's state letters of the Grid Engine job with this name ("" once it has left qstat). */
  const qstate = (name: string) => {
    const out = execFileSync("qstat", ["-u", "*"], { env: { ...process.env, ...sge.env }, encoding: "utf8" });
    return (
      out
        .split("\n")
        .map((l) => l.trim().split(/\s+/))
        .find((f) => f[2] === name)?.[4] ?? ""
    );
  };

  beforeAll(async () => {
    sge = await startGridEngine(`/tmp/ce-sge-e${process.pid}`, { queues: ["main", "short"], slots: SLOTS });
    stack = await startStack({
      redisUrl: inject("redisUrl"),
      redisUsers: inject("redisUsers"),
      backend: "sge",
      env: sge.env,
      // CE queues = Grid Engine queues; a job in "short" gets a 4 s h_rt unless it asks for more.
      config: { jobs: { queues: [{ name: "main" }, { name: "short", defaultWallTimeSeconds: 4 }] }, lrms: { pollIntervalMs: 300 } },
    });
    work = join(stack.state, "work");
    mkdirSync(work, { recursive: true });
    jobsDat = join(stack.state, "home", "jobs.dat");
    env = stack.arcEnv;
    const files: Record<string, string> = { "run.sh": RUN_SH, "in.txt": "hello input\n", ...JOBS };
    for (const [n, c] of Object.entries(files)) writeFileSync(join(work, n), c);
    chmodSync(join(work, "run.sh"), 0o755);
  }, 120_000);

  afterAll(async () => {
    await stack?.stop();
    sge?.stop();
  }, 60_000);

  it("sge_qmaster and sge_execd listen on loopback only (start-sge.sh preloads loopback-bind.c)", () => {
    for (const [daemon, pid] of Object.entries(sge.pids)) {
      const addrs = listeningAddresses(pid);
      expect(addrs.length, `${daemon} (pid ${pid}) listens nowhere`).toBeGreaterThan(0);
      expect(
        addrs.filter((a) => !isLoopback(a)),
        `${daemon}: ${addrs.join(" ")}`,
      ).toEqual([]);
    }
  });

  it("arcsub submits four jobs in one call; arcinfo names Grid Engine", async () => {
    const r = ok(await run("arcsub", ["-C", stack.url, "-T", "arcrest", "-j", jobsDat, ...Object.keys(JOBS)], 60_000), "arcsub");
    expect(r.stdout).toMatch(/4 of 4 jobs were submitted/);
    const urls = submittedJobs(r.stdout).map((u) => u.replace(/.*\//, ""));
    const s = await stat(urls);
    for (const j of s.values()) ids[j.name!] = j.id;
    expect(Object.keys(ids).sort()).toEqual(["sge-admin", "sge-io", "sge-sleep", "sge-walltime"]);
    const info = ok(await run("arcinfo", ["-c", stack.url, "-l"]), "arcinfo -l");
    expect(info.stdout).toMatch(/Resource manager: SGE/i);
    // Slot numbers from Grid Engine (qhost -q): the one host counted once, each queue its own.
    const xml = (
      await restCall({
        url: `${stack.url}/rest/1.0/info`,
        proxyFile: env.X509_USER_PROXY!,
        caFile: join(stack.pki, "ca", "ca.pem"),
        headers: { accept: "text/xml" },
      })
    ).body;
    expect(/<ComputingManager\b[\s\S]*?<TotalSlots>(\d+)<\/TotalSlots>/.exec(xml)?.[1]).toBe(String(SLOTS));
    const shares = [...xml.matchAll(/<ComputingShare\b[\s\S]*?<MappingQueue>(\w+)<\/MappingQueue>[\s\S]*?<\/ComputingShare>/g)];
    const slotsOf = (share: string) =>
      ["FreeSlots", "UsedSlots"].reduce((n, k) => n + Number(new RegExp(`<${k}>(\\d+)<`).exec(share)?.[1] ?? NaN), 0);
    // Free + used of one qhost answer: the queue's slots, whichever jobs run at this moment.
    expect(shares.map((m) => [m[1], slotsOf(m[0])])).toEqual([
      ["main", SLOTS],
      ["short", SLOTS],
    ]);
  }, 60_000);

  it("arcstat follows the jobs: the I/O job FINISHED, the sleeps Running in Grid Engine", async () => {
    const s = await until({ [ids["sge-io"]!]: "Finished", [ids["sge-sleep"]!]: "Running", [ids["sge-admin"]!]: "Running" });
    expect(s.get(ids["sge-io"]!)).toMatchObject({ specificState: "FINISHED", exitCode: 0 });
    // Really running in the batch system: "t" (being handed to the execd) also reads RUNNING, for a moment.
    await waitFor("qstat state r of sge_sleep", async () => (qstate("sge_sleep") === "r" ? true : undefined), 10_000);
  }, 60_000);

  it("arcget downloads the outputs of the finished job", async () => {
    const dl = join(work, "dl");
    const g = ok(await run("arcget", ["-j", jobsDat, "-D", dl, jobUrl(ids["sge-io"]!)]), "arcget");
    expect(g.stdout).toMatch(/successfully retrieved: 1/);
    const d = join(dl, ids["sge-io"]!);
    expect(readFileSync(join(d, "stdout.txt"), "utf8")).toBe("stdout line A1\n");
    expect(readFileSync(join(d, "stderr.txt"), "utf8")).toBe("stderr line\n");
    expect(readFileSync(join(d, "out.txt"), "utf8")).toBe("hello input\n");
    expect(readFileSync(join(d, "res", "where.txt"), "utf8")).toMatch(/^on /);
  }, 30_000);

  it("the usage record of the finished job carries Grid Engine's figures (sge/usage reads the accounting file)", async () => {
    const db = await AccountingDb.open(undefined, stack.state);
    try {
      const rec = await waitFor(
        "the usage record of sge-io",
        async () => (await db.endedBetween(0, 2 ** 31)).find((r) => r.jobId === ids["sge-io"]),
        30_000,
      );
      // accounting(5): 6 job_number 10 start_time 11 end_time 14 ru_wallclock 35 slots; the job's record.
      const acct = readFileSync(join(sge.env.SGE_ROOT!, sge.env.SGE_CELL!, "common", "accounting"), "utf8");
      const f = acct
        .split("\n")
        .map((l) => l.split(":"))
        .find((x) => x[5] === rec.batchId);
      expect(f, `accounting record of Grid Engine job ${rec.batchId}`).toBeDefined();
      expect({ start: rec.startTime, end: rec.endTime, wall: rec.wallSeconds, processors: rec.processors, nodes: rec.nodeCount }).toEqual({
        start: Number(f![9]),
        end: Number(f![10]),
        wall: Math.round(Number(f![13])),
        processors: Number(f![34]),
        nodes: 1,
      });
    } finally {
      await db.close();
    }
  }, 40_000);

  it("arckill stops the running job → KILLED, payload gone, job deleted from Grid Engine", async () => {
    const id = ids["sge-sleep"]!;
    const session = join(stack.state, "session", id);
    expect(processesIn(session, "sleep").length).toBeGreaterThan(0);
    const r = ok(await run("arckill", ["-j", jobsDat, jobUrl(id)]), "arckill");
    expect(r.stdout).toMatch(/successfully killed: 1/);
    const s = await until({ [id]: "Killed" });
    expect(s.get(id)?.specificState).toBe("KILLED");
    await waitFor("the sleep payload to end", async () => (processesIn(session, "sleep").length === 0 ? true : undefined), 20_000);
    expect(qstate("sge_sleep")).toBe("");
  }, 60_000);

  it("a job Grid Engine kills at its h_rt ends FAILED with 'Walltime exceeded'", async () => {
    const id = ids["sge-walltime"]!;
    await until({ [id]: "Failed" });
    const l = ok(await run("arcstat", ["-j", jobsDat, "-l", jobUrl(id)]), "arcstat -l").stdout;
    expect(l, l).toMatch(/Walltime exceeded: .*\(Grid Engine h_rt=4s\)/);
  }, 60_000);

  it("a job an administrator qdels ends FAILED with a reason naming the batch system", async () => {
    const id = ids["sge-admin"]!;
    execFileSync("qdel", ["-u", "*", "sge_admin"], { env: { ...process.env, ...sge.env }, stdio: "ignore" });
    await until({ [id]: "Failed" });
    const l = ok(await run("arcstat", ["-j", jobsDat, "-l", jobUrl(id)]), "arcstat -l").stdout;
    expect(l, l).toMatch(/Cancelled in the batch system by an administrator/);
  }, 60_000);
});
