/**
 * End to end with a per-job timeline (`pnpm bench`; alone: `node --import tsx bench/ce/e2e.bench.ts`):
 * the CE as `./ce start` runs it (shipped defaults, fork back end), one unmeasured warm-up job,
 * then BENCH_E2E_RUNS (5) rounds of BENCH_E2E_JOBS (100) `/bin/true` jobs in one REST request,
 * polled by bulk status every BENCH_E2E_POLL_MS (20) until all are terminal.
 *
 * The timeline of each job comes from the JEM's own records, not from the client's polling:
 * - submit: the client's send of the request; `accepted`: its 201 reply;
 * - every state move, with the time of its (grouped) "state changes" line in `logs/jem.log`
 *   (written in the event-loop turn after the move committed);
 * - `done`: the mtime of the job's `lrms_done` marker (written by the job wrapper when the job ends).
 * Per round it prints the median and p95 of each step's gap over the jobs (e.g. PREPARING →
 * SUBMITTING, SUBMITTING → INLRMS, INLRMS → done marker, done marker → FINISHING) and the wall
 * time to the last job terminal as the client saw it. A loaded machine stretches the CPU work of
 * every step; to tell waits from CPU starvation, the JEM's main thread is sampled every ~5 ms
 * (`/proc/<pid>/stat` state: R = running or runnable, anything else = waiting on a timer, Redis,
 * a file thread, a child) from the request until the last job is FINISHED. Stretches of 20 ms and
 * more in which it waited while jobs were unfinished are listed with the step most jobs were in:
 * a wait the code chose (a timer, a poll, a batching window) shows there, CPU starvation does not.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { loadConfig } from "@ce/config";
import { ControlDir } from "@ce/controldir";
import { machine, pct, round, settle, sleep } from "../lib/proc.js";
import { RestClient, TERMINAL, states, submit, xrslBatch } from "../lib/rest.js";
import { ROOT, startCe, versions } from "../lib/servers.js";

const JOBS = Number(process.env.BENCH_E2E_JOBS ?? 100);
const RUNS = Number(process.env.BENCH_E2E_RUNS ?? 5);
const POLL_MS = Number(process.env.BENCH_E2E_POLL_MS ?? 20);
const TIMEOUT_S = Number(process.env.BENCH_E2E_TIMEOUT_S ?? 120);
const log = (s: string) => console.log(s);

interface Line {
  time: number;
  msg: string;
  moves?: Record<string, string[]>;
  jobId?: string;
  from?: string;
  to?: string;
}

/** Each job's move times (`FROM -> TO` → epoch ms) from the JEM log lines after byte `offset`. */
function movesFromLog(file: string, offset: number): Map<string, Map<string, number>> {
  const out = new Map<string, Map<string, number>>();
  const put = (id: string, move: string, t: number) => {
    let m = out.get(id);
    if (!m) out.set(id, (m = new Map()));
    if (!m.has(move)) m.set(move, t);
  };
  for (const raw of readFileSync(file).subarray(offset).toString("utf8").split("\n")) {
    if (!raw.startsWith("{")) continue;
    let l: Line;
    try {
      l = JSON.parse(raw) as Line;
    } catch {
      continue;
    }
    if (l.msg === "state changes" && l.moves) for (const [mv, ids] of Object.entries(l.moves)) for (const id of ids) put(id, mv, l.time);
    else if (l.msg === "state change" && l.jobId && l.from && l.to) put(l.jobId, `${l.from} -> ${l.to}`, l.time);
  }
  return out;
}

const stateDir = mkdtempSync("/tmp/ce-bench-e2e-");
const server = await startCe(stateDir, { log });
const cfg = loadConfig({ env: { ...process.env, ...server.env, CE_CONFIG: join(stateDir, "ce.yaml") } });
const control = new ControlDir(cfg.paths.controlDir, cfg.paths.sessionRoot);
const jemLog = join(stateDir, "logs/jem.log");
const client = new RestClient({
  base: server.base,
  credFile: join(stateDir, "pki/user/proxy.pem"),
  caFile: join(stateDir, "pki/ca/ca.pem"),
  sockets: 2,
});

