/**
 * Slurm hand-off benchmark (`pnpm bench`): target "on Slurm, 100 jobs handed to `sbatch` within
 * 2 s of submission". A private single-node Slurm (@ce/testing/slurm, as the suites
 * start it) and the CE as `./ce start` runs it with shipped defaults except `lrms.backend: slurm`
 * (plus SLURM_CONF so the JEM's scripts reach that cluster). BENCH_HANDOFF_JOBS (100) sleeping
 * xRSL jobs go in ONE REST request; from the request's start, every ~50 ms:
 * - `squeue -h -t all -o %k` (the Slurm job's comment is the JEM's submission tag `<CE id>.<hex>`):
 *   when each CE job is first in Slurm's view — the figure the target is about;
 * - bulk REST status: when each job first shows a state past ACCEPTING..SUBMITTING;
 * - live `sbatch` processes (peak), JEM / gateway / slurmctld CPU until all are in squeue.
 * Then the jobs are killed through REST (scancel as a fallback) until squeue is empty, a JSON line
 * is printed and written to bench/results/slurm-handoff-*.json. Without Slurm: skipped, exit 0.
 * BENCH_HANDOFF_RUNS (1) repeats the measurement on the same CE and cluster; BENCH_HANDOFF_KEEP_STATE=1
 * keeps the CE's state directory (logs/jem.log: where the time went).
 */
