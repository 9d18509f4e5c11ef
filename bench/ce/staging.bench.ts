/**
 * Staging throughput benchmark (`pnpm bench`, issue 22): BENCH_STAGING_JOBS (100) jobs, each with
 * BENCH_STAGING_INPUTS (10) distinct inputs of BENCH_STAGING_MB (10) MiB over davs:// from a real
 * Apache mod_dav on loopback, and one output of the same size uploaded to a real xrootd (anonymous)
 * over root://. The cache is off (no cache dirs), so every byte moves. The JEM runs as a child
 * process (its CPU is its own, not Apache's or xrootd's) with the shipped staging defaults (10
 * transfers at once, 5 per owner) and lease timings; only loopback is opened
 * (`staging.allowNetworks`) and the test CA trusted. The jobs belong to BENCH_STAGING_OWNERS (2)
 * owners, each with its delegated proxy, so the per-owner share does not hide the JEM's whole
 * transfer concurrency. Each job is `/bin/cp f0.dat out.dat` on the fork back end.
 * Measured: seconds from submission until every job is past stage-in and until every job is
 * FINISHED, bytes moved, MiB/s, JEM CPU (utime+stime; its reaped children — xrdcp, the jobs —
 * apart) and CPU per GiB. Then the floor: the same downloads with one `curl --parallel` process
 * (at most maxConcurrentTransfers connections) and the uploads with one `xrdcp` per file, as many
 * at once, timed and charged the same way. Table, JSON line, bench/results/staging-<time>.json.
 * BENCH_STAGING_ONLY=jem|floor runs one side. Without Apache or xrootd: skipped, exit 0.
 */
import { execFile } from "node:child_process";
import { randomFillSync, randomUUID } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { compileConfig } from "@ce/config";
import { JobStore, type JobRecord } from "@ce/store";
import { createProxy, issueHostCert, issueUserCert } from "@ce/x509/testing";
import { emptyDescription, type JobDescription, type RestState } from "../../packages/model/src/index.js";
import { haveApache, startApache, type Apache } from "@ce/testing/apache";
import { stopGracefully } from "../../apps/jem/test/support/child.js";
import { testPki } from "@ce/testing/storage";
import { haveXrootd, startXrootd, type Xrootd } from "@ce/testing/xrootd";
import { startRedis } from "@ce/testing/redis";
import { childCpuSeconds, cpuSeconds, machine, round, sleep } from "../lib/proc.js";
import { ROOT, versions } from "../lib/servers.js";
import { benchJemState, benchJobFiles, closeBenchJemState, createAllJobs, spawnShippedJem } from "../lib/jem.js";

const JOBS = Number(process.env.BENCH_STAGING_JOBS ?? 100);
const INPUTS = Number(process.env.BENCH_STAGING_INPUTS ?? 10);
const MB = Number(process.env.BENCH_STAGING_MB ?? 10);
const OWNERS = Number(process.env.BENCH_STAGING_OWNERS ?? 2);
const TIMEOUT_S = Number(process.env.BENCH_STAGING_TIMEOUT_S ?? 1800);
const ONLY = process.env.BENCH_STAGING_ONLY;
const SIZE = MB * 2 ** 20;
const STAGE_IN: RestState[] = ["ACCEPTING", "ACCEPTED", "PREPARING", "PREPARED", "SUBMITTING"];
const LATER: RestState[] = ["QUEUING", "RUNNING", "EXECUTED", "FINISHING", "FINISHED", "FAILED"];
const log = (s: string) => console.log(s);
const exec = promisify(execFile);

if (!haveApache() || !haveXrootd()) {
  log("staging bench: SKIPPED — needs apache2 with mod_dav and xrootd-server + xrootd-client, as root (scripts/ensure-system-deps.sh)");
  process.exit(0);
}

interface Side {
  wallSeconds: number;
  inBytes: number;
  outBytes: number;
  mibPerSecond: number;
  cpuSeconds: number;
  cpuPerGiB: number;
  /** CPU seconds per wall second while downloading (the JEM: its own, until all are past stage-in). */
  coresDownloading: number;
}

interface JemResult extends Side {
  stageInSeconds: number | null;
  stageInMibPerSecond: number | null;
  jemCpuSeconds: number;
  jemChildCpuSeconds: number;
  jemCpuStageIn: number;
  cpuWithChildrenPerGiB: number;
  finished: number;
  failed: number;
  firstFailure?: string;
  apacheGets200: number;
  outputsOk: number;
}

interface FloorResult extends Side {
  downloadSeconds: number;
  downloadMibPerSecond: number;
  downloadCpuSeconds: number;
  uploadSeconds: number;
  uploadMibPerSecond: number;
  uploadCpuSeconds: number;
  concurrency: number;
}

