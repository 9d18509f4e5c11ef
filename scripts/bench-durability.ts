/**
 * `pnpm bench:durability [jobs]`: what an acknowledgement costs under each durability setting.
 *
 * Part 1, per setting (AOF off / everysec / always, alone or with a replica and `WAIT 1`): a real
 * Redis (@ce/testing/redis-ha) and a real gateway (no JEM, so only the acknowledgement is
 * measured) over HTTPS; `jobs` single-job submissions (default 2,000) from 8 concurrent clients.
 * Prints jobs/s and the p50/p99 latency of a 201.
 *
 * Part 2 (`--footprint`, on by default): one AOF-everysec Redis, gateway + JEM (fork back end),
 * 200 jobs through their whole life (submit → FINISHED → clean); prints Redis commands and bytes
 * per job (INFO commandstats, used_memory and MEMORY USAGE of one job's keys).
 *
 * Figures are recorded in bench/README.md with the machine they were taken on.
 */
import { performance } from "node:perf_hooks";
import { spawnSync } from "node:child_process";
import { CeClient, echoJobs } from "../tests/ha/client.js";
import { startSentinelSet, startStandalone, type AdminAuth } from "@ce/testing/redis-ha";
import { startStack } from "@ce/testing/stack";

const JOBS = Number(process.argv.find((a) => /^\d+$/.test(a)) ?? 2_000);
const CONCURRENCY = 8;
const only = process.argv.find((a) => a.startsWith("--only="))?.slice(7);

interface Setting {
  name: string;
  aof: "no" | "everysec" | "always";
  replica: boolean;
  waitReplicas: number;
}
const SETTINGS: Setting[] = [
  { name: "AOF off, no replica", aof: "no", replica: false, waitReplicas: 0 },
  { name: "AOF everysec (default)", aof: "everysec", replica: false, waitReplicas: 0 },
  { name: "AOF always", aof: "always", replica: false, waitReplicas: 0 },
  { name: "AOF everysec + replica, no WAIT", aof: "everysec", replica: true, waitReplicas: 0 },
  { name: "AOF everysec + replica + WAIT 1", aof: "everysec", replica: true, waitReplicas: 1 },
  { name: "AOF always + replica + WAIT 1", aof: "always", replica: true, waitReplicas: 1 },
];

const pct = (xs: number[], p: number) => xs[Math.min(xs.length - 1, Math.floor((xs.length * p) / 100))]!;

async function submitMany(ce: CeClient, n: number): Promise<{ seconds: number; lat: number[]; refused: number }> {
  const lat: number[] = [];
  let next = 0;
  let refused = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < n) {
        next++;
        const t = performance.now();
        const r = await ce.submit(echoJobs(1, "bench")).catch(() => undefined); // a reset keep-alive socket: counted, not fatal
        if (r?.status !== 201 || r.ids.length !== 1) refused++;
        lat.push(performance.now() - t);
      }
    }),
  );
  return { seconds: (performance.now() - t0) / 1000, lat: lat.sort((a, b) => a - b), refused };
}

interface BenchRedis {
  users: Record<"gateway" | "jem", { username: string; password: string }>;
  config: Record<string, unknown>;
  admin: AdminAuth;
  /** Port of the primary now. */
  port: () => Promise<number>;
}

async function withRedis<T>(s: Setting, fn: (redis: BenchRedis) => Promise<T>): Promise<T> {
  if (!s.replica) {
    const r = await startStandalone({ durability: s.aof });
    try {
      return await fn({ users: r.users, config: r.ceConfig(), admin: r.admin, port: async () => r.server.port });
    } finally {
      await r.stop();
    }
  }
  const set = await startSentinelSet({ durability: s.aof });
  try {
    return await fn({ users: set.users, config: set.ceConfig(), admin: set.admin, port: async () => (await set.primary()).port });
  } finally {
    await set.stop();
  }
}