import { execFile, execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { HAS_SLURM, startSlurm, type SlurmCluster } from "@ce/testing/slurm";
import { childSnapshot, cpuDelta, machine, pct, round, sleep, snapshot, type Procs } from "../lib/proc.js";
import { RestClient, states, submit, xrslBatch } from "../lib/rest.js";
import { ROOT, startCe, versions, type Server } from "../lib/servers.js";

const N = Number(process.env.BENCH_HANDOFF_JOBS ?? 100);
const RUNS = Number(process.env.BENCH_HANDOFF_RUNS ?? 1);
const TIMEOUT_S = Number(process.env.BENCH_HANDOFF_TIMEOUT_S ?? 60);
const POLL_MS = 50;
const TARGET_S = 2;
/** REST states of a job not yet handed to the batch system. */
const BEFORE_LRMS = new Set(["ACCEPTING", "ACCEPTED", "PREPARING", "PREPARED", "SUBMITTING"]);
const log = (s: string) => console.log(s);
const run = promisify(execFile);

if (!HAS_SLURM) {
  log("slurm-handoff bench: SKIPPED — Slurm not installed (needs sbatch, slurmctld, munged; apt-get install slurm-wlm munge)");
  process.exit(0);
}

const sbatchCount = () => readdirSync("/proc").filter((p) => /^\d+$/.test(p) && comm(p) === "sbatch").length;
function comm(pid: string): string {
  try {
    return readFileSync(`/proc/${pid}/comm`, "utf8").trim();
  } catch {
    return "";
  }
}

const slurmDir = `/tmp/ce-slurm-b${process.pid}`;
let slurm: SlurmCluster | undefined;
let server: Server | undefined;
let client: RestClient | undefined;
let state: string | undefined;
try {
  const before = machine();
  slurm = await startSlurm(slurmDir);
  const sEnv = { ...process.env, SLURM_CONF: slurm.conf };
  /** CE ids (tag minus its `.<hex>`) of every job Slurm lists, any state. */
  const inSlurm = async (): Promise<string[]> => {
    const { stdout } = await run("squeue", ["-h", "-t", "all", "-o", "%k"], { env: sEnv });
    return stdout
      .split("\n")
      .map((l) => l.trim().replace(/\.[0-9a-f]+$/, ""))
      .filter((l) => l && l !== "(null)");
  };
  state = mkdtempSync("/tmp/ce-bench-handoff-");
  server = await startCe(state, { log, extraEnv: { CE__LRMS__BACKEND: "slurm", SLURM_CONF: slurm.conf } });
  const ctld = Number(readFileSync(join(slurm.dir, "run/slurmctld.pid"), "utf8").trim());
  const procs: Procs = { ...server.procs, slurmctld: [ctld] };
  client = new RestClient({
    base: server.base,
    credFile: join(state, "pki/user/proxy.pem"),
    caFile: join(state, "pki/ca/ca.pem"),
    sockets: 2,
  });
  const c = client;
  log(
    `slurm-handoff bench: ${N} jobs in one request, ${RUNS} run(s), target all in squeue within ${TARGET_S} s (load ${before.loadavg.join(" ")}, ${before.nproc} CPUs)`,
  );
  // Warm-up (TLS, identity cache, JIT); one job through the whole path so the JEM's Slurm code is warm too.
  await c.call("GET", "jobs");
  const warm = await submit(c, `&(executable="/bin/true")(jobname="warm")`);
  for (const t = Date.now(); Date.now() - t < 30_000 && !(await inSlurm()).includes(warm.ids[0] ?? "-");) await sleep(100);
  await sleep(2000);

  const runs = [];
  for (let r = 0; r < RUNS; r++) {
    const body = xrslBatch(N, (i) => `&(executable="/bin/sleep")(arguments="30")(jobname="h${r}_${i}")`);
    const seen = new Map<string, number>();
    const restSeen = new Map<string, number>();
    const restState = new Map<string, string>();
    let ids: string[] = [];
    let refused = 0;
    let submitS = NaN;
    let sbatchPeak = 0;
    const c0 = snapshot(procs);
    const k0 = childSnapshot(procs);
    const t0 = performance.now();
    const el = () => (performance.now() - t0) / 1000;
    const sub = submit(c, body).then((x) => {
      submitS = el();
      ids = x.ids;
      refused = x.refused.length;
    });
    let squeueS: number | undefined;
    let restS: number | undefined;
    let c1 = c0;
    let k1 = k0;
    let restBusy = false;
    while (el() < TIMEOUT_S) {
      const tick = performance.now();
      sbatchPeak = Math.max(sbatchPeak, sbatchCount());
      const now = el();
      for (const id of await inSlurm()) if (!seen.has(id)) seen.set(id, now);
      // REST status in the background (never delays the squeue polls).
      if (ids.length && !restBusy && restS === undefined) {
        restBusy = true;
        void states(c, ids)
          .then((m) => {
            const at = el();
            for (const [id, s] of m) {
              restState.set(id, s);
              if (!BEFORE_LRMS.has(s) && !restSeen.has(id)) restSeen.set(id, at);
            }
            if (restSeen.size >= ids.length) restS = at;
          })
          .finally(() => (restBusy = false));
      }
      if (ids.length && squeueS === undefined && ids.every((id) => seen.has(id))) {
        squeueS = el();
        c1 = snapshot(procs);
        k1 = childSnapshot(procs);
      }
      if (squeueS !== undefined && restS !== undefined) break;
      await sleep(Math.max(0, POLL_MS - (performance.now() - tick)));
    }
    await sub;
    if (squeueS === undefined) {
      c1 = snapshot(procs);
      k1 = childSnapshot(procs);
    }
    const per = ids.map((id) => seen.get(id)).filter((x): x is number => x !== undefined);
    const restPer = ids.map((id) => restSeen.get(id)).filter((x): x is number => x !== undefined);
    const cpu = cpuDelta(c0, c1);
    const cpuChildren = cpuDelta(k0, k1);
    const window = squeueS ?? el();
    const states1: Record<string, number> = {};
    for (const s of restState.values()) states1[s] = (states1[s] ?? 0) + 1;
    const one = {
      run: r + 1,
      jobs: ids.length,
      refused,
      submitRequestSeconds: round(submitS, 3),
      allInSqueueSeconds: squeueS === undefined ? null : round(squeueS, 3),
      inSqueue: per.length,
      targetMet: squeueS !== undefined && squeueS <= TARGET_S,
      perJobSqueueSeconds: per.length
        ? { p50: round(pct(per, 50), 3), max: round(Math.max(...per), 3), first: round(Math.min(...per), 3) }
        : null,
      allPastSubmittingRestSeconds: restS === undefined ? null : round(restS, 3),
      restStates: states1,
      perJobRestSeconds: restPer.length ? { p50: round(pct(restPer, 50), 3), max: round(Math.max(...restPer), 3) } : null,
      sbatchProcessesPeak: sbatchPeak,
      cpuUntilAllInSqueue: cpu,
      // Scripts and sbatch the JEM ran and reaped in that window (CPU of its children).
      cpuChildrenUntilAllInSqueue: cpuChildren,
      jemPercent: round((cpu.jem! / window) * 100, 0),
    };
    log(
      `  run ${r + 1}: request ${one.submitRequestSeconds} s; all ${ids.length} in squeue ${squeueS === undefined ? `NOT within ${TIMEOUT_S} s (${per.length})` : `${one.allInSqueueSeconds} s`} (per job p50 ${one.perJobSqueueSeconds?.p50} max ${one.perJobSqueueSeconds?.max}); REST past SUBMITTING ${one.allPastSubmittingRestSeconds} s ${JSON.stringify(states1)}; sbatch peak ${sbatchPeak}; CPU ${JSON.stringify(cpu)} children ${JSON.stringify(cpuChildren)}`,
    );
    runs.push(one);
    await cleanUp(c, ids, sEnv);
    // The kill spent rate-limit tokens (lrms.callsPerSecond, one per job): let the bucket refill.
    if (r + 1 < RUNS) await sleep(2000);
  }

  const ok = runs.filter((x) => x.allInSqueueSeconds !== null).map((x) => x.allInSqueueSeconds!);
  const result = {
    bench: "slurm-handoff",
    jobs: N,
    targetSeconds: TARGET_S,
    allInSqueueSeconds: ok.length ? { median: round(pct(ok, 50), 3), max: round(Math.max(...ok), 3) } : null,
    targetMet: runs.every((x) => x.targetMet),
    runs,
    versions: versions(),
    loadBefore: before.loadavg,
    loadAfter: machine().loadavg,
    nproc: before.nproc,
    overrides: server.overrides,
  };
  mkdirSync(join(ROOT, "bench/results"), { recursive: true });
  writeFileSync(
    join(ROOT, "bench/results", `slurm-handoff-${new Date().toISOString().replace(/[:.]/g, "-")}.json`),
    `${JSON.stringify(result, null, 2)}\n`,
  );
  console.log(JSON.stringify(result));
} finally {
  client?.close();
  await server?.stop();
  try {
    // A start that failed half-way leaves daemons too: stop-slurm.sh stops them by their pid files.
    if (slurm) slurm.stop();
    else if (existsSync(slurmDir))
      execFileSync("bash", [join(ROOT, "scripts/slurm/stop-slurm.sh"), slurmDir, "--purge"], { stdio: "ignore" });
  } catch (e) {
    log(`slurm-handoff bench: stopping Slurm failed: ${String(e)}`);
  }
  if (state && process.env.BENCH_HANDOFF_KEEP_STATE) log(`slurm-handoff bench: state (JEM log in logs/jem.log) kept in ${state}`);
  else if (state) rmSync(state, { recursive: true, force: true });
}

/** Kills the run's jobs through REST, then scancel for anything left; waits until squeue lists none running. */
async function cleanUp(c: RestClient, ids: string[], env: NodeJS.ProcessEnv): Promise<void> {
  if (ids.length) {
    const r = await c.call("POST", "jobs?action=kill", JSON.stringify({ job: ids.map((id) => ({ id })) }), {
      "content-type": "application/json",
    });
    if (r.status !== 200 && r.status !== 201) log(`  REST kill: ${r.status} ${r.body.toString("utf8").slice(0, 200)}`);
  }
  const live = async () => (await run("squeue", ["-h", "-o", "%i"], { env })).stdout.split("\n").filter(Boolean).length;
  for (const t = Date.now(); Date.now() - t < 30_000;) {
    if ((await live()) === 0) return;
    await sleep(250);
  }
  log(`  jobs still in Slurm 30 s after the REST kill: scancel --user`);
  await run("scancel", ["-u", (await run("id", ["-un"])).stdout.trim()], { env }).catch(() => undefined);
  for (const t = Date.now(); Date.now() - t < 15_000 && (await live()) > 0;) await sleep(250);
}
