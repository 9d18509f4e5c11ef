import { execFileSync } from "node:child_process";
import { readdir, readFile } from "node:fs/promises";
import { execa } from "execa";

/**
 * What the JEM learns about processes from /proc (as root it reads every process's). Nothing
 * here trusts a name: processes are found by uid, start time and environment, all kernel facts
 * a process cannot fake about another.
 */

/** Clock ticks per second of /proc/<pid>/stat's start time (100 on every Linux we know; asked once). */
export const CLK_TCK = (() => {
  try {
    const n = Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim());
    return Number.isInteger(n) && n > 0 ? n : 100;
  } catch {
    return 100;
  }
})();

export interface ProcStat {
  state: string;
  pgid: number;
  /** Start time in clock ticks after boot. */
  start: number;
}

/** /proc/<pid>/stat (comm may hold blanks and ')': fields are split after the last ')'). */
export async function procStat(pid: number): Promise<ProcStat | undefined> {
  const text = await readFile(`/proc/${pid}/stat`, "utf8").catch(() => undefined);
  if (!text) return undefined;
  const f = text.slice(text.lastIndexOf(")") + 2).split(" ");
  const start = Number(f[19]);
  const pgid = Number(f[2]);
  if (!f[0] || !Number.isSafeInteger(start) || !Number.isSafeInteger(pgid)) return undefined;
  return { state: f[0], pgid, start };
}

/** Real, effective, saved and file-system uid of a process. */
export async function procUids(pid: number): Promise<number[] | undefined> {
  const text = await readFile(`/proc/${pid}/status`, "utf8").catch(() => undefined);
  const m = text ? /^Uid:\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)/m.exec(text) : null;
  return m ? m.slice(1, 5).map(Number) : undefined;
}

/** Seconds since boot, the clock of ProcStat.start. */
export async function uptimeSeconds(): Promise<number> {
  return Number.parseFloat(await readFile("/proc/uptime", "utf8"));
}

async function pids(): Promise<number[]> {
  return (await readdir("/proc")).filter((n) => /^\d+$/.test(n)).map(Number);
}

const alive = (s: ProcStat | undefined) => s !== undefined && s.state !== "Z" && s.state !== "X";

/** Live processes (not zombies) any of whose uids is `uid`. */
export async function pidsOfUid(uid: number): Promise<number[]> {
  const out: number[] = [];
  for (const pid of await pids()) {
    const uids = await procUids(pid);
    if (uids?.includes(uid) && alive(await procStat(pid))) out.push(pid);
  }
  return out;
}

/**
 * Live processes whose environment holds `entry` (NAME=value), of `uid` when given. A process can
 * drop its environment (the cgroup, or the uid sweep before a pool account changes hands, catch
 * those); this finds what a job left without a cgroup when the account is shared.
 */
export async function pidsWithEnv(entry: string, uid?: number): Promise<number[]> {
  const want = Buffer.from(`${entry}\0`);
  const out: number[] = [];
  for (const pid of await pids()) {
    if (pid === process.pid) continue;
    if (uid !== undefined && !(await procUids(pid))?.includes(uid)) continue;
    const env = await readFile(`/proc/${pid}/environ`).catch(() => undefined);
    if (!env) continue;
    const i = env.indexOf(want);
    if ((i === 0 || (i > 0 && env[i - 1] === 0)) && alive(await procStat(pid))) out.push(pid);
  }
  return out;
}

/** SIGKILL, ignoring a process already gone. */
export function killPid(pid: number, signal: NodeJS.Signals = "SIGKILL"): void {
  try {
    process.kill(pid, signal);
  } catch {
    // gone already (ESRCH)
  }
}

/**
 * Ends every process of an account: `kill(-1)` sent *as* the account reaches exactly the
 * processes it may signal (real or saved uid the account's) in one pass of the kernel's task
 * list, in which no new process can start; repeated while /proc still shows one. Returns the
 * pids still alive afterwards (empty: none left).
 */
export async function killAllOf(uid: number, gid: number, rounds = 5): Promise<number[]> {
  let left = await pidsOfUid(uid);
  for (let i = 0; i < rounds && left.length > 0; i++) {
    await execa("setpriv", [`--reuid=${uid}`, `--regid=${gid}`, "--clear-groups", "--", "kill", "-KILL", "--", "-1"], {
      reject: false,
      timeout: 10_000,
      env: { PATH: "/usr/bin:/bin" },
      extendEnv: false,
    });
    // Processes of the uid that the account cannot signal (another uid as real and saved uid, this one as effective): root's KILL.
    for (const pid of await pidsOfUid(uid)) killPid(pid);
    await new Promise((r) => setTimeout(r, 50 * (i + 1)));
    left = await pidsOfUid(uid);
  }
  return left;
}
