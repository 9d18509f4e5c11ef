/**
 * Gateway benchmark: `node --import tsx apps/gateway/bench/gateway.bench.ts`
 *
 * Starts a private redis-server and the gateway as a separate process (so its RSS is its own),
 * then measures: bulk xRSL submission (100 jobs per request), bulk status of 1,000 ids, bulk
 * status of 500 ids (JSON and XML) and bulk info of 100 ids as bench:arex sends them, 8 clients
 * of one identity looping bulk status of 50 ids (req/s, server CPU per request: gateway and
 * redis-server), GET /jobs of one owner with 100,000 jobs, and the gateway's peak RSS. Prints
 * one JSON line at the end. Targets: ≥ 1,000 jobs/s, status p50 ≤ 50 ms, list ≤ 500 ms,
 * RSS ≤ 200 MB; against A-REX: status 500 p50 ≤ 5 ms, info 100 p50 ≤ 3 ms, loop ≥ 1,600 req/s at
 * ≤ 0.3 ms server CPU per request.
 *
 * Knobs: BENCH_SUBMIT_JOBS, BENCH_SUBMIT_CONCURRENCY, BENCH_STATUS_LOOP_MS, BENCH_LIST_JOBS
 * (0 skips the listing), BENCH_RATE_LIMIT (requests/s per identity; unset: the shipped default),
 * BENCH_LOG_LEVEL (gateway log level; unset: the shipped info), BENCH_RUNTIME=tsx (sources
 * instead of the bundle), BENCH_BUNDLE_DIR (where the bundle is built), BENCH_ENTRY (run this
 * gateway build instead), BENCH_NODE_ARGS (gateway node flags, e.g. `--cpu-prof
 * --cpu-prof-dir=/tmp/prof`), BENCH_DIR (state directory, e.g. /dev/shm).
 */
import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { closeSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { Agent, request } from "node:https";
import { loadavg } from "node:os";
import { join, resolve } from "node:path";
import { Redis } from "ioredis";
import { JobStore } from "@ce/store";
import { freePort } from "@ce/testing";
import { startRedis } from "@ce/testing/redis";
import { GATEWAY_NODE_FLAGS } from "../src/server.js";
import { createPki, XRSL } from "../test/harness.js";

const ROOT = resolve(import.meta.dirname, "../../..");
const SUBMIT_JOBS = Number(process.env.BENCH_SUBMIT_JOBS ?? 3000);
const PER_REQUEST = 100;
const SUBMIT_CONCURRENCY = Number(process.env.BENCH_SUBMIT_CONCURRENCY ?? 4);
const LIST_JOBS = Number(process.env.BENCH_LIST_JOBS ?? 100_000);
const STATUS_LOOP_MS = Number(process.env.BENCH_STATUS_LOOP_MS ?? 5_000);

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
};
const round = (x: number, d = 1) => Math.round(x * 10 ** d) / 10 ** d;

/** The gateway as it is deployed: the build of scripts/build-app.ts (BENCH_RUNTIME=tsx: sources). */
async function bundle(): Promise<string> {
  const { buildApp } = await import("../../../scripts/build-app.js");
  // BENCH_BUNDLE_DIR: a private build directory (two benches building into one directory at once collide).
  return buildApp("gateway", process.env.BENCH_BUNDLE_DIR || join(ROOT, "apps/gateway/node_modules/.cache/ce-bench"));
}

