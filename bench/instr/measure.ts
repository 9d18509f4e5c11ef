/**
 * CPU instructions per operation of the CE's own processes, counted by valgrind's callgrind (this VM
 * exposes no hardware counters to `perf stat -e instructions`: it answers `<not supported>`).
 * bench/README.md says why instruction counts and how the figures are made stable.
 *
 * The CE runs as `./ce start` runs it (embedded Redis, the JEM on the fork back end, the built
 * gateway, shipped defaults), except that the gateway and the JEM start under
 * `valgrind --tool=callgrind --instr-atstart=no` (scripts/dev/component.ts, CE_DEV_WRAP_*) with
 * V8's `--single-threaded --predictable-gc-schedule`. Counting is switched on only once both are
 * ready; each operation then gets a fixed number of unmeasured warm-up rounds (JIT tiering in V8
 * follows call counts, so a fixed count reaches the same tier every run), the counters are zeroed,
 * the measured rounds run, and the counters are dumped (`callgrind_control -z` / `-d`). The same
 * process's instructions over a window of the same length with no requests (timers, heartbeats)
 * are subtracted. Only the process that does the operation is counted: the gateway for the REST
 * operations, the JEM for a job's path (its children, the job wrappers, are not traced).
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { machine, pct, round, sleep } from "../lib/proc.js";
import { RestClient, TERMINAL, states, statusJson, submit, xrslBatch } from "../lib/rest.js";
import { startCe } from "../lib/servers.js";

export interface Figure {
  /** Instructions per unit, idle baseline subtracted. */
  instructions: number;
  unit: string;
  /** Median wall time of one measured round, ms (under valgrind: read as relative only). */
  wallMs: number;
  rounds: number;
  process: "gateway" | "jem";
}

export interface Sizes {
  warm: number;
  rounds: number;
  /** Jobs per request for submission and for the JEM path. */
  jobs: number;
  sessionMiB: number;
}

/** BENCH_INSTR_ONLY=status100,jemJob,…: only those figures (submission always runs: the others use its jobs). */
const only = process.env.BENCH_INSTR_ONLY?.split(",");
export const wanted = (figure: string) => !only || only.includes(figure);

export const SMALL: Sizes = { warm: 6, rounds: 4, jobs: 10, sessionMiB: 1 };

/**
 * V8 without background threads (compilation and marking happen on the main thread, at points the
 * program's own progress decides, not the scheduler), a fixed 16 MiB semi-space (young collections
 * every 16 MiB allocated, not at a size V8 picks by survival rates and time), an old generation
 * that starts large enough for the whole run (no old-generation collection started by its limit),
 * no memory reducer (a timer-driven collection when the process looks idle).
 */
const V8_FLAGS = "--single-threaded --min-semi-space-size=16 --max-semi-space-size=16 --initial-old-space-size=200 --no-memory-reducer";

/**
 * Work that no request causes and whose moment is the clock's, taken out of every dump (its
 * inclusive cost): V8's incremental marking run as a timer task (an old-generation collection in
 * progress steps along on a timer, so whether and how much of it lands in a window depends on the
 * clock). Young-generation collections stay in: with a fixed semi-space they follow allocation.
 */
const BACKGROUND = ["v8::internal::IncrementalMarkingJob::Task::RunInternal()"];

/** Instructions of callgrind's newest dump of `pid` in `dir`, less the BACKGROUND functions'. */
function lastDump(dir: string, pid: number): { total: number; background: number } {
  const dumps = readdirSync(dir)
    .filter((f) => f.startsWith(`cg.${pid}.out.`))
    .sort((a, b) => Number(a.split(".").pop()) - Number(b.split(".").pop()));
  const f = dumps.at(-1);
  if (!f) throw new Error(`no callgrind dump of ${pid} in ${dir}`);
  const text = execFileSync("callgrind_annotate", ["--inclusive=yes", "--threshold=100", join(dir, f)], {
    encoding: "utf8",
    maxBuffer: 256 * 1024 * 1024,
  });
  const num = (s: string) => Number(s.replace(/,/g, ""));
  const m = /^\s*([\d,]+)\s+\(100\.0%\)\s+PROGRAM TOTALS/m.exec(text);
  if (!m) throw new Error(`${f}: no PROGRAM TOTALS line`);
  let background = 0;
  for (const fn of BACKGROUND) {
    const at = text.split("\n").find((l) => l.includes(`:${fn} [`));
    const b = at ? /^\s*([\d,]+)\s/.exec(at) : undefined;
    if (b) background += num(b[1]!);
  }
  return { total: num(m[1]!) - background, background };
}

