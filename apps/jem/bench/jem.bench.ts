/**
 * JEM benchmark (`pnpm bench`): 1,000 trivial fork jobs end to end (jobs/s), latency from the
 * batch job's end (`lrms_done` mtime) to FINISHED (p50/p99), and the RSS of a JEM holding
 * 10,000 active jobs. The JEM runs as a child process (its RSS is measured alone); jobs are created
 * by the gateway's own sequence (@ce/controldir createJobs). Targets: ≥ 50 jobs/s, ≤ 1 s, ≤ 300 MB. Last line: JSON.
 */
import { type ChildProcess } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtemp, readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { compileConfig, type CompiledConfig } from "@ce/config";
import { emptyDescription, type JobDescription } from "@ce/model";
import { JobStore, type JobRecord } from "@ce/store";
import { ControlDir } from "@ce/controldir";
import { benchJobFiles, createAllJobs } from "../../../bench/lib/jem.js";
import { startRedis } from "@ce/testing/redis";
import { spawnJem, stopGracefully } from "../test/support/child.js";

const N_JOBS = Number(process.env.BENCH_JOBS ?? 1_000);
const N_ACTIVE = Number(process.env.BENCH_ACTIVE ?? 10_000);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function setup(redisUrl: string, extra: Record<string, unknown> = {}) {
  const stateDir = await mkdtemp(join(tmpdir(), "jem-bench-"));
  const prefix = `{b${randomUUID().slice(0, 6)}}`;
  const config = compileConfig(
    {
      paths: { stateDir },
      redis: { url: redisUrl, prefix },
      lrms: { backend: "fork", pollIntervalMs: 1_000, callsPerSecond: 1_000 },
      jobs: { maxInLrms: 20_000, maxActivePerOwner: 20_000 },
      logging: { level: "silent" },
      ...extra,
    },
    stateDir,
  );
  const redis = new Redis(redisUrl, { maxRetriesPerRequest: null });
  const jobs = new JobStore(redis, prefix);
  const control = new ControlDir(config.paths.controlDir, config.paths.sessionRoot);
  await control.ensureRoots();
  return { config, redis, jobs, control, stateDir };
}
type Env = Awaited<ReturnType<typeof setup>>;

/** Jobs through the gateway's own sequence (@ce/controldir `createJobs`), in batches of 500. */
async function createJobs(env: Env, n: number, desc: Partial<JobDescription>): Promise<string[]> {
  const d: JobDescription = { ...emptyDescription("emies:adl"), ...desc };
  const recs = Array.from({ length: n }, () =>
    JobStore.newRecord({
      id: randomUUID(),
      owner: "/CN=bench",
      queue: "main",
      backend: env.config.lrms.backend,
      language: d.language,
      rerun: 0,
      lifetime: 3600,
      delegations: [],
    }),
  );
  await createAllJobs(
    env,
    recs.map((r, i) => ({ record: r, files: benchJobFiles(r, d, `bench-${i - (i % 500)}`) })),
    (line) => console.warn(line),
  );
  return recs.map((r) => r.id);
}

async function rssMb(pid: number): Promise<number> {
  const m = /VmRSS:\s+(\d+) kB/.exec(await readFile(`/proc/${pid}/status`, "utf8"));
  return m ? Number(m[1]) / 1024 : NaN;
}

function pct(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
}

