/**
 * `pnpm bench:arex` (bench/arex/run.sh): the same REST 1.0 client against the reference A-REX and
 * against our CE, one after the other in one run (never both up at once), then a table with both
 * figures and the ratio, and the results as JSON under bench/results/.
 *
 * Usage: node --import tsx bench/arex/main.ts <dir made by setup-creds.sh>
 * BENCH_AREX_ONLY=ce|arex runs one side only (for trying the harness); BENCH_AREX_WORKLOADS
 * picks workloads (see workloads.ts).
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { tmpdir } from "node:os";
import { machine, round } from "../lib/proc.js";
import { ROOT, startArex, startCe, versions, type Server } from "../lib/servers.js";
import { P, runWorkloads } from "./workloads.js";

type R = Record<string, Record<string, unknown>>;
const dir = process.argv[2];
if (!dir) throw new Error("usage: main.ts <creds dir>");
const log = (s: string) => console.log(s);
const only = process.env.BENCH_AREX_ONLY;
// Overrides for our CE given as CE__* in BENCH_AREX_CE_ENV ("K=V K=V"); none by default.
const ceEnv = Object.fromEntries(
  (process.env.BENCH_AREX_CE_ENV ?? "")
    .split(/\s+/)
    .filter(Boolean)
    .map((kv) => [kv.slice(0, kv.indexOf("=")), kv.slice(kv.indexOf("=") + 1)]),
);

async function side(name: string, start: () => Promise<Server>) {
  const before = machine();
  log(`== ${name} (load ${before.loadavg.join(" ")}, ${before.nproc} CPUs)`);
  const server = await start();
  try {
    const results = (await runWorkloads(server, dir!, log)) as R;
    return {
      server: server.name,
      base: server.base,
      procs: server.procs,
      overrides: server.overrides,
      machineBefore: before,
      machineAfter: machine(),
      results,
    };
  } finally {
    await server.stop();
  }
}

const started = new Date();
const arex = only === "ce" ? undefined : await side("A-REX", () => startArex(dir, { log }));
const ce = only === "arex" ? undefined : await side("CE", () => startCe(join(dir, "ce"), { refPki: dir, log, extraEnv: ceEnv }));

const get = (s: typeof arex, path: string): number | undefined => {
  let v: unknown = s?.results;
  for (const k of path.split(".")) v = (v as Record<string, unknown> | undefined)?.[k];
  return typeof v === "number" ? v : undefined;
};
const fmt = (v: number | undefined, unit: string) => (v === undefined ? "—" : `${v} ${unit}`);
/** Ratio as "how many times better is ours": higher-is-better figures a/b inverted where lower is better. */
const ratio = (a: number | undefined, c: number | undefined, higherBetter: boolean) => {
  if (a === undefined || c === undefined || a === 0 || c === 0) return "—";
  return `${round(higherBetter ? c / a : a / c, 2)}×`;
};

const rows: [string, string, string, boolean][] = [
  [
    `bulk submission, ${P.bulkJobs} xRSL jobs (${P.perRequest}/request, ${P.submitConcurrency} parallel), each waiting for an upload`,
    "submit.jobsPerSecond",
    "jobs/s",
    true,
  ],
  ["  server CPU, submission until idle (all server processes)", "submit.cpuUntilIdle.total", "CPU s", false],
  ["  server CPU per accepted job", "submit.cpuMsPerJob", "ms", false],
  [`session PUT of ${P.transferBytes / 2 ** 20} MiB (one stream)`, "upload.seconds", "s", false],
  ["  server CPU per GiB uploaded", "upload.cpuSecondsPerGiB", "CPU s", false],
  [`session GET of ${P.transferBytes / 2 ** 20} MiB (one stream, median of ${P.downloads})`, "download.seconds", "s", false],
  ["  server CPU per GiB downloaded", "download.cpuSecondsPerGiB", "CPU s", false],
  [`${P.e2eJobs} /bin/true jobs in one request → all terminal`, "e2e.seconds", "s", false],
  ["  server CPU during it (server processes)", "e2e.cpu.total", "CPU s", false],
  ["  CPU of reaped child processes (helper and back-end scripts)", "e2e.childCpu.total", "CPU s", false],
  ["server CPU at rest for 10 s (no requests; ~510 jobs waiting for uploads), % of a core", "atRest.percentOfCore", "%", false],
  [`bulk status of ${P.statusIds} ids, JSON, p50`, "statusJson.p50Ms", "ms", false],
  ["  … p95", "statusJson.p95Ms", "ms", false],
  [`bulk status of ${P.statusIds} ids, XML, p50`, "statusXml.p50Ms", "ms", false],
  ["  … p95", "statusXml.p95Ms", "ms", false],
  [`bulk info of ${P.infoIds} ids, p50 (the same ids asked ${P.infoRounds} times)`, "info.p50Ms", "ms", false],
  ["  … first read of other jobs, p50", "info.firstReadP50Ms", "ms", false],
  [
    `${P.loopClients} clients looping bulk status of ${P.loopIds} ids (~${P.loopSeconds} s, after ${P.loopWarmSeconds} s unmeasured)`,
    "statusLoop.reqPerSecond",
    "req/s",
    true,
  ],
  ["  server CPU per status request", "statusLoop.cpuMsPerRequest", "ms", false],
  ["job list of the user's jobs, p50", "list.p50Ms", "ms", false],
];