async function durability(): Promise<void> {
  console.log(`\n${JOBS} single-job submissions, ${CONCURRENCY} concurrent clients, one gateway (no JEM)\n`);
  console.log("| setting | jobs/s | p50 ms | p99 ms | refused |\n|---|---|---|---|---|");
  for (const s of SETTINGS.filter((x) => !only || x.name.includes(only))) {
    await withRedis(s, async (r) => {
      const stack = await startStack({
        redisUrl: "redis://127.0.0.1:1",
        redisUsers: r.users,
        jem: false,
        config: {
          redis: { ...r.config, waitReplicas: s.waitReplicas },
          gateway: { limits: { requestsPerSecond: 0 } },
          logging: { level: "warn" },
        },
        env: { CE_TEST_LOG_LEVEL: "warn" },
      });
      const ce = new CeClient(stack, stack.url, CONCURRENCY);
      try {
        await submitMany(ce, 50); // warm-up (TLS sessions, script cache, JIT)
        const m = await submitMany(ce, JOBS);
        console.log(
          `| ${s.name} | ${Math.round(JOBS / m.seconds)} | ${pct(m.lat, 50).toFixed(1)} | ${pct(m.lat, 99).toFixed(1)} | ${m.refused} |`,
        );
      } finally {
        ce.close();
        await stack.stop();
      }
    });
  }
}

async function footprint(): Promise<void> {
  const N = 200;
  const s = SETTINGS[1]!;
  await withRedis(s, async (r) => {
    const port = await r.port();
    // redis-cli as the operator user (the root package has no Redis client of its own).
    const cli = (...args: string[]) => {
      const res = spawnSync(
        "redis-cli",
        ["-p", String(port), "--user", r.admin.username, "--pass", r.admin.password, "--no-auth-warning", ...args],
        { encoding: "utf8" },
      );
      if (res.status !== 0) throw new Error(`redis-cli ${args.join(" ")}: ${res.stderr}`);
      return res.stdout;
    };
    const usedMemory = () => Number(/used_memory:(\d+)/.exec(cli("info", "memory"))![1]);
    const stack = await startStack({
      redisUrl: "redis://127.0.0.1:1",
      redisUsers: r.users,
      config: { redis: r.config, gateway: { limits: { requestsPerSecond: 0 } } },
      env: { CE_TEST_LOG_LEVEL: "warn" },
    });
    const ce = new CeClient(stack, stack.url, CONCURRENCY);
    try {
      await submitMany(ce, 20);
      cli("config", "resetstat");
      const mem0 = usedMemory();
      const ids: string[] = [];
      for (let i = 0; i < N; i += 10) ids.push(...(await ce.submit(echoJobs(10, "footprint"))).ids);
      const mem1 = usedMemory();
      const stats1 = cli("info", "commandstats");
      const keys = cli("--scan", "--pattern", `*${ids[0]}*`).split("\n").filter(Boolean).sort();
      let jobBytes = 0;
      for (const k of keys) jobBytes += Number(cli("memory", "usage", k, "samples", "0").trim());
      await ce.waitStates(ids, ["FINISHED"], 120_000, stack.logs);
      const mem2 = usedMemory();
      const stats2 = cli("info", "commandstats");
      await ce.bulk("clean", ids);
      await new Promise((res) => setTimeout(res, 5_000)); // the JEM removes the cleaned jobs
      const stats3 = cli("info", "commandstats");
      const calls = (info: string) => {
        const out = new Map<string, number>();
        for (const m of info.matchAll(/cmdstat_([a-z|_-]+):calls=(\d+)/g)) out.set(m[1]!, Number(m[2]));
        return out;
      };
      const total = (m: Map<string, number>) => [...m.values()].reduce((a, b) => a + b, 0);
      const top = (m: Map<string, number>) =>
        [...m]
          .sort((a, b) => b[1] - a[1])
          .slice(0, 8)
          .map(([k, v]) => `${k} ${(v / N).toFixed(1)}`)
          .join(", ");
      console.log(`\nFootprint, ${N} jobs (fork back end, AOF everysec; JEM polls included):`);
      console.log(
        `  Redis commands per job: submission ${(total(calls(stats1)) / N).toFixed(1)}, submit → FINISHED ${(total(calls(stats2)) / N).toFixed(1)}, + clean ${(total(calls(stats3)) / N).toFixed(1)}`,
      );
      console.log(`  most frequent over the whole life (per job): ${top(calls(stats3))}`);
      console.log(
        `  used_memory per job: after submission ${Math.round((mem1 - mem0) / N)} B, when FINISHED ${Math.round((mem2 - mem0) / N)} B`,
      );
      console.log(
        `  one freshly submitted job: ${keys.length} keys of its own, MEMORY USAGE ${jobBytes} B (${keys.map((k) => k.replace(/^\{[^}]+\}:/, "")).join(" ")})`,
      );
    } finally {
      ce.close();
      await stack.stop();
    }
  });
}

if (!process.argv.includes("--no-durability")) await durability();
if (!process.argv.includes("--no-footprint")) await footprint();
process.exit(0);
