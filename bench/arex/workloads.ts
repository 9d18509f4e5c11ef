/**
 * The workloads of `pnpm bench:arex`, run by one client against one server. Identical requests for
 * every server. The test user ("user") owns exactly the 500 bulk-submitted jobs (so its job list
 * has 500 entries); everything else (warm-up, transfers, end-to-end jobs) runs as "user2".
 */
import { join } from "node:path";
import { RestClient, TERMINAL, items, states, statusJson, statusXml, submit, xrslBatch, type JobItem } from "../lib/rest.js";
import { loadavg } from "node:os";
import { childSnapshot, cpuDelta, pct, round, settle, sleep, snapshot, type Procs } from "../lib/proc.js";
import type { Server } from "../lib/servers.js";

export const P = {
  bulkJobs: Number(process.env.BENCH_AREX_BULK_JOBS ?? 500),
  perRequest: 50,
  submitConcurrency: Number(process.env.BENCH_AREX_SUBMIT_CONCURRENCY ?? 2),
  transferBytes: Number(process.env.BENCH_AREX_TRANSFER_MB ?? 1024) * 1024 * 1024,
  downloads: 3,
  e2eJobs: 100,
  e2eTimeoutS: Number(process.env.BENCH_AREX_E2E_TIMEOUT_S ?? 300),
  statusIds: 500,
  statusRounds: 40,
  infoIds: 100,
  infoRounds: 30,
  loopClients: 8,
  loopIds: 50,
  loopSeconds: Number(process.env.BENCH_AREX_LOOP_S ?? 10),
  loopWarmSeconds: 3,
  listRounds: 20,
};

/**
 * BENCH_AREX_WORKLOADS=transfer,e2e,rest,status,info,loop,list runs only those (for profiling one
 * path; the bulk submission always runs: the others use its jobs). Unset: all of them.
 */
const only = process.env.BENCH_AREX_WORKLOADS ? new Set(process.env.BENCH_AREX_WORKLOADS.split(",")) : undefined;
const want = (w: string) => !only || only.has(w);

const holdJob = (name: string, files: string[]) =>
  `&(executable="/bin/true")(jobname="${name}")(inputfiles=${files.map((f) => `("${f}" "")`).join("")})`;

/** Times `n` calls of `fn` (after `warm` unmeasured ones); milliseconds. */
/**
 * Latencies of `n` calls after `warm` unmeasured ones. A call may return a check of its reply,
 * run after the clock stops: the client parsing a reply is not the server's latency.
 */
async function timed(n: number, warm: number, fn: () => Promise<void | (() => void)>): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < warm + n; i++) {
    const t = performance.now();
    const check = await fn();
    if (i >= warm) out.push(performance.now() - t);
    if (check) check();
  }
  return out;
}

function expectOk(r: { status: number; body: Buffer }, what: string) {
  if (r.status < 200 || r.status > 299) throw new Error(`${what}: ${r.status} ${r.body.toString("utf8").slice(0, 300)}`);
}