const v = versions();
const lines = [
  "",
  `A-REX ${v.arex} vs CE ${v.ce}; node ${v.node}, redis ${v.redis}; ${machine().nproc} CPUs (${machine().cpu})`,
  `load before A-REX: ${arex?.machineBefore.loadavg.join(" ") ?? "—"}; before CE: ${ce?.machineBefore.loadavg.join(" ") ?? "—"}; after: ${machine().loadavg.join(" ")} (1/5/15 min; the machine is shared)`,
  `CE: shipped defaults as \`./ce start\` runs them (embedded Redis, fork back end; only ports, state dir and PKI placed)${ce?.overrides.length ? `; OVERRIDES: ${ce.overrides.join(" ")}` : ""}`,
  `A-REX: fork back end, ${arex?.overrides.join(", ") ?? "AREX_INFO_PERIOD=20, AREX_WAKEUP=10"} (reference README's settings)`,
  "server CPU = utime+stime of the server processes: A-REX its two arched processes; CE gateway + JEM + redis-server. Ratio = how many times better the CE is.",
  "",
  "| workload | A-REX | CE | ratio |",
  "|---|---|---|---|",
  ...rows.map(
    ([label, path, unit, hb]) =>
      `| ${label} | ${fmt(get(arex, path), unit)} | ${fmt(get(ce, path), unit)} | ${ratio(get(arex, path), get(ce, path), hb)} |`,
  ),
];
const notes: string[] = [];
for (const [n, s] of [
  ["A-REX", arex],
  ["CE", ce],
] as const) {
  if (!s) continue;
  const e2e = s.results.e2e as { states: Record<string, number>; allFinished: boolean } | undefined;
  if (e2e && !e2e.allFinished) notes.push(`${n}: end-to-end jobs not all FINISHED: ${JSON.stringify(e2e.states)}`);
  const loop = s.results.statusLoop as { codes: Record<string, number> } | undefined;
  const bad = Object.entries(loop?.codes ?? {}).filter(([c]) => !c.startsWith("2"));
  if (bad.length) notes.push(`${n}: status loop answers other than 2xx: ${bad.map(([c, k]) => `${k} × ${c}`).join(", ")}`);
  const sub = s.results.submit as { refused: number; settled: boolean; cpuUntilIdle: Record<string, number> } | undefined;
  if (sub?.refused) notes.push(`${n}: ${sub.refused} jobs refused at submission`);
  if (sub && !sub.settled) notes.push(`${n}: servers not idle within 40 s after the submission (CPU counted up to then)`);
  const la = s.results.loadAtStart as Record<string, number> | undefined;
  if (la)
    notes.push(
      `${n}: 1-min load as each workload began: ${Object.entries(la)
        .map(([k, x]) => `${k} ${x}`)
        .join(", ")}`,
    );
  if (sub)
    notes.push(
      `${n}: submission CPU by process: ${Object.entries(sub.cpuUntilIdle)
        .map(([k, x]) => `${k} ${x} s`)
        .join(", ")}`,
    );
}
lines.push("", ...notes.map((n) => `- ${n}`));
console.log(lines.join("\n"));

// A partial run (some workloads only) is for profiling: it goes to the OS temp dir, not the record.
const out = process.env.BENCH_AREX_WORKLOADS ? join(tmpdir(), "bench-arex-partial") : join(ROOT, "bench/results");
mkdirSync(out, { recursive: true });
const file = join(out, `arex-${started.toISOString().replace(/[:.]/g, "-")}.json`);
writeFileSync(
  file,
  `${JSON.stringify({ bench: "arex", started: started.toISOString(), versions: v, machine: machine(), params: P, arex, ce, table: lines }, null, 2)}\n`,
);
console.log(`\nresults: ${file}`);
