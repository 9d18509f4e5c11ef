/**
 * Server-side cost from /proc: CPU seconds (utime + stime) and RSS of named processes, plus the
 * small statistics helpers the benchmarks share.
 */
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { cpus, loadavg } from "node:os";

const TICKS = Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100;

/** CPU seconds (user + system) a process has used so far; 0 when it is gone. */
export function cpuSeconds(pid: number): number {
  try {
    // Fields after the command name (which may contain spaces): state is field 3, utime 14, stime 15.
    const f = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
    return (Number(f[11]) + Number(f[12])) / TICKS;
  } catch {
    return 0;
  }
}

/** CPU seconds of the process' terminated and reaped children (cutime + cstime): helper scripts, back-end calls. */
export function childCpuSeconds(pid: number): number {
  try {
    const f = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
    return (Number(f[13]) + Number(f[14])) / TICKS;
  } catch {
    return 0;
  }
}

export function rssMb(pid: number): number {
  try {
    const kb = Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? 0);
    return kb / 1024;
  } catch {
    return 0;
  }
}

/** The server processes one benchmark charges, by role (e.g. gateway, jem, redis). */
export type Procs = Record<string, number[]>;

export type CpuSnapshot = Record<string, number>;

export function snapshot(procs: Procs): CpuSnapshot {
  const out: CpuSnapshot = {};
  for (const [role, pids] of Object.entries(procs)) out[role] = pids.reduce((s, p) => s + cpuSeconds(p), 0);
  return out;
}

/** Like `snapshot`, for the reaped children of each role's processes. */
export function childSnapshot(procs: Procs): CpuSnapshot {
  const out: CpuSnapshot = {};
  for (const [role, pids] of Object.entries(procs)) out[role] = pids.reduce((s, p) => s + childCpuSeconds(p), 0);
  return out;
}

/** CPU seconds per role between two snapshots, and `total`. */
export function cpuDelta(a: CpuSnapshot, b: CpuSnapshot): Record<string, number> {
  const out: Record<string, number> = {};
  let total = 0;
  for (const role of Object.keys(b)) {
    out[role] = round((b[role] ?? 0) - (a[role] ?? 0), 2);
    total += (b[role] ?? 0) - (a[role] ?? 0);
  }
  out.total = round(total, 2);
  return out;
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Waits until the servers are idle: CPU over `windowMs` below `idleShare` of one core, twice in a
 * row, or `maxMs` passed. Returns the snapshot taken at that point and whether it settled.
 */
export async function settle(
  procs: Procs,
  o: { windowMs?: number; idleShare?: number; maxMs?: number } = {},
): Promise<{ snap: CpuSnapshot; settled: boolean; ms: number }> {
  const windowMs = o.windowMs ?? 1000;
  const t0 = Date.now();
  let quiet = 0;
  let prev = snapshot(procs);
  while (Date.now() - t0 < (o.maxMs ?? 30_000)) {
    await sleep(windowMs);
    const now = snapshot(procs);
    quiet = cpuDelta(prev, now).total! < (o.idleShare ?? 0.05) * (windowMs / 1000) ? quiet + 1 : 0;
    prev = now;
    if (quiet >= 2) return { snap: now, settled: true, ms: Date.now() - t0 };
  }
  return { snap: prev, settled: false, ms: Date.now() - t0 };
}

export function pct(xs: number[], p: number): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
}

export function round(x: number, d = 1): number {
  return Math.round(x * 10 ** d) / 10 ** d;
}

export function machine() {
  return { loadavg: loadavg().map((x) => round(x, 2)), nproc: cpus().length, cpu: cpus()[0]?.model ?? "?" };
}
