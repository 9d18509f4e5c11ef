/**
 * Exactly-once soak: jobs are submitted (the gateway's own createJobs sequence) while the JEM, a
 * separate process (apps/jem/src/main.ts), is SIGKILLed every few seconds and started again.
 * Every job appends its name to one shared file when it runs. The verdict: no job ran twice, no
 * acknowledged job was lost (each ran once and reached FINISHED without failure), none is still
 * active at the timeout. Used by `pnpm soak` (tests/soak) and, smaller, by apps/jem/test/soak.serial.test.ts.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { createWriteStream } from "node:fs";
import { readFile, writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { expect } from "vitest";
import type { TestEnv } from "../helpers.js";
import { shellJob, submitTestJob } from "../helpers.js";

const ROOT = resolve(import.meta.dirname, "../../../..");
const MAIN = join(ROOT, "apps/jem/src/main.ts");

export interface SoakOptions {
  jobs: number;
  kills: number;
  killEveryMs: number;
  /** Submission is spread over this long (ms), so kills hit jobs in every state. */
  submitOverMs: number;
  /** After the last kill: how long every job has to become FINISHED. */
  settleTimeoutMs: number;
  /** Extra environment of the JEM (SLURM_CONF). */
  jemEnv?: Record<string, string>;
  log?: (line: string) => void;
}

export interface SoakReport {
  backend: string;
  acknowledged: number;
  kills: number;
  finishedOk: number;
  ranTwice: string[];
  /** Acknowledged, FINISHED, but its payload never ran or it failed. */
  lost: string[];
  notTerminal: string[];
  /** Submission until the last job is FINISHED (ms). */
  wallMs: number;
  /** The JEM's log: "adopted" resumptions seen. */
  resumed: number;
}

/** The JEM's own config file (JSON is YAML): the test env's settings, INFO logs for the readiness line. */
async function writeJemConfig(env: TestEnv): Promise<string> {
  const c = env.config;
  const file = join(env.stateDir, "jem-soak.json");
  const cfg = {
    paths: { stateDir: env.stateDir },
    redis: { url: c.redis.url, prefix: c.redis.prefix },
    lrms: { backend: c.lrms.backend, pollIntervalMs: c.lrms.pollIntervalMs },
    jem: { scanIntervalMs: c.jem.scanIntervalMs },
    delegations: { encryptionKey: c.delegations.encryptionKey },
    logging: { level: "info" },
    admin: { enabled: false },
  };
  await writeFile(file, JSON.stringify(cfg));
  return file;
}