const control = (flag: string, pid: number) =>
  execFileSync("callgrind_control", [flag, String(pid)], { stdio: "ignore", timeout: 120_000 });

/**
 * Counts `pid`'s instructions over `rounds` calls of `op` after `warm` unmeasured ones, minus its
 * idle instructions over the same wall time. Returns per-round instructions and the median wall time.
 */
async function count(
  dir: string,
  pid: number,
  warm: number,
  rounds: number,
  op: () => Promise<void>,
): Promise<{ perRound: number; wallMs: number; idlePerS: number }> {
  for (let i = 0; i < warm; i++) await op();
  // Idle rate: the same process with nothing asked of it.
  control("-z", pid);
  const i0 = performance.now();
  await sleep(2000);
  control("-d", pid);
  const idlePerS = lastDump(dir, pid).total / ((performance.now() - i0) / 1000);
  control("-z", pid);
  const t0 = performance.now();
  const walls: number[] = [];
  for (let i = 0; i < rounds; i++) {
    const t = performance.now();
    await op();
    walls.push(performance.now() - t);
  }
  control("-d", pid);
  const total = lastDump(dir, pid).total - idlePerS * ((performance.now() - t0) / 1000);
  return { perRound: total / rounds, wallMs: pct(walls, 50), idlePerS };
}