async function throughput(redisUrl: string, backend: "fork" | "instant") {
  const env = await setup(redisUrl, process.env.BENCH_CONCURRENCY ? { jem: { concurrency: Number(process.env.BENCH_CONCURRENCY) } } : {});
  const child = await spawnJem(env.config as CompiledConfig, backend === "instant" ? { JEM_CHILD_BACKEND: "instant" } : {});
  try {
    const t0 = Date.now();
    const ids = await createJobs(env, N_JOBS, { executable: "/bin/true" });
    let last = -1;
    for (;;) {
      const c = await env.jobs.countByRest(["FINISHED", "FAILED", "KILLED"]);
      const done = (c.FINISHED ?? 0) + (c.FAILED ?? 0) + (c.KILLED ?? 0);
      if (done >= N_JOBS) break;
      if (done !== last && Math.floor(done / 200) !== Math.floor(last / 200))
        console.log(`  ${done}/${N_JOBS} jobs ended after ${((Date.now() - t0) / 1000).toFixed(1)} s`);
      last = done;
      if (Date.now() - t0 > 600_000) throw new Error("throughput run did not finish in 10 min");
      await sleep(100);
    }
    const seconds = (Date.now() - t0) / 1000;
    const recs = (await env.jobs.getMany(ids)).filter((r): r is JobRecord => !!r);
    const failed = recs.filter((r) => r.rest !== "FINISHED").length;
    const lat: number[] = [];
    await Promise.all(
      recs.map(async (r) => {
        const s = await stat(env.control.file(r.id, "lrms_done")).catch(() => undefined);
        if (s) lat.push(r.stateSince - s.mtimeMs);
      }),
    );
    lat.sort((a, b) => a - b);
    return {
      jobs: N_JOBS,
      failed,
      seconds,
      jobsPerSecond: N_JOBS / seconds,
      p50Ms: pct(lat, 50),
      p99Ms: pct(lat, 99),
      rssMb: await rssMb(child.pid!),
    };
  } finally {
    await stopGracefully(child);
    await cleanup(env);
  }
}

async function memory(redisUrl: string) {
  const env = await setup(redisUrl);
  const child: ChildProcess = await spawnJem(env.config as CompiledConfig, { JEM_CHILD_BACKEND: "null" });
  try {
    const t0 = Date.now();
    await createJobs(env, N_ACTIVE, { executable: "/bin/true" });
    for (;;) {
      const c = await env.jobs.countByRest(["RUNNING"]);
      if ((c.RUNNING ?? 0) >= N_ACTIVE) break;
      if (Date.now() - t0 > 900_000) throw new Error("active jobs did not all reach RUNNING");
      await sleep(500);
    }
    console.log(`  ${N_ACTIVE} jobs RUNNING after ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    let peak = 0;
    for (let i = 0; i < 20; i++) {
      peak = Math.max(peak, await rssMb(child.pid!));
      await sleep(500); // several poll + scan cycles over all jobs
    }
    return { activeJobs: N_ACTIVE, rssMb: peak };
  } finally {
    await stopGracefully(child);
    await cleanup(env);
  }
}

async function cleanup(env: Env) {
  await env.redis.quit();
  await rm(env.stateDir, { recursive: true, force: true });
}

const redis = await startRedis();
try {
  console.log(`throughput: ${N_JOBS} fork jobs (/bin/true)`);
  const t = await throughput(redis.url, "fork");
  console.log(
    `  ${t.jobsPerSecond.toFixed(1)} jobs/s, lrms_done→FINISHED p50 ${t.p50Ms.toFixed(0)} ms p99 ${t.p99Ms.toFixed(0)} ms, failed ${t.failed}`,
  );
  console.log(`JEM core: ${N_JOBS} jobs on a back end that ends them at submission`);
  const core = await throughput(redis.url, "instant");
  console.log(
    `  ${core.jobsPerSecond.toFixed(1)} jobs/s, lrms_done→FINISHED p50 ${core.p50Ms.toFixed(0)} ms p99 ${core.p99Ms.toFixed(0)} ms`,
  );
  console.log(`memory: ${N_ACTIVE} active jobs`);
  const m = await memory(redis.url);
  console.log(`  JEM RSS ${m.rssMb.toFixed(0)} MB`);
  const result = {
    bench: "jem",
    jobsPerSecond: Number(t.jobsPerSecond.toFixed(1)),
    finishLatencyP50Ms: Math.round(t.p50Ms),
    finishLatencyP99Ms: Math.round(t.p99Ms),
    failed: t.failed,
    coreJobsPerSecond: Number(core.jobsPerSecond.toFixed(1)),
    coreFinishLatencyP99Ms: Math.round(core.p99Ms),
    rssMbActive10k: Math.round(m.rssMb),
    targets: { jobsPerSecond: 50, finishLatencyP99Ms: 1000, rssMb: 300 },
    ok: t.jobsPerSecond >= 50 && t.p99Ms <= 1000 && m.rssMb <= 300 && t.failed === 0,
  };
  console.log(JSON.stringify(result));
} finally {
  await redis.stop();
}