async function startMain(configFile: string, logFile: string, extraEnv: Record<string, string>): Promise<ChildProcess> {
  const child = spawn(process.execPath, ["--import", "tsx", MAIN], {
    cwd: ROOT,
    env: { ...process.env, ...extraEnv, CE_CONFIG: configFile, CE_DEV_MAPPING: "off" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const out = createWriteStream(logFile, { flags: "a" });
  child.stderr!.pipe(out, { end: false });
  await new Promise<void>((resolveReady, reject) => {
    let buf = "";
    let errTail = "";
    child.stderr!.on("data", (d: Buffer) => (errTail = (errTail + d.toString()).slice(-2048)));
    const onData = (d: Buffer) => {
      out.write(d);
      buf = (buf + d.toString()).slice(-4096);
      if (buf.includes("JEM started")) {
        resolveReady();
      }
    };
    child.stdout!.on("data", onData);
    // The log file goes with the test's state dir: the reason travels in the error.
    child.once("exit", (code) => reject(new Error(`JEM exited early (${code}); log: ${logFile}\n${errTail}${buf.slice(-1024)}`)));
  });
  child.stdout!.removeAllListeners("data");
  child.stdout!.pipe(out, { end: false });
  return child;
}

async function kill9(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const gone = new Promise<void>((r) => child.once("exit", () => r()));
  child.kill("SIGKILL");
  await gone;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function runSoak(env: TestEnv, opts: SoakOptions): Promise<SoakReport> {
  const log = opts.log ?? (() => undefined);
  const runs = join(env.stateDir, "runs.txt");
  await writeFile(runs, "");
  const configFile = await writeJemConfig(env);
  const logFile = join(env.stateDir, "jem-soak.log");
  let jem = await startMain(configFile, logFile, opts.jemEnv ?? {});
  const t0 = Date.now();

  // Submission, spread over submitOverMs in chunks; only a created job is acknowledged.
  const names = new Map<string, string>(); // jobId → name
  const chunk = 20;
  const chunks = Math.ceil(opts.jobs / chunk);
  const submitting = (async () => {
    for (let c = 0; c < chunks; c++) {
      const at = t0 + (c * opts.submitOverMs) / chunks;
      if (at > Date.now()) await sleep(at - Date.now());
      const idx = Array.from({ length: Math.min(chunk, opts.jobs - c * chunk) }, (_, i) => c * chunk + i);
      await Promise.all(
        idx.map(async (i) => {
          const name = `soak-${i}`;
          // Short payloads of different lengths: kills land in SUBMIT, INLRMS and FINISHING alike.
          const id = await submitTestJob(env, shellJob(`echo ${name} >> ${runs}; sleep 0.${i % 10}`, { jobName: name }));
          names.set(id, name);
        }),
      );
    }
  })();

  let kills = 0;
  for (; kills < opts.kills; kills++) {
    await sleep(opts.killEveryMs);
    await kill9(jem);
    log(`kill ${kills + 1}: ${names.size} jobs acknowledged so far`);
    jem = await startMain(configFile, logFile, opts.jemEnv ?? {});
  }
  await submitting;
  const ids = [...names.keys()];
  log(`${ids.length} jobs acknowledged, ${kills} kills; waiting for all to finish`);

  const deadline = Date.now() + opts.settleTimeoutMs;
  let notTerminal: string[] = ids;
  while (Date.now() < deadline) {
    const recs = await env.jobs.getMany(notTerminal);
    notTerminal = notTerminal.filter((_, i) => recs[i]?.state !== "FINISHED");
    if (notTerminal.length === 0) break;
    await sleep(500);
  }
  const wallMs = Date.now() - t0;
  await kill9(jem);

  const counts = new Map<string, number>();
  for (const line of (await readFile(runs, "utf8")).split("\n")) if (line) counts.set(line, (counts.get(line) ?? 0) + 1);
  const recs = await env.jobs.getMany(ids);
  const ranTwice: string[] = [];
  const lost: string[] = [];
  let finishedOk = 0;
  ids.forEach((id, i) => {
    const name = names.get(id)!;
    const n = counts.get(name) ?? 0;
    const r = recs[i];
    if (n > 1) ranTwice.push(`${name} (${id}) ran ${n} times`);
    if (r?.state === "FINISHED") {
      if (n === 1 && !r.failure) finishedOk++;
      else if (n <= 1) lost.push(`${name} (${id}) ran ${n} times, failure: ${r.failure ?? "-"}`);
    }
  });
  const jemLog = await readFile(logFile, "utf8").catch(() => "");
  const resumed = (jemLog.match(/an earlier submission attempt left no local id/g) ?? []).length;
  return {
    backend: env.config.lrms.backend,
    acknowledged: ids.length,
    kills,
    finishedOk,
    ranTwice,
    lost,
    notTerminal: notTerminal.map((id) => `${names.get(id)} (${id})`),
    wallMs,
    resumed,
  };
}

/** The soak's verdict: one summary line, the first offenders, then no job ran twice, none lost, all FINISHED. */
export function expectExactlyOnce(r: SoakReport, jobs = r.acknowledged): void {
  console.log(
    `soak ${r.backend}: ${r.acknowledged} jobs acknowledged, ${r.kills} kills, ${r.finishedOk} ran once and FINISHED, ` +
      `${r.ranTwice.length} ran twice, ${r.lost.length} lost, ${r.notTerminal.length} not terminal, ` +
      `${r.resumed} submissions resumed after a kill, all done after ${(r.wallMs / 1000).toFixed(1)} s`,
  );
  for (const l of [...r.ranTwice, ...r.lost, ...r.notTerminal].slice(0, 20)) console.log(`  ${l}`);
  expect(r.ranTwice).toEqual([]);
  expect(r.lost).toEqual([]);
  expect(r.notTerminal).toEqual([]);
  expect(r.finishedOk).toBe(jobs);
}