export async function measure(sizes: Sizes, log: (s: string) => void): Promise<Record<string, Figure>> {
  const stateDir = mkdtempSync("/tmp/ce-bench-instr-");
  const cgDir = join(stateDir, "callgrind");
  execFileSync("mkdir", ["-p", cgDir]);
  const wrap = `valgrind --tool=callgrind --instr-atstart=no --quiet --callgrind-out-file=${cgDir}/cg.%p.out`;
  const server = await startCe(stateDir, {
    log,
    extraEnv: {
      CE_DEV_WRAP_GATEWAY: wrap,
      CE_DEV_WRAP_JEM: wrap,
      CE_DEV_NODE_ARGS_GATEWAY: V8_FLAGS,
      CE_DEV_NODE_ARGS_JEM: V8_FLAGS,
      CE_START_TIMEOUT: "900",
      // No delegation key pool: it makes 16 RSA keys at start on the thread pool, random primes at a
      // random cost, while the operations are measured (no measured operation takes a key).
      CE__DELEGATIONS__KEY_POOL_SIZE: "0",
    },
    // Both processes start under valgrind (module loading 20-100× slower): minutes on a loaded VM.
    startTimeoutS: 900,
  });
  const gw = server.procs.gateway![0]!;
  const jem = server.procs.jem![0]!;
  const client = new RestClient({
    base: server.base,
    credFile: join(stateDir, "pki/user/proxy.pem"),
    caFile: join(stateDir, "pki/ca/ca.pem"),
    sockets: 1,
  });
  const out: Record<string, Figure> = {};
  try {
    execFileSync("callgrind_control", ["-i", "on", String(gw)], { stdio: "ignore", timeout: 120_000 });
    execFileSync("callgrind_control", ["-i", "on", String(jem)], { stdio: "ignore", timeout: 120_000 });
    const ok = (r: { status: number; body: Buffer }, what: string) => {
      if (r.status < 200 || r.status > 299) throw new Error(`${what}: ${r.status} ${r.body.toString("utf8").slice(0, 200)}`);
    };
    await client.call("GET", "jobs");
    const held = (name: string) => `&(executable="/bin/true")(jobname="${name}")(inputfiles=("in.dat" "")("big.dat" ""))`;

    // Submission: `jobs` jobs per request, each waiting for an upload (the JEM does nothing for them).
    log("instr: submission");
    const all: string[] = [];
    const sub = await count(cgDir, gw, sizes.warm, sizes.rounds, async () => {
      // Under valgrind on a loaded VM the gateway's Redis calls can pass its command timeout: it
      // answers 503 (nothing created), and the request is sent again (logged: it adds to the count).
      let r: Awaited<ReturnType<typeof submit>> | undefined;
      for (let attempt = 1; !r; attempt++) {
        try {
          r = await submit(
            client,
            xrslBatch(sizes.jobs, (i) => held(`instr${i}`)),
          );
        } catch (e) {
          if (attempt >= 5 || !/submission: 503/.test((e as Error).message)) throw e;
          log(`instr: submission answered 503, again (${attempt})`);
          await sleep(1000);
        }
      }
      if (r.ids.length !== sizes.jobs) throw new Error(`submission: ${r.refused.length} refused`);
      all.push(...r.ids);
    });
    out.submit = {
      instructions: sub.perRound / sizes.jobs,
      unit: "job",
      wallMs: round(sub.wallMs, 1),
      rounds: sizes.rounds,
      process: "gateway",
    };

    // Bulk status of 100 ids and bulk info of 100 ids, always the same ids.
    const ids = all.slice(0, 100);
    log("instr: bulk status, info");
    if (wanted("status100")) {
      const st = await count(cgDir, gw, sizes.warm * 2, sizes.rounds * 2, async () =>
        ok(await client.call("POST", "jobs?action=status", statusJson(ids), { "content-type": "application/json" }), "status"),
      );
      out.status100 = {
        instructions: st.perRound,
        unit: "request of 100 ids",
        wallMs: round(st.wallMs, 2),
        rounds: sizes.rounds * 2,
        process: "gateway",
      };
    }
    if (wanted("info100")) {
      const inf = await count(cgDir, gw, sizes.warm * 2, sizes.rounds * 2, async () =>
        ok(await client.call("POST", "jobs?action=info", statusJson(ids), { "content-type": "application/json" }), "info"),
      );
      out.info100 = {
        instructions: inf.perRound,
        unit: "request of 100 ids",
        wallMs: round(inf.wallMs, 2),
        rounds: sizes.rounds * 2,
        process: "gateway",
      };
    }

    // Session PUT and GET of sessionMiB into a held job (not one of its inputs' final upload: big.dat is
    // written again and again, in.dat stays missing, so the job keeps waiting).
    if (wanted("sessionPut") || wanted("sessionGet")) {
      log("instr: session PUT, GET");
      const tid = ids[0]!;
      const chunk = Buffer.alloc(1024 * 1024);
      for (let i = 0; i < chunk.length; i += 4) chunk.writeUInt32LE((i * 2654435761) >>> 0, i);
      const bytes = sizes.sessionMiB * 1024 * 1024;
      const put = await count(cgDir, gw, Math.ceil(sizes.warm / 2), sizes.rounds, async () =>
        ok(await client.putStream(`jobs/${tid}/session/big.dat`, bytes, chunk), "session PUT"),
      );
      out.sessionPut = {
        instructions: put.perRound / sizes.sessionMiB,
        unit: "MiB",
        wallMs: round(put.wallMs, 1),
        rounds: sizes.rounds,
        process: "gateway",
      };
      const get = await count(cgDir, gw, Math.ceil(sizes.warm / 2), sizes.rounds, async () => {
        const g = await client.getCount(`jobs/${tid}/session/big.dat`);
        if (g.status !== 200 || g.bytes !== bytes) throw new Error(`session GET: ${g.status}, ${g.bytes} bytes`);
      });
      out.sessionGet = {
        instructions: get.perRound / sizes.sessionMiB,
        unit: "MiB",
        wallMs: round(get.wallMs, 1),
        rounds: sizes.rounds,
        process: "gateway",
      };
    }

    // One job's JEM path: `jobs` /bin/true jobs in one request, from submission to FINISHED.
    if (wanted("jemJob")) {
      log("instr: JEM path");
      const run = async () => {
        const r = await submit(
          client,
          xrslBatch(sizes.jobs, (i) => `&(executable="/bin/true")(jobname="run${i}")`),
        );
        for (let t0 = Date.now(); ; await sleep(200)) {
          const s = await states(client, r.ids);
          if ([...s.values()].every((x) => TERMINAL.has(x))) {
            const bad = [...s.values()].filter((x) => x !== "FINISHED");
            if (bad.length) throw new Error(`JEM path: ${bad.length} jobs not FINISHED (${bad[0]})`);
            break;
          }
          if (Date.now() - t0 > 600_000) throw new Error("JEM path: jobs not terminal in 600 s");
        }
        await sleep(500); // the JEM's last writes after FINISHED (files, releases)
      };
      // The JEM path is the slowest under valgrind (every job's files, Redis calls, script runs): one
      // warm-up round, two measured.
      const jp = await count(cgDir, jem, 1, 2, run);
      out.jemJob = {
        instructions: jp.perRound / sizes.jobs,
        unit: "job",
        wallMs: round(jp.wallMs, 0),
        rounds: Math.max(2, Math.ceil(sizes.rounds / 2)),
        process: "jem",
      };
    }
    for (const f of Object.values(out)) f.instructions = Math.round(f.instructions);
    log(`instr: done (load ${machine().loadavg.join(" ")})`);
    return out;
  } finally {
    client.agent.destroy();
    await server.stop();
    rmSync(stateDir, { recursive: true, force: true });
  }
}
