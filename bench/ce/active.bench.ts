/**
 * Whole-CE benchmark at scale (`pnpm bench`): the CE as `./ce start` runs it (embedded Redis, JEM
 * with the fork back end, built gateway; shipped defaults except the capacity limits that would
 * refuse the jobs: `quotas.jobsPerOwner` and `jobs.maxTotal`), BENCH_ACTIVE_JOBS (default 100,000)
 * xRSL jobs submitted 500 per request over REST, each waiting for a client upload. Measures:
 * - submission rate and the server CPU split by process (gateway, JEM, Redis), during the requests
 *   and until every job is in its first waiting state;
 * - the time from the last submission until no job is ACCEPTING any more (each one either PREPARING,
 *   waiting for its upload, or ACCEPTED, held by `jobs.maxActivePerOwner`);
 * - JEM and gateway RSS, Redis bytes per job (INFO used_memory delta / jobs), GET /jobs latency;
 * - the CPU of the JEM and Redis over BENCH_ACTIVE_IDLE_S (30) s afterwards, while nothing happens.
 * Prints one JSON line at the end and writes it to bench/results/active-*.json.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { loadConfig } from "@ce/config";
import { JobStore, connectRedis } from "@ce/store";
import { cpuDelta, machine, pct, round, rssMb, sleep, snapshot } from "../lib/proc.js";
import { RestClient, items, submit, xrslBatch, type JobItem } from "../lib/rest.js";
import { ROOT, startCe, versions } from "../lib/servers.js";

const N = Number(process.env.BENCH_ACTIVE_JOBS ?? 100_000);
const PER_REQUEST = 500;
const CONCURRENCY = Number(process.env.BENCH_ACTIVE_CONCURRENCY ?? 2);
const WAIT_TIMEOUT_S = Number(process.env.BENCH_ACTIVE_TIMEOUT_S ?? 600);
const IDLE_S = Number(process.env.BENCH_ACTIVE_IDLE_S ?? 30);
const log = (s: string) => console.log(s);

const state = mkdtempSync("/tmp/ce-bench-active-");
const room = String(N + 1_000);
const server = await startCe(state, { log, extraEnv: { CE__QUOTAS__JOBS_PER_OWNER: room, CE__JOBS__MAX_TOTAL: room } });
const cfg = loadConfig({ env: { ...process.env, ...server.env, CE_CONFIG: join(state, "ce.yaml") } });
const conn = connectRedis(cfg.redis, "ceadm");
const store = new JobStore(conn.redis, cfg.redis.prefix);
const client = new RestClient({
  base: server.base,
  credFile: join(state, "pki/user/proxy.pem"),
  caFile: join(state, "pki/ca/ca.pem"),
  sockets: CONCURRENCY,
});
const procs = server.procs;
const rssPeak: Record<string, number> = { gateway: 0, jem: 0 };
const sampler = setInterval(() => {
  for (const role of ["gateway", "jem"]) rssPeak[role] = Math.max(rssPeak[role]!, ...procs[role]!.map(rssMb));
}, 250);
const usedMemory = async () => Number(/used_memory:(\d+)/.exec(await conn.redis.info("memory"))?.[1] ?? NaN);

try {
  const before = machine();
  log(
    `active-jobs bench: ${N} jobs, ${PER_REQUEST}/request, ${CONCURRENCY} in parallel (load ${before.loadavg.join(" ")}, ${before.nproc} CPUs)`,
  );
  // Warm-up (TLS, identity cache, JIT), then the baseline.
  await client.call("GET", "jobs");
  await sleep(2000);
  const mem0 = await usedMemory();
  const body = xrslBatch(PER_REQUEST, (i) => `&(executable="/bin/true")(jobname="active${i}")(inputfiles=("in.dat" ""))`);
  const refused: JobItem[] = [];
  let created = 0;
  let next = 0;
  const requests = Math.ceil(N / PER_REQUEST);
  const c0 = snapshot(procs);
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < requests) {
        const k = next++;
        const r = await submit(client, body);
        created += r.ids.length;
        refused.push(...r.refused);
        if ((k + 1) % 20 === 0) log(`  ${created} submitted after ${round((performance.now() - t0) / 1000)} s`);
      }
    }),
  );
  const submitS = (performance.now() - t0) / 1000;
  const c1 = snapshot(procs);
  log(
    `  ${created} jobs in ${round(submitS, 2)} s → ${round(created / submitS, 0)} jobs/s; ${refused.length} refused${refused[0] ? ` (${JSON.stringify(refused[0])})` : ""}`,
  );

  // Until no job is ACCEPTING: each one waits for its upload (PREPARING) or for the owner limit (ACCEPTED).
  const tw = performance.now();
  let counts: Record<string, number> = {};
  let waitingS: number | undefined;
  for (let last = 0; ;) {
    counts = await store.countByRest(["ACCEPTING", "ACCEPTED", "PREPARING", "PREPARED"]);
    if ((counts.ACCEPTING ?? 0) === 0) {
      waitingS = (performance.now() - tw) / 1000;
      break;
    }
    if (performance.now() - tw > WAIT_TIMEOUT_S * 1000) break;
    if (performance.now() - last > 10_000) {
      last = performance.now();
      log(`  after ${round((performance.now() - tw) / 1000, 0)} s: ${JSON.stringify(counts)}`);
    }
    await sleep(500);
  }
  const c2 = snapshot(procs);
  log(
    waitingS === undefined
      ? `  NOT all in a waiting state after ${WAIT_TIMEOUT_S} s: ${JSON.stringify(counts)}`
      : `  all in a waiting state ${round(waitingS, 1)} s after the last submission: ${JSON.stringify(counts)}`,
  );

  const mem1 = await usedMemory();
  const listMs: number[] = [];
  let listed = 0;
  for (let i = 0; i < 3; i++) {
    const t = performance.now();
    const r = await client.call("GET", "jobs");
    listMs.push(performance.now() - t);
    listed = items((JSON.parse(r.body.toString("utf8")) as { job?: JobItem | JobItem[] }).job).length;
  }
  log(`  GET /jobs (${listed}): ${listMs.map((x) => round(x, 0)).join(", ")} ms`);

  // Nothing happens now: what do the JEM and Redis do on their own?
  const i0 = snapshot(procs);
  await sleep(IDLE_S * 1000);
  const idle = cpuDelta(i0, snapshot(procs));
  const mem2 = await usedMemory();
  const rssNow = { gateway: round(Math.max(...procs.gateway!.map(rssMb)), 0), jem: round(Math.max(...procs.jem!.map(rssMb)), 0) };
  log(
    `  ${waitingS === undefined ? "not idle (jobs still ACCEPTING), " : ""}idle ${IDLE_S} s: CPU ${JSON.stringify(idle)} (JEM ${round((idle.jem! / IDLE_S) * 100, 1)}%, Redis ${round((idle.redis! / IDLE_S) * 100, 1)}% of a core)`,
  );

  const result = {
    bench: "active",
    jobs: created,
    refused: refused.length,
    versions: versions(),
    loadBefore: before.loadavg,
    loadAfter: machine().loadavg,
    nproc: before.nproc,
    overrides: server.overrides,
    submit: {
      seconds: round(submitS, 2),
      jobsPerSecond: round(created / submitS, 0),
      cpuDuring: cpuDelta(c0, c1),
      cpuUntilWaiting: cpuDelta(c0, c2),
      cpuMsPerJob: round((cpuDelta(c0, c2).total! * 1000) / Math.max(1, created), 3),
    },
    allWaitingAfterSeconds: waitingS === undefined ? null : round(waitingS, 1),
    countsAtEnd: counts,
    rssMb: { peak: { gateway: round(rssPeak.gateway!, 0), jem: round(rssPeak.jem!, 0) }, atRest: rssNow },
    redisBytesPerJob: {
      afterWaiting: round((mem1 - mem0) / Math.max(1, created), 0),
      afterIdle: round((mem2 - mem0) / Math.max(1, created), 0),
      usedMemoryMb: round(mem2 / 2 ** 20, 0),
    },
    listMs: { p50: round(pct(listMs, 50), 0), runs: listMs.map((x) => round(x, 0)), jobs: listed },
    // Only a quiet period when every job had reached its waiting state before it began.
    idle: {
      seconds: IDLE_S,
      afterAllWaiting: waitingS !== undefined,
      cpu: idle,
      jemPercent: round((idle.jem! / IDLE_S) * 100, 1),
      redisPercent: round((idle.redis! / IDLE_S) * 100, 1),
    },
  };
  mkdirSync(join(ROOT, "bench/results"), { recursive: true });
  writeFileSync(
    join(ROOT, "bench/results", `active-${new Date().toISOString().replace(/[:.]/g, "-")}.json`),
    `${JSON.stringify(result, null, 2)}\n`,
  );
  console.log(JSON.stringify(result));
} finally {
  clearInterval(sampler);
  client.close();
  await conn.close();
  await server.stop();
  rmSync(state, { recursive: true, force: true });
}
