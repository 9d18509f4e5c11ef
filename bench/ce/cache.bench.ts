/**
 * Input cache benchmark (`pnpm bench`, issue 23): BENCH_CACHE_JOBS (100) jobs, each naming the same
 * BENCH_CACHE_MB (100) MB https input and the same BENCH_CACHE_SMALL (10) small ones of
 * BENCH_CACHE_SMALL_KB (64) KiB, from a loopback HTTPS origin that counts the body bytes it sends
 * (client certificate required, as a storage element would; the jobs carry the user's delegation).
 * Run twice on fresh state: without the cache (`staging.cache.dirs` empty), then with one cache dir
 * and `cache=yes` on every input. The JEM runs as a child process (its CPU is its own, not the
 * origin's) with the shipped staging defaults; only loopback is opened (`staging.allowNetworks`)
 * and the origin's CA trusted. Jobs are `/bin/true` on the fork back end, created by the gateway's
 * own sequence (@ce/controldir createJobs), as the user's, mapping off (jobs run as the CE: a cached input
 * is copied into the session, not linked; with mapping on it is a link, so less disk work).
 * Reports per run: bytes and GETs at the origin, seconds from submission until every job is past
 * staging (QUEUING/RUNNING or later), JEM CPU (utime+stime of the JEM, and of its reaped children)
 * until then, cache hits/misses. Table, JSON line, bench/results/cache-<time>.json.
 * BENCH_CACHE_ONLY=cache|nocache runs one side.
 */
import { randomFillSync, randomUUID } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { emptyDescription, type InputFile, type JobDescription, type RestState } from "../../packages/model/src/index.js";
import { JobStore, Keys, type JobRecord } from "@ce/store";
import { stopGracefully } from "../../apps/jem/test/support/child.js";
import { startOrigin, type Origin } from "@ce/testing/origin";
import { testPki, type TestPki } from "@ce/testing/storage";
import { startRedis } from "@ce/testing/redis";
import { childCpuSeconds, cpuSeconds, machine, round, sleep } from "../lib/proc.js";
import { ROOT, versions } from "../lib/servers.js";
import { benchJemState, benchJobFiles, closeBenchJemState, createAllJobs, spawnShippedJem } from "../lib/jem.js";

const JOBS = Number(process.env.BENCH_CACHE_JOBS ?? 100);
const MB = Number(process.env.BENCH_CACHE_MB ?? 100);
const SMALL = Number(process.env.BENCH_CACHE_SMALL ?? 10);
const SMALL_KB = Number(process.env.BENCH_CACHE_SMALL_KB ?? 64);
const TIMEOUT_S = Number(process.env.BENCH_CACHE_TIMEOUT_S ?? 1800);
const ONLY = process.env.BENCH_CACHE_ONLY;
const OWNER = "/DC=org/DC=test/CN=Test User";
// Not yet handed to the batch system: what "until all are running" waits out.
const STAGING: RestState[] = ["ACCEPTING", "ACCEPTED", "PREPARING", "PREPARED", "SUBMITTING"];
const log = (s: string) => console.log(s);

interface RunResult {
  mode: "nocache" | "cache";
  jobs: number;
  failed: number;
  firstFailure?: string;
  originBytes: number;
  originGets: number;
  originHeads: number;
  allPastStagingSeconds: number | null;
  jemCpuSeconds: number;
  jemChildCpuSeconds: number;
  cacheStats: Record<string, number>;
  bigInputSizeOk: boolean;
  bigInputSizeChecked: number;
}