export async function runWorkloads(server: Server, dir: string, log: (s: string) => void) {
  const ca = join(dir, "ca/ca-cert.pem");
  const user = new RestClient({ base: server.base, credFile: join(dir, "user/userproxy.pem"), caFile: ca, sockets: P.submitConcurrency });
  const user2 = new RestClient({ base: server.base, credFile: join(dir, "user2/userproxy.pem"), caFile: ca, sockets: 2 });
  const procs: Procs = server.procs;
  const res: Record<string, unknown> = {};
  // 1-min load average as each workload starts: the machine is shared, so this says how busy it was.
  const load: Record<string, number> = {};
  res.loadAtStart = load;
  const mark = (w: string) => (load[w] = round(loadavg()[0]!, 2));
  try {
    // Warm-up: TLS sessions, identity caches, first files; not measured.
    expectOk(await user.call("GET", "jobs"), "warm-up list");
    // Two submissions the size of the measured ones: the measured requests then run code that is
    // already compiled (the first two took ~2x the steady ~20 ms of ours), as for every other workload.
    for (let w = 0; w < 2; w++)
      await submit(
        user2,
        xrslBatch(P.perRequest, (i) => holdJob(`warm${w}-${i}`, ["in.dat"])),
      );
    // Both servers finish their start-up work first (ours: the delegation key pool's RSA keys,
    // ~2.5 CPU s on a fresh gateway), so it lands in no measured window.
    const warm = await settle(procs, { maxMs: 30_000 });
    res.startupSettleMs = warm.ms;

    // 1. Bulk submission: jobs waiting for a client upload, 50 per request.
    mark("submit");
    log(`  bulk submission: ${P.bulkJobs} jobs, ${P.perRequest}/request, ${P.submitConcurrency} in parallel`);
    const body = xrslBatch(P.perRequest, (i) => holdJob(`bulk${i}`, ["in.dat"]));
    const ids: string[] = [];
    const refused: JobItem[] = [];
    const reqMs: number[] = [];
    let next = 0;
    const requests = Math.ceil(P.bulkJobs / P.perRequest);
    const c0 = snapshot(procs);
    const k0 = childSnapshot(procs);
    const u0 = process.cpuUsage();
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: P.submitConcurrency }, async () => {
        while (next < requests) {
          next++;
          const tr = performance.now();
          const r = await submit(user, body);
          reqMs.push(performance.now() - tr);
          ids.push(...r.ids);
          refused.push(...r.refused);
        }
      }),
    );
    const submitS = (performance.now() - t0) / 1000;
    const u1 = process.cpuUsage(u0);
    const c1 = snapshot(procs);
    const idle = await settle(procs, { maxMs: 40_000 });
    const during = cpuDelta(c0, c1);
    const untilIdle = cpuDelta(c0, idle.snap);
    res.submit = {
      jobs: ids.length,
      refused: refused.length,
      seconds: round(submitS, 3),
      jobsPerSecond: round(ids.length / submitS, 1),
      cpuDuring: during,
      cpuUntilIdle: untilIdle,
      childCpuUntilIdle: cpuDelta(k0, childSnapshot(procs)),
      settled: idle.settled,
      settleMs: idle.ms,
      cpuMsPerJob: round((untilIdle.total! * 1000) / Math.max(1, ids.length), 2),
      // This client's own CPU while submitting (it shares the machine's cores with the server).
      clientCpuS: round((u1.user + u1.system) / 1e6, 3),
      requestMs: reqMs.map((x) => round(x, 1)),
    };
    if (refused.length) log(`  ${refused.length} refused: ${JSON.stringify(refused[0])}`);
    log(
      `  → ${round(ids.length / submitS)} jobs/s; CPU during ${during.total} s, until idle ${untilIdle.total} s (${JSON.stringify(untilIdle)}); client ${round((u1.user + u1.system) / 1e6, 3)} s; requests ${reqMs.map((x) => Math.round(x)).join(" ")} ms`,
    );

    // 2. Session upload and download of one large file (one stream each), into a job that waits
    //    for a second input as well, so it stays put while we read the file back.
    if (want("transfer")) {
      mark("transfer");
      log(`  session PUT/GET of ${P.transferBytes / 2 ** 20} MiB`);
      const [tid] = (await submit(user2, holdJob("transfer", ["big.dat", "hold.dat"]))).ids;
      if (!tid) throw new Error("transfer job not created");
      await sleep(1000);
      const chunk = Buffer.alloc(1024 * 1024);
      for (let i = 0; i < chunk.length; i += 4) chunk.writeUInt32LE((i * 2654435761) >>> 0, i);
      const transfer = async (what: "put" | "get") => {
        const s0 = snapshot(procs);
        const t = performance.now();
        if (what === "put") expectOk(await user2.putStream(`jobs/${tid}/session/big.dat`, P.transferBytes, chunk), "session PUT");
        else {
          const g = await user2.getCount(`jobs/${tid}/session/big.dat`);
          if (g.status !== 200 || g.bytes !== P.transferBytes) throw new Error(`session GET: ${g.status}, ${g.bytes} bytes`);
        }
        const s = (performance.now() - t) / 1000;
        const cpu = cpuDelta(s0, snapshot(procs));
        const gib = P.transferBytes / 2 ** 30;
        log(`  → ${what} ${round(s, 2)} s, ${round(P.transferBytes / 2 ** 20 / s)} MiB/s, CPU ${round(cpu.total! / gib, 2)} s/GiB`);
        return {
          seconds: round(s, 3),
          mibPerSecond: round(P.transferBytes / 2 ** 20 / s, 1),
          cpu,
          cpuSecondsPerGiB: round(cpu.total! / gib, 2),
        };
      };
      res.upload = await transfer("put");
      // Reads leave the file as it was, so the download is measured P.downloads times and the
      // median reported (one GET of a GiB swings ±20% with what else the machine does).
      const gets = [];
      for (let i = 0; i < P.downloads; i++) gets.push(await transfer("get"));
      const median = [...gets].sort((a, b) => a.seconds - b.seconds)[Math.floor(gets.length / 2)]!;
      res.download = { ...median, runsSeconds: gets.map((g) => g.seconds) };
      // Free the space (best effort: both implementations accept kill then clean).
      await user2.call("POST", "jobs?action=kill", statusJson([tid]), { "content-type": "application/json" });
    }

    // 3. End to end: 100 /bin/true jobs in one request → all terminal.
    if (want("e2e")) {
      log(`  end to end: ${P.e2eJobs} /bin/true jobs in one request`);
      await settle(procs, { maxMs: 15_000 });
      mark("e2e");
      const e0 = snapshot(procs);
      const ek0 = childSnapshot(procs);
      const te = performance.now();
      const e2eIds = (
        await submit(
          user2,
          xrslBatch(P.e2eJobs, (i) => `&(executable="/bin/true")(jobname="e2e${i}")`),
        )
      ).ids;
      let last = new Map<string, string>();
      for (;;) {
        last = await states(user2, e2eIds);
        if ([...last.values()].every((s) => TERMINAL.has(s))) break;
        if (performance.now() - te > P.e2eTimeoutS * 1000) break;
        await sleep(250);
      }
      const e2eS = (performance.now() - te) / 1000;
      const count: Record<string, number> = {};
      for (const s of last.values()) count[s] = (count[s] ?? 0) + 1;
      res.e2e = {
        jobs: e2eIds.length,
        seconds: round(e2eS, 2),
        states: count,
        allFinished: count.FINISHED === e2eIds.length,
        cpu: cpuDelta(e0, snapshot(procs)),
        childCpu: cpuDelta(ek0, childSnapshot(procs)),
      };
      log(`  → ${round(e2eS, 2)} s, states ${JSON.stringify(count)}`);
      await settle(procs, { maxMs: 15_000 });
    }

    // What the servers do on their own, holding the waiting jobs, with no requests at all.
    if (want("rest")) {
      mark("rest");
      const r0 = snapshot(procs);
      await sleep(10_000);
      const rest = cpuDelta(r0, snapshot(procs));
      res.atRest = { seconds: 10, cpu: rest, percentOfCore: round(rest.total! * 10, 1) };
      log(`  at rest (10 s, no requests): ${round(rest.total! * 10, 1)}% of a core ${JSON.stringify(rest)}`);
    }

    // 4. Bulk status of 500 ids, JSON and XML.
    if (want("status")) {
      mark("status");
      const st = ids.slice(0, P.statusIds);
      const sj = statusJson(st);
      const sx = statusXml(st);
      const statusCall = (body: string, type: string) => async () => {
        const r = await user.call("POST", "jobs?action=status", body, { "content-type": type, accept: type });
        expectOk(r, "status");
      };
      const lj = await timed(P.statusRounds, 5, statusCall(sj, "application/json"));
      const lx = await timed(P.statusRounds, 5, statusCall(sx, "application/xml"));
      res.statusJson = { ids: st.length, p50Ms: round(pct(lj, 50), 2), p95Ms: round(pct(lj, 95), 2) };
      res.statusXml = { ids: st.length, p50Ms: round(pct(lx, 50), 2), p95Ms: round(pct(lx, 95), 2) };
      log(`  bulk status of ${st.length}: JSON p50 ${round(pct(lj, 50), 1)} ms, XML p50 ${round(pct(lx, 50), 1)} ms`);
    }

    // 5. Bulk info of 100 ids.
    if (want("info")) {
      mark("info");
      const infoCall = (body: string) => async () => {
        const r = await user.call("POST", "jobs?action=info", body, { "content-type": "application/json" });
        return () => {
          expectOk(r, "info");
          const n = items((JSON.parse(r.body.toString("utf8")) as { job?: JobItem | JobItem[] }).job).length;
          if (n !== P.infoIds) throw new Error(`info: ${n} items`);
        };
      };
      const li = await timed(P.infoRounds, 3, infoCall(statusJson(ids.slice(0, P.infoIds))));
      // First reads: each of the other sets of 100 jobs asked once (a server may keep what it
      // rendered for jobs that did not change, which the repeated asks above measure).
      const first: number[] = [];
      for (let k = 1; (k + 1) * P.infoIds <= ids.length; k++)
        first.push(...(await timed(1, 0, infoCall(statusJson(ids.slice(k * P.infoIds, (k + 1) * P.infoIds))))));
      res.info = {
        ids: P.infoIds,
        p50Ms: round(pct(li, 50), 2),
        p95Ms: round(pct(li, 95), 2),
        firstReadP50Ms: round(pct(first, 50), 2),
        firstReads: first.length,
      };
      log(
        `  bulk info of ${P.infoIds}: p50 ${round(pct(li, 50), 1)} ms; first reads of other jobs p50 ${round(pct(first, 50), 1)} ms (${first.length})`,
      );
    }

    if (want("loop")) {
      mark("statusLoop");
      // 6. 8 concurrent clients (one connection each) looping bulk status of 50 ids.
      const loopers = Array.from(
        { length: P.loopClients },
        () => new RestClient({ base: server.base, credFile: join(dir, "user/userproxy.pem"), caFile: ca, sockets: 1 }),
      );
      const codes: Record<string, number> = {};
      let done = 0;
      for (const l of loopers) expectOk(await l.call("GET", "jobs"), "warm-up"); // open the connections
      const loop = (seconds: number, count: boolean) => {
        const end = performance.now() + seconds * 1000;
        return Promise.all(
          loopers.map(async (l, k) => {
            const b = statusJson(ids.slice((k * P.loopIds) % ids.length, ((k * P.loopIds) % ids.length) + P.loopIds));
            while (performance.now() < end) {
              const r = await l.call("POST", "jobs?action=status", b, { "content-type": "application/json" });
              if (count) codes[r.status] = (codes[r.status] ?? 0) + 1;
              if (count && r.status >= 200 && r.status < 300) done++;
              else if (r.status === 429) await sleep(Number(r.headers["retry-after"] ?? 1) * 1000);
            }
          }),
        );
      };
      // Unmeasured warm-up of the same loop (both servers alike, as the other workloads have): the
      // figure is the steady cost per request, not a fresh process's compilation. Then a pause, so
      // a per-identity rate limit starts the measured window with the bucket it would have.
      await loop(P.loopWarmSeconds, false);
      await sleep(2_000);
      const l0 = snapshot(procs);
      const tl = performance.now();
      await loop(P.loopSeconds, true);
      const loopS = (performance.now() - tl) / 1000;
      const lcpu = cpuDelta(l0, snapshot(procs));
      for (const l of loopers) l.close();
      res.statusLoop = {
        clients: P.loopClients,
        ids: P.loopIds,
        seconds: round(loopS, 2),
        ok: done,
        codes,
        reqPerSecond: round(done / loopS, 1),
        cpu: lcpu,
        cpuMsPerRequest: round((lcpu.total! * 1000) / Math.max(1, done), 3),
      };
      log(
        `  ${P.loopClients} status loops: ${round(done / loopS)} req/s, ${round((lcpu.total! * 1000) / Math.max(1, done), 2)} ms CPU/request, codes ${JSON.stringify(codes)}`,
      );
    }

    // 7. Job list (the user owns exactly the bulk-submitted jobs).
    if (want("list")) {
      mark("list");
      let listed = 0;
      const ll = await timed(P.listRounds, 3, async () => {
        const r = await user.call("GET", "jobs");
        expectOk(r, "list");
        listed = items((JSON.parse(r.body.toString("utf8")) as { job?: JobItem | JobItem[] }).job).length;
      });
      res.list = { jobs: listed, p50Ms: round(pct(ll, 50), 2), p95Ms: round(pct(ll, 95), 2) };
      log(`  job list (${listed}): p50 ${round(pct(ll, 50), 1)} ms`);
    }

    return res;
  } finally {
    user.close();
    user2.close();
  }
}