async function main() {
  const redis = await startRedis();
  // Control and session directories live where `./ce start` keeps them: on the work tree's file
  // system (here under node_modules/.cache). BENCH_DIR overrides, e.g. /dev/shm or a shared FS.
  const cacheDir = join(ROOT, "apps/gateway/node_modules/.cache");
  mkdirSync(cacheDir, { recursive: true });
  const dir = mkdtempSync(join(process.env.BENCH_DIR || cacheDir, "ce-bench-state-"));
  const pki = createPki();
  const port = await freePort();
  const prefix = "{bench}";
  const config = {
    endpoint: { url: `https://localhost:${port}/arex` },
    paths: { stateDir: dir },
    redis: { url: redis.url, prefix },
    gateway: {
      host: "127.0.0.1",
      port,
      tls: { certFile: pki.hostCertFile, keyFile: pki.hostKeyFile },
      // The shipped per-identity rate limit unless BENCH_RATE_LIMIT says otherwise (0 disables).
      limits: {
        jobsPerSubmission: 1000,
        idsPerRequest: 10_000,
        ...(process.env.BENCH_RATE_LIMIT ? { requestsPerSecond: Number(process.env.BENCH_RATE_LIMIT) } : {}),
      },
    },
    auth: { caDir: pki.caDir },
    delegations: { keyPoolSize: 0, encryptionKey: Buffer.alloc(32, 1).toString("base64") },
    jobs: { maxTotal: 1_000_000 },
    // The shipped level (info: one access-log line per request, written to a file as `./ce start` does).
    logging: { level: process.env.BENCH_LOG_LEVEL || "info" },
    // Its own admin port: the default one may be taken by a CE already running on this machine.
    admin: { port: await freePort() },
  };
  const cfgFile = join(dir, "config.json");
  writeFileSync(cfgFile, JSON.stringify(config));
  // BENCH_ENTRY: a gateway build kept from before a change (before/after on the same machine).
  const entry = process.env.BENCH_ENTRY
    ? [process.env.BENCH_ENTRY]
    : process.env.BENCH_RUNTIME === "tsx"
      ? ["--import", "tsx", join(ROOT, "apps/gateway/src/main.ts")]
      : [await bundle()];
  const nodeArgs = process.env.BENCH_NODE_ARGS?.split(" ").filter(Boolean) ?? GATEWAY_NODE_FLAGS;
  const logFile = join(dir, "gateway.log");
  const logFd = openSync(logFile, "a");
  const child = spawn(process.execPath, [...nodeArgs, ...entry], {
    cwd: ROOT,
    env: { ...process.env, CE_CONFIG: cfgFile },
    stdio: ["ignore", logFd, logFd],
  });
  closeSync(logFd);
  let rssMax = 0;
  const sampleRss = () => {
    try {
      const kb = Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${child.pid}/status`, "utf8"))?.[1] ?? 0);
      rssMax = Math.max(rssMax, kb / 1024);
    } catch {
      /* process gone */
    }
  };
  const rssTimer = setInterval(sampleRss, 50);
  // Gateway CPU time (user+sys, ms) from /proc: a load-independent cost figure.
  const cpuMs = () => {
    const f = readFileSync(`/proc/${child.pid}/stat`, "utf8").split(") ")[1]!.split(" ");
    return ((Number(f[11]) + Number(f[12])) * 1000) / 100;
  };
  // redis-server's CPU too: a request's cost is the gateway's and the store's.
  const rc = new Redis(redis.url);
  const redisPid = Number(/process_id:(\d+)/.exec(await rc.info("server"))?.[1]);
  await rc.quit();
  const redisCpuMs = () => {
    const f = readFileSync(`/proc/${redisPid}/stat`, "utf8").split(") ")[1]!.split(" ");
    return ((Number(f[11]) + Number(f[12])) * 1000) / 100;
  };
  const serverCpuMs = () => cpuMs() + redisCpuMs();

  const agent = (who: "alice" | "bob") =>
    new Agent({ keepAlive: true, maxSockets: 16, rejectUnauthorized: false, cert: pki.creds[who]!.cert, key: pki.creds[who]!.key });
  const agents = { alice: agent("alice"), bob: agent("bob") };
  const call = (method: string, path: string, body?: string, who: "alice" | "bob" = "alice", headers: Record<string, string> = {}) =>
    new Promise<{ status: number; text: string }>((res, rej) => {
      const req = request(
        { host: "127.0.0.1", port, method, path, agent: agents[who], headers: { accept: "application/json", ...headers } },
        (r) => {
          const chunks: Buffer[] = [];
          r.on("data", (d: Buffer) => chunks.push(d));
          r.on("end", () => res({ status: r.statusCode ?? 0, text: Buffer.concat(chunks).toString("utf8") }));
        },
      );
      req.on("error", rej);
      req.end(body);
    });

  try {
    for (let i = 0; ; i++) {
      try {
        if ((await call("GET", "/arex/rest")).status === 200) break;
      } catch {
        if (i > 200) throw new Error("gateway did not start");
        await new Promise((r) => setTimeout(r, 100));
      }
    }

    sampleRss();
    console.log(`gateway RSS after start: ${round(rssMax, 0)} MB`);
    // 1. Bulk submission.
    const body =
      "+" +
      Array.from(
        { length: PER_REQUEST },
        (_, i) => `(${XRSL(`bench${i}`, '(inputfiles=("in.dat" ""))(outputfiles=("out.txt" ""))')})`,
      ).join("");
    await call("POST", "/arex/rest/1.0/jobs?action=new", body); // warm-up (JIT, first files)
    const ids: string[] = [];
    const requests = Math.ceil(SUBMIT_JOBS / PER_REQUEST);
    let next = 0;
    const t0 = performance.now();
    const cpu0 = cpuMs();
    await Promise.all(
      Array.from({ length: SUBMIT_CONCURRENCY }, async () => {
        while (next < requests) {
          next++;
          const r = await call("POST", "/arex/rest/1.0/jobs?action=new", body, "alice", { "content-type": "application/rsl" });
          if (r.status !== 201) throw new Error(`submission: ${r.status} ${r.text.slice(0, 200)}`);
          for (const j of JSON.parse(r.text).job) if (j["status-code"] === "201") ids.push(j.id);
        }
      }),
    );
    const submitS = (performance.now() - t0) / 1000;
    const jobsPerS = ids.length / submitS;
    const cpuPerJob = (cpuMs() - cpu0) / ids.length;
    console.log(
      `bulk submission: ${ids.length} jobs in ${round(submitS, 2)} s → ${round(jobsPerS, 0)} jobs/s (${PER_REQUEST}/request, ${SUBMIT_CONCURRENCY} parallel); gateway CPU ${round(cpuPerJob, 2)} ms/job; load ${loadavg()[0]!.toFixed(1)}`,
    );

    console.log(`gateway RSS max so far: ${round(rssMax, 0)} MB`);
    // 2. Bulk status of 1,000 ids.
    const statusBody = JSON.stringify({ job: ids.slice(0, 1000).map((id) => ({ id })) });
    const lat: number[] = [];
    for (let i = 0; i < 55; i++) {
      const s = performance.now();
      const r = await call("POST", "/arex/rest/1.1/jobs?action=status", statusBody, "alice", { "content-type": "application/json" });
      if (r.status !== 201) throw new Error(`status: ${r.status}`);
      if (i >= 5) lat.push(performance.now() - s);
    }
    console.log(`bulk status (1,000 ids): p50 ${round(pct(lat, 50))} ms, p99 ${round(pct(lat, 99))} ms over ${lat.length} requests`);

    // 2a. As bench:arex sends them (bench/arex/workloads.ts): status of 500 ids JSON and XML, info of 100.
    const timedCalls = async (n: number, warm: number, fn: () => Promise<void>) => {
      const out: number[] = [];
      const c0 = serverCpuMs();
      const g0 = cpuMs();
      for (let i = 0; i < n + warm; i++) {
        const s = performance.now();
        await fn();
        if (i >= warm) out.push(performance.now() - s);
      }
      return {
        p50: round(pct(out, 50), 2),
        cpuMs: round((serverCpuMs() - c0) / (n + warm), 3),
        gatewayCpuMs: round((cpuMs() - g0) / (n + warm), 3),
      };
    };
    const st500 = ids.slice(0, 500);
    const expect2xx = (r: { status: number; text: string }, what: string) => {
      if (r.status < 200 || r.status > 299) throw new Error(`${what}: ${r.status} ${r.text.slice(0, 200)}`);
    };
    const sj = JSON.stringify({ job: st500.map((id) => ({ id })) });
    const sx = `<jobs>${st500.map((id) => `<job><id>${id}</id></job>`).join("")}</jobs>`;
    const statusJ = await timedCalls(40, 5, async () =>
      expect2xx(
        await call("POST", "/arex/rest/1.1/jobs?action=status", sj, "alice", {
          "content-type": "application/json",
          accept: "application/json",
        }),
        "status json",
      ),
    );
    const statusX = await timedCalls(40, 5, async () =>
      expect2xx(
        await call("POST", "/arex/rest/1.1/jobs?action=status", sx, "alice", {
          "content-type": "application/xml",
          accept: "application/xml",
        }),
        "status xml",
      ),
    );
    const ij = JSON.stringify({ job: ids.slice(0, 100).map((id) => ({ id })) });
    const info = await timedCalls(30, 3, async () =>
      expect2xx(await call("POST", "/arex/rest/1.1/jobs?action=info", ij, "alice", { "content-type": "application/json" }), "info"),
    );
    const cpuOf = (r: { cpuMs: number; gatewayCpuMs: number }) => `server CPU ${r.cpuMs} ms, gateway ${r.gatewayCpuMs}`;
    console.log(
      `bulk status (500 ids): JSON p50 ${statusJ.p50} ms (${cpuOf(statusJ)}), XML p50 ${statusX.p50} ms (${cpuOf(statusX)}); bulk info (100 ids): p50 ${info.p50} ms (${cpuOf(info)})`,
    );

    // 2b. 8 keep-alive clients looping bulk status of 50 ids (server CPU per request).
    const loopAgents = Array.from(
      { length: 8 },
      () =>
        new Agent({ keepAlive: true, maxSockets: 1, rejectUnauthorized: false, cert: pki.creds.alice!.cert, key: pki.creds.alice!.key }),
    );
    let loops = 0;
    const codes: Record<number, number> = {};
    const loopCpu0 = cpuMs();
    const loopRedis0 = redisCpuMs();
    const loopT0 = performance.now();
    await Promise.all(
      loopAgents.map(async (ag, k) => {
        const body = JSON.stringify({ job: ids.slice(k * 50, k * 50 + 50).map((id) => ({ id })) });
        while (performance.now() - loopT0 < STATUS_LOOP_MS) {
          const r = await new Promise<number>((res, rej) => {
            const req = request(
              {
                host: "127.0.0.1",
                port,
                method: "POST",
                path: "/arex/rest/1.0/jobs?action=status",
                agent: ag,
                headers: { accept: "application/json", "content-type": "application/json" },
              },
              (rr) => {
                rr.resume();
                rr.on("end", () => res(rr.statusCode === 429 ? -Number(rr.headers["retry-after"] ?? 1) : (rr.statusCode ?? 0)));
              },
            );
            req.on("error", rej);
            req.end(body);
          });
          // A 429 is counted and obeyed (as bench:arex does), anything else but 201 is a failure.
          codes[r < 0 ? 429 : r] = (codes[r < 0 ? 429 : r] ?? 0) + 1;
          if (r < 0) await new Promise((w) => setTimeout(w, -r * 1000));
          else if (r !== 201) throw new Error(`status loop: ${r}`);
          else loops++;
        }
      }),
    );
    const loopS = (performance.now() - loopT0) / 1000;
    const loopCpuMsPerRequest = (cpuMs() - loopCpu0) / loops;
    const loopRedisMsPerRequest = (redisCpuMs() - loopRedis0) / loops;
    for (const ag of loopAgents) ag.destroy();
    console.log(
      `8 clients looping status of 50: ${round(loops / loopS, 0)} req/s, CPU per request: gateway ${round(loopCpuMsPerRequest, 3)} ms + redis ${round(loopRedisMsPerRequest, 3)} ms; codes ${JSON.stringify(codes)}`,
    );

    console.log(`gateway RSS max so far: ${round(rssMax, 0)} MB`);
    // 3. GET /jobs with 100,000 jobs of one owner (records created directly in Redis; BENCH_LIST_JOBS=0: an empty list).
    const r2 = new Redis(redis.url);
    const store = new JobStore(r2, prefix);
    for (let i = 0; i < LIST_JOBS; i += 1000) {
      const recs = Array.from({ length: 1000 }, () =>
        JobStore.newRecord({
          id: randomUUID(),
          owner: pki.dn.bob,
          queue: "main",
          backend: "fork",
          language: "nordugrid:xrsl",
          delegations: [],
          rerun: 0,
          lifetime: 3600,
        }),
      );
      await store.create(recs, 1_000_000);
    }
    await r2.quit();
    const listTimes: number[] = [];
    let listCount = 0;
    for (let i = 0; i < 3; i++) {
      const s = performance.now();
      const r = await call("GET", "/arex/rest/1.1/jobs", undefined, "bob");
      listTimes.push(performance.now() - s);
      listCount = JSON.parse(r.text).job.length;
    }
    const listMs = pct(listTimes, 50);
    console.log(`GET /jobs (${listCount} jobs): median ${round(listMs, 0)} ms (runs: ${listTimes.map((x) => round(x, 0)).join(", ")})`);
    sampleRss();
    console.log(`gateway RSS: max ${round(rssMax, 0)} MB`);

    const result = {
      submitJobsPerSecond: round(jobsPerS, 0),
      submittedJobs: ids.length,
      submitCpuMsPerJob: round(cpuPerJob, 2),
      loadAvg: round(loadavg()[0]!, 1),
      statusP50Ms: round(pct(lat, 50)),
      statusP99Ms: round(pct(lat, 99)),
      statusLoopReqPerSecond: round(loops / loopS, 0),
      statusLoopCpuMsPerRequest: round(loopCpuMsPerRequest, 3),
      statusLoopRedisCpuMsPerRequest: round(loopRedisMsPerRequest, 3),
      statusLoopCodes: codes,
      status500JsonP50Ms: statusJ.p50,
      status500XmlP50Ms: statusX.p50,
      info100P50Ms: info.p50,
      info100ServerCpuMs: info.cpuMs,
      listMs: round(listMs, 0),
      listJobs: listCount,
      rssMaxMB: round(rssMax, 0),
      targets: { submit: jobsPerS >= 1000, statusP50: pct(lat, 50) <= 50, list: listMs <= 500, rss: rssMax <= 200 },
    };
    console.log(JSON.stringify(result));
  } catch (e) {
    // The gateway's own account of the failure (its log is removed with the state directory).
    console.error(
      readFileSync(logFile, "utf8")
        .split("\n")
        .filter((l) => !l.includes('"msg":"request"'))
        .slice(-20)
        .join("\n"),
    );
    throw e;
  } finally {
    clearInterval(rssTimer);
    agents.alice.destroy();
    agents.bob.destroy();
    child.kill("SIGTERM");
    await new Promise((r) => child.once("exit", r));
    await redis.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