async function run(mode: "nocache" | "cache", redisUrl: string, origin: Origin, pki: TestPki, caFile: string): Promise<RunResult> {
  const cached = mode === "cache";
  const state = await benchJemState({ redisUrl, caFile, name: "cache", cache: cached });
  const { config, prefix, jobs, control, delegations } = state;
  const redis = state.conn.redis;
  const deleg = await delegations.create(OWNER, "x509", { privateKeyPem: pki.proxy.keyPem });
  await delegations.storeProxy(deleg, OWNER, pki.proxy.filePem, Date.now() + 3_600_000, pki.proxy.chainPem);
  // Distinct paths per run: nothing one run did can serve the other.
  const big = `/${mode}/big.dat`;
  const smalls = Array.from({ length: SMALL }, (_, i) => `/${mode}/small${i}.dat`);
  const options: Record<string, string> = cached ? { cache: "yes" } : {};
  const input = (name: string, path: string): InputFile => ({ name, source: `${origin.url}${path}`, executable: false, options });
  const d: JobDescription = {
    ...emptyDescription("emies:adl"),
    executable: "/bin/true",
    inputFiles: [input("big.dat", big), ...smalls.map((p, i) => input(`small${i}.dat`, p))],
  };
  const child = await spawnShippedJem(config);
  const pid = child.pid!;
  const bytes0 = origin.sent.bytes;
  try {
    const recs = Array.from({ length: JOBS }, () =>
      JobStore.newRecord({
        id: randomUUID(),
        owner: OWNER,
        queue: "main",
        backend: "fork",
        language: d.language,
        rerun: 0,
        lifetime: 3600,
        delegations: [deleg],
        mainDelegation: deleg,
      }),
    );
    await sleep(2000); // the JEM's start-up work is not the staging's
    const cpu0 = cpuSeconds(pid);
    const kids0 = childCpuSeconds(pid);
    const t0 = performance.now();
    await createAllJobs(
      state,
      recs.map((r) => ({ record: r, files: benchJobFiles(r, d, `bench-${mode}`) })),
      log,
    );
    let seconds: number | null = null;
    let failed = 0;
    for (let last = 0; ;) {
      const c = await jobs.countByRest([...STAGING, "FAILED"]);
      const staging = STAGING.reduce((s, k) => s + (c[k] ?? 0), 0);
      failed = c.FAILED ?? 0;
      const now = performance.now();
      if (staging === 0) {
        seconds = (now - t0) / 1000;
        break;
      }
      if (now - t0 > TIMEOUT_S * 1000) break;
      if (now - last > 10_000) {
        last = now;
        log(
          `  ${mode}: after ${round((now - t0) / 1000, 0)} s ${JOBS - staging}/${JOBS} past staging, origin ${round((origin.sent.bytes - bytes0) / 2 ** 20, 0)} MiB`,
        );
      }
      await sleep(100);
    }
    const jemCpu = cpuSeconds(pid) - cpu0;
    const jemKids = childCpuSeconds(pid) - kids0;
    const all = (await jobs.getMany(recs.map((r) => r.id))).filter((r): r is JobRecord => !!r);
    const firstFailure = all.find((r) => r.failure)?.failure;
    // Every session still holding its inputs has the whole big one (a copy or a link to the cached
    // file). Stage-out leaves only the outputs in a session, so FINISHING/FINISHED ones are not looked at.
    const held = all.filter((r) => !["FAILED", "FINISHING", "FINISHED"].includes(r.rest));
    const sizeOk = held.every((r) => {
      try {
        return statSync(join(control.sessionDir(r.id), "big.dat")).size === MB * 2 ** 20;
      } catch (err) {
        log(`  ${r.id} (${r.rest}): ${String(err)}`);
        return false;
      }
    });
    const st = await redis.hgetall(new Keys(prefix).cacheStats());
    return {
      mode,
      jobs: JOBS,
      failed,
      ...(firstFailure ? { firstFailure } : {}),
      originBytes: origin.sent.bytes - bytes0,
      originGets: [big, ...smalls].reduce((s, p) => s + origin.count("GET", p), 0),
      originHeads: [big, ...smalls].reduce((s, p) => s + origin.count("HEAD", p), 0),
      allPastStagingSeconds: seconds === null ? null : round(seconds, 2),
      jemCpuSeconds: round(jemCpu, 2),
      jemChildCpuSeconds: round(jemKids, 2),
      cacheStats: Object.fromEntries(Object.entries(st).map(([k, v]) => [k, Number(v)])),
      bigInputSizeOk: sizeOk,
      bigInputSizeChecked: held.length,
    };
  } finally {
    await stopGracefully(child);
    await closeBenchJemState(state);
  }
}

const before = machine();
log(
  `cache bench: ${JOBS} jobs × (one ${MB} MB input + ${SMALL} of ${SMALL_KB} KiB), load ${before.loadavg.join(" ")}, ${before.nproc} CPUs`,
);
const pki = testPki();
const origin = await startOrigin(pki);
const caDir = mkdtempSync("/tmp/ce-bench-cache-ca-");
const caFile = join(caDir, "ca.pem");
writeFileSync(caFile, pki.ca.certPem);
// Generated in memory (random, so nothing along the way can shortcut it), never written to the repo.
const bigBody = randomFillSync(Buffer.allocUnsafe(MB * 2 ** 20));
for (const mode of ["nocache", "cache"]) {
  origin.files.set(`/${mode}/big.dat`, bigBody);
  for (let i = 0; i < SMALL; i++) origin.files.set(`/${mode}/small${i}.dat`, randomFillSync(Buffer.allocUnsafe(SMALL_KB * 1024)));
}
const redis = await startRedis();
const runs: RunResult[] = [];
try {
  for (const mode of ["nocache", "cache"] as const) {
    if (ONLY && ONLY !== mode) continue;
    log(`== ${mode}`);
    const r = await run(mode, redis.url, origin, pki, caFile);
    log(`  ${JSON.stringify(r)}`);
    runs.push(r);
  }
} finally {
  await redis.stop();
  await origin.close();
  rmSync(caDir, { recursive: true, force: true });
}

const mib = (b: number) => round(b / 2 ** 20, 1);
const row = (label: string, f: (r: RunResult) => string | number | null) => `| ${label} | ${runs.map((r) => String(f(r))).join(" | ")} |`;
log(
  `\n| ${JOBS} jobs, ${MB} MB + ${SMALL} × ${SMALL_KB} KiB | ${runs.map((r) => (r.mode === "cache" ? "cache=yes" : "no cache")).join(" | ")} |`,
);
log(`|---|${runs.map(() => "---").join("|")}|`);
log(row("MiB read from the origin", (r) => mib(r.originBytes)));
log(row("GETs / HEADs at the origin", (r) => `${r.originGets} / ${r.originHeads}`));
log(row("s until all past staging", (r) => r.allPastStagingSeconds ?? "timeout"));
log(row("JEM CPU s (+ children)", (r) => `${r.jemCpuSeconds} (+${r.jemChildCpuSeconds})`));
log(row("failed jobs", (r) => r.failed));
const result = {
  bench: "cache",
  jobs: JOBS,
  bigMb: MB,
  small: SMALL,
  smallKb: SMALL_KB,
  versions: versions(),
  loadBefore: before.loadavg,
  loadAfter: machine().loadavg,
  nproc: before.nproc,
  runs,
  ok: runs.every((r) => r.failed === 0 && r.allPastStagingSeconds !== null && r.bigInputSizeOk),
};
mkdirSync(join(ROOT, "bench/results"), { recursive: true });
writeFileSync(
  join(ROOT, "bench/results", `cache-${new Date().toISOString().replace(/[:.]/g, "-")}.json`),
  `${JSON.stringify(result, null, 2)}\n`,
);
console.log(JSON.stringify(result));