type Round = {
  seconds: number;
  states: Record<string, number>;
  gaps: Record<string, { p50: number; p95: number; n: number }>;
  /** Share of the JEM main thread's samples in state R up to the last move. */
  jemRunning: number;
  waits: Array<{ from: number; ms: number; step: string }>;
};
const rounds: Round[] = [];
try {
  const before = machine();
  log(`e2e bench: ${RUNS} × ${JOBS} /bin/true in one request (load ${before.loadavg.join(" ")}, ${before.nproc} CPUs)`);
  // Warm-up: one job through every step (TLS, identity cache, module loading, JIT of the paths).
  const warm = (
    await submit(
      client,
      xrslBatch(1, () => `&(executable="/bin/true")(jobname="warm")`),
    )
  ).ids;
  for (let t0 = Date.now(); Date.now() - t0 < 60_000; await sleep(100))
    if ([...(await states(client, warm)).values()].every((s) => TERMINAL.has(s))) break;
  for (let r = 0; r < RUNS; r++) {
    await settle(server.procs, { maxMs: 10_000 });
    const offset = statSync(jemLog).size;
    const jemPid = server.procs.jem![0]!;
    const samples: Array<[number, boolean]> = [];
    let sampling = true;
    void (async () => {
      while (sampling) {
        let running = false;
        try {
          running = readFileSync(`/proc/${jemPid}/stat`, "utf8").split(") ")[1]!.startsWith("R");
        } catch {
          /* gone */
        }
        samples.push([Date.now(), running]);
        await sleep(5);
      }
    })();
    const t0 = Date.now();
    const { ids } = await submit(
      client,
      xrslBatch(JOBS, (i) => `&(executable="/bin/true")(jobname="e2e${i}")`),
    );
    const tAccepted = Date.now();
    const terminalAt = new Map<string, number>();
    let last = new Map<string, string>();
    while (terminalAt.size < ids.length && Date.now() - t0 < TIMEOUT_S * 1000) {
      last = await states(client, ids);
      const now = Date.now();
      for (const [id, s] of last) if (TERMINAL.has(s) && !terminalAt.has(id)) terminalAt.set(id, now);
      if (terminalAt.size < ids.length) await sleep(POLL_MS);
    }
    const seconds = (Math.max(...terminalAt.values()) - t0) / 1000;
    await sleep(300); // the last log lines (written a turn after their move) and the file's flush
    sampling = false;
    const moves = movesFromLog(jemLog, offset);
    // The JEM's waits: stretches of samples not running, up to the last FINISHED move.
    const lastMove = Math.max(t0, ...[...moves.values()].flatMap((m) => [...m.values()]));
    const waits: Array<{ from: number; ms: number; step: string }> = [];
    let busy = 0;
    let inWindow = 0;
    const stepAt = (t: number) => {
      // The state most of the round's jobs were in at `t` (their last move before it).
      const n: Record<string, number> = {};
      for (const id of ids) {
        let st = "ACCEPTED";
        let at = -Infinity;
        for (const [mv, tm] of moves.get(id) ?? []) if (tm <= t && tm > at) [st, at] = [mv.split(" -> ")[1]!, tm];
        n[st] = (n[st] ?? 0) + 1;
      }
      return Object.entries(n)
        .sort((a, b) => b[1] - a[1])
        .map(([k, v]) => `${k}:${v}`)
        .slice(0, 3)
        .join(" ");
    };
    for (let i = 0; i < samples.length; i++) {
      const [t, running] = samples[i]!;
      if (t > lastMove) break;
      inWindow++;
      if (running) busy++;
      if (running) continue;
      let j = i;
      while (j + 1 < samples.length && !samples[j + 1]![1] && samples[j + 1]![0] <= lastMove) j++;
      const ms = samples[j]![0] - t;
      if (ms >= 20) waits.push({ from: t - t0, ms, step: stepAt(t) });
      i = j;
    }
    const gapLists: Record<string, number[]> = {};
    const add = (k: string, v: number | undefined) => v !== undefined && Number.isFinite(v) && (gapLists[k] ??= []).push(v);
    for (const id of ids) {
      const m = moves.get(id) ?? new Map<string, number>();
      // The moves in the order they happened, each as a gap from the previous point.
      let done: number | undefined;
      try {
        done = statSync(control.file(id, "lrms_done")).mtimeMs;
      } catch {
        /* not there (failed before the batch system, or already cleaned) */
      }
      const points: Array<[string, number]> = [["submit", t0]];
      points.push(["201", tAccepted]);
      for (const [mv, t] of m) points.push([mv.split(" -> ")[1]!, t]);
      if (done !== undefined) points.push(["done marker", done]);
      points.push(["client sees terminal", terminalAt.get(id) ?? NaN]);
      points.sort((a, b) => a[1] - b[1]);
      for (let i = 1; i < points.length; i++) add(`step ${points[i - 1]![0]} → ${points[i]![0]}`, points[i]![1] - points[i - 1]![1]);
      for (const [name, t] of points.slice(1)) add(`at   ${name}`, t - t0);
    }
    const gaps: Round["gaps"] = {};
    for (const [k, v] of Object.entries(gapLists)) gaps[k] = { p50: round(pct(v, 50), 0), p95: round(pct(v, 95), 0), n: v.length };
    const count: Record<string, number> = {};
    for (const s of last.values()) count[s] = (count[s] ?? 0) + 1;
    const jemRunning = round(busy / Math.max(1, inWindow), 2);
    rounds.push({ seconds: round(seconds, 3), states: count, gaps, jemRunning, waits });
    log(`round ${r + 1}: all ${ids.length} terminal after ${round(seconds, 3)} s ${JSON.stringify(count)} (load ${machine().loadavg[0]})`);
    for (const [k, g] of Object.entries(gaps).sort((a, b) => (a[0] < b[0] ? -1 : 1)))
      log(`  ${k.padEnd(48)} p50 ${g.p50} ms  p95 ${g.p95} ms  (${g.n})`);
    log(`  JEM main thread running or runnable in ${Math.round(jemRunning * 100)} % of the samples; its waits of 20 ms or more:`);
    for (const w of waits) log(`    at ${w.from} ms: ${w.ms} ms  (jobs in ${w.step})`);
  }
  const secs = rounds.map((r) => r.seconds);
  const out = {
    bench: "e2e",
    jobs: JOBS,
    runs: RUNS,
    medianSeconds: pct(secs, 50),
    rangeSeconds: [Math.min(...secs), Math.max(...secs)],
    rounds,
    machine: { before, after: machine() },
    versions: versions(),
  };
  const dir = join(ROOT, "bench/results");
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, `e2e-${new Date().toISOString().replace(/[:.]/g, "-")}.json`), `${JSON.stringify(out, null, 1)}\n`);
  log(`e2e: median ${out.medianSeconds} s over ${RUNS} rounds, range ${out.rangeSeconds.join("–")} s`);
  console.log(JSON.stringify({ bench: "e2e", medianSeconds: out.medianSeconds, rangeSeconds: out.rangeSeconds }));
} finally {
  client.agent.destroy();
  await server.stop();
  rmSync(stateDir, { recursive: true, force: true });
}