const mib = (b: number) => b / 2 ** 20;
const inputPath = (job: number, i: number) => `/in/j${job}/f${i}.dat`;
const gets200 = async (apache: Apache) => (await apache.requests()).filter((q) => q.method === "GET" && q.status === 200).length;

function side(wall: number, inBytes: number, outBytes: number, cpu: number, downCpu: number, downWall: number): Side {
  const total = inBytes + outBytes;
  return {
    coresDownloading: round(downCpu / downWall, 2),
    wallSeconds: round(wall, 2),
    inBytes,
    outBytes,
    mibPerSecond: round(mib(total) / wall, 1),
    cpuSeconds: round(cpu, 2),
    cpuPerGiB: round(cpu / (total / 2 ** 30), 2),
  };
}

/** At most `n` of `tasks` at once. */
async function pool(n: number, tasks: Array<() => Promise<void>>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(n, tasks.length) }, async () => {
      while (next < tasks.length) await tasks[next++]!();
    }),
  );
}

/** curl and xrdcp run directly on the same files, charged as this process' reaped children. */
async function floor(apache: Apache, xrd: Xrootd, caFile: string, concurrency: number): Promise<FloorResult> {
  const dir = mkdtempSync("/tmp/ce-bench-staging-floor-");
  try {
    const cfg = join(dir, "curl.cfg");
    const lines: string[] = [];
    for (let j = 0; j < JOBS; j++)
      for (let i = 0; i < INPUTS; i++)
        lines.push(`url = "${apache.httpsUrl}${inputPath(j, i)}"`, `output = "${join(dir, `j${j}-f${i}.dat`)}"`);
    writeFileSync(cfg, `${lines.join("\n")}\n`);
    const c0 = childCpuSeconds(process.pid);
    const t0 = performance.now();
    await exec("curl", ["-sS", "--fail", "--cacert", caFile, "--parallel", "--parallel-max", String(concurrency), "-K", cfg]);
    const t1 = performance.now();
    const c1 = childCpuSeconds(process.pid);
    for (let j = 0; j < JOBS; j++)
      for (let i = 0; i < INPUTS; i++) {
        const got = statSync(join(dir, `j${j}-f${i}.dat`)).size;
        if (got !== SIZE) throw new Error(`curl: j${j}-f${i}.dat has ${got} bytes, not ${SIZE}`);
      }
    const uploads = Array.from({ length: JOBS }, (_, j) => async () => {
      await exec("xrdcp", ["-s", "-f", join(dir, `j${j}-f0.dat`), `${xrd.url}//floor/j${j}.dat`]);
    });
    const t2 = performance.now();
    await pool(concurrency, uploads);
    const t3 = performance.now();
    const c2 = childCpuSeconds(process.pid);
    const inBytes = JOBS * INPUTS * SIZE;
    const outBytes = JOBS * SIZE;
    for (let j = 0; j < JOBS; j++) {
      const got = statSync(join(xrd.dataDir, "floor", `j${j}.dat`)).size;
      if (got !== SIZE) throw new Error(`xrdcp: floor/j${j}.dat has ${got} bytes, not ${SIZE}`);
    }
    const downWall = (t1 - t0) / 1000;
    const upWall = (t3 - t2) / 1000;
    return {
      ...side(downWall + upWall, inBytes, outBytes, c2 - c0, c1 - c0, downWall),
      downloadSeconds: round(downWall, 2),
      downloadMibPerSecond: round(mib(inBytes) / downWall, 1),
      downloadCpuSeconds: round(c1 - c0, 2),
      uploadSeconds: round(upWall, 2),
      uploadMibPerSecond: round(mib(outBytes) / upWall, 1),
      uploadCpuSeconds: round(c2 - c1, 2),
      concurrency,
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
    rmSync(join(xrd.dataDir, "floor"), { recursive: true, force: true });
  }
}

async function jem(redisUrl: string, apache: Apache, xrd: Xrootd, caFile: string, pki: ReturnType<typeof testPki>): Promise<JemResult> {
  const state = await benchJemState({ redisUrl, caFile, name: "staging" });
  const { config, jobs, delegations } = state;
  const owners: Array<{ dn: string; deleg: string }> = [];
  for (let o = 0; o < OWNERS; o++) {
    const dn = o === 0 ? "/DC=org/DC=test/CN=Test User" : `/DC=org/DC=test/CN=Bench User ${o}`;
    const user = o === 0 ? pki.user : issueUserCert(pki.ca, { dn });
    const proxy = o === 0 ? pki.proxy : createProxy(user, user.key, { lifetimeSeconds: 3600 });
    const deleg = await delegations.create(dn, "x509", { privateKeyPem: proxy.keyPem });
    await delegations.storeProxy(deleg, dn, proxy.filePem, Date.now() + 3_600_000, proxy.chainPem);
    owners.push({ dn, deleg });
  }
  const davs = apache.httpsUrl.replace("https://", "davs://");
  const description = (j: number): JobDescription => ({
    ...emptyDescription("emies:adl"),
    executable: "/bin/cp",
    arguments: ["f0.dat", "out.dat"],
    inputFiles: Array.from({ length: INPUTS }, (_, i) => ({
      name: `f${i}.dat`,
      source: `${davs}${inputPath(j, i)}`,
      executable: false,
      options: {},
    })),
    outputFiles: [
      { name: "out.dat", target: `${xrd.url}//jem/j${j}.dat`, options: {}, useIfSuccess: true, useIfFailure: false, useIfCancel: false },
    ],
  });
  const child = await spawnShippedJem(config);
  const pid = child.pid!;
  try {
    const recs = Array.from({ length: JOBS }, (_, j) => {
      const o = owners[j % OWNERS]!;
      return JobStore.newRecord({
        id: randomUUID(),
        owner: o.dn,
        queue: "main",
        backend: "fork",
        language: "emies:adl",
        rerun: 0,
        lifetime: 3600,
        delegations: [o.deleg],
        mainDelegation: o.deleg,
      });
    });
    const entries = recs.map((r, j) => ({ record: r, files: benchJobFiles(r, description(j), "bench-staging") }));
    const gets0 = await gets200(apache);
    await sleep(2000); // the JEM's start-up work is not the staging's
    const cpu0 = cpuSeconds(pid);
    const kids0 = childCpuSeconds(pid);
    const t0 = performance.now();
    await createAllJobs(state, entries, log);
    let stageIn: number | null = null;
    let cpuStageIn = 0;
    let end: number | null = null;
    let c: Record<string, number> = {};
    for (let last = 0; ;) {
      c = await jobs.countByRest([...STAGE_IN, ...LATER]);
      const now = performance.now();
      const staging = STAGE_IN.reduce((s, k) => s + (c[k] ?? 0), 0);
      if (stageIn === null && staging === 0) {
        stageIn = (now - t0) / 1000;
        cpuStageIn = cpuSeconds(pid) - cpu0;
      }
      if ((c.FINISHED ?? 0) + (c.FAILED ?? 0) === JOBS) {
        end = (now - t0) / 1000;
        break;
      }
      if (now - t0 > TIMEOUT_S * 1000) break;
      if (now - last > 10_000) {
        last = now;
        const by = Object.entries(c)
          .filter(([, n]) => n > 0)
          .map(([k, n]) => `${k} ${n}`)
          .join(", ");
        log(`  after ${round((now - t0) / 1000, 0)} s: ${by}`);
      }
      await sleep(100);
    }
    const jemCpu = cpuSeconds(pid) - cpu0;
    const jemKids = childCpuSeconds(pid) - kids0;
    const all = (await jobs.getMany(recs.map((r) => r.id))).filter((r): r is JobRecord => !!r);
    const firstFailure = all.find((r) => r.failure)?.failure;
    let outputsOk = 0;
    for (let j = 0; j < JOBS; j++) {
      try {
        if (statSync(join(xrd.dataDir, "jem", `j${j}.dat`)).size === SIZE) outputsOk++;
      } catch {
        /* not uploaded: counted as missing */
      }
    }
    const wall = end ?? (performance.now() - t0) / 1000;
    const inBytes = JOBS * INPUTS * SIZE;
    const total = inBytes + JOBS * SIZE;
    return {
      ...side(wall, inBytes, JOBS * SIZE, jemCpu, cpuStageIn, stageIn ?? wall),
      cpuWithChildrenPerGiB: round((jemCpu + jemKids) / (total / 2 ** 30), 2),
      stageInSeconds: stageIn === null ? null : round(stageIn, 2),
      stageInMibPerSecond: stageIn === null ? null : round(mib(inBytes) / stageIn, 1),
      jemCpuSeconds: round(jemCpu, 2),
      jemChildCpuSeconds: round(jemKids, 2),
      jemCpuStageIn: round(cpuStageIn, 2),
      finished: c.FINISHED ?? 0,
      failed: c.FAILED ?? 0,
      ...(firstFailure ? { firstFailure } : {}),
      apacheGets200: (await gets200(apache)) - gets0,
      outputsOk,
    };
  } finally {
    await stopGracefully(child);
    await closeBenchJemState(state);
    rmSync(join(xrd.dataDir, "jem"), { recursive: true, force: true });
  }
}

const before = machine();
log(`staging bench: ${JOBS} jobs × ${INPUTS} inputs of ${MB} MiB (davs://) + 1 output (root://), load ${before.loadavg.join(" ")}`);
const pki = testPki();
const apache = await startApache(issueHostCert(pki.ca, { hostnames: ["localhost", "127.0.0.1"] }));
const xrd = await startXrootd();
const redis = await startRedis();
const caDir = mkdtempSync("/tmp/ce-bench-staging-ca-");
const caFile = join(caDir, "ca.pem");
writeFileSync(caFile, pki.ca.certPem);
// Random bytes (nothing along the way can shortcut them), one distinct file per input.
const buf = Buffer.allocUnsafe(SIZE);
for (let j = 0; j < JOBS; j++) {
  mkdirSync(join(apache.docRoot, `in/j${j}`), { recursive: true });
  for (let i = 0; i < INPUTS; i++) writeFileSync(join(apache.docRoot, inputPath(j, i)), randomFillSync(buf));
}
const concurrency = compileConfig({}, "/tmp").staging.maxConcurrentTransfers;
let floorResult: FloorResult | undefined;
let jemResult: JemResult | undefined;
try {
  if (ONLY !== "jem") {
    log("== floor (curl, xrdcp)");
    floorResult = await floor(apache, xrd, caFile, concurrency);
    log(`  ${JSON.stringify(floorResult)}`);
  }
  if (ONLY !== "floor") {
    log("== JEM");
    jemResult = await jem(redis.url, apache, xrd, caFile, pki);
    log(`  ${JSON.stringify(jemResult)}`);
  }
} finally {
  await redis.stop();
  await xrd.close();
  await apache.close();
  rmSync(caDir, { recursive: true, force: true });
}

const cols = [jemResult && "JEM", floorResult && `curl + xrdcp (${concurrency} at once)`].filter(Boolean);
const cell = (j: unknown, f: unknown) => [jemResult && String(j), floorResult && String(f)].filter((x) => x !== undefined).join(" | ");
const J = jemResult;
const F = floorResult;
log(`\n| ${JOBS} jobs × ${INPUTS} × ${MB} MiB in, ${JOBS} × ${MB} MiB out | ${cols.join(" | ")} |`);
log(`|---|${cols.map(() => "---").join("|")}|`);
log(`| MiB moved (in + out) | ${cell(J && mib(J.inBytes + J.outBytes), F && mib(F.inBytes + F.outBytes))} |`);
log(`| s, downloads (JEM: until all past stage-in) | ${cell(J?.stageInSeconds, F?.downloadSeconds)} |`);
log(`| MiB/s, downloads | ${cell(J?.stageInMibPerSecond, F?.downloadMibPerSecond)} |`);
log(`| s, all (JEM: submission to all FINISHED) | ${cell(J?.wallSeconds, F?.wallSeconds)} |`);
log(`| MiB/s, all | ${cell(J?.mibPerSecond, F?.mibPerSecond)} |`);
log(`| CPU s (JEM: own; curl/xrdcp: theirs) | ${cell(J && `${J.jemCpuSeconds} (+${J.jemChildCpuSeconds} children)`, F?.cpuSeconds)} |`);
log(`| CPU s per GiB | ${cell(J && `${J.cpuPerGiB} (${J.cpuWithChildrenPerGiB} with children)`, F?.cpuPerGiB)} |`);
log(`| cores busy while downloading (CPU s / wall s) | ${cell(J?.coresDownloading, F?.coresDownloading)} |`);
if (J) log(`\nJEM: ${J.finished} FINISHED, ${J.failed} FAILED, ${J.apacheGets200} GETs answered 200, ${J.outputsOk}/${JOBS} outputs whole`);
const result = {
  bench: "staging",
  jobs: JOBS,
  inputs: INPUTS,
  mib: MB,
  owners: OWNERS,
  versions: versions(),
  loadBefore: before.loadavg,
  loadAfter: machine().loadavg,
  nproc: before.nproc,
  jem: jemResult,
  floor: floorResult,
  ok: !J || (J.failed === 0 && J.finished === JOBS && J.outputsOk === JOBS && J.apacheGets200 === JOBS * INPUTS),
};
mkdirSync(join(ROOT, "bench/results"), { recursive: true });
writeFileSync(
  join(ROOT, "bench/results", `staging-${new Date().toISOString().replace(/[:.]/g, "-")}.json`),
  `${JSON.stringify(result, null, 2)}\n`,
);
log(JSON.stringify(result));
