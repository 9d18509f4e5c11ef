import { readdir } from "node:fs/promises";
import { join } from "node:path";
import { execa } from "execa";
import type { CompiledConfig } from "@ce/config";
import { lookupAccounts } from "@ce/mapping";
import { Dir, removeEntry } from "@ce/sessionfs";
import type { Logger } from "pino";
import { killAllOf, pidsOfUid } from "./procs.js";
import { emptyHome, homeOf, removeMqueues, removeSysvIpc } from "./scrub-leftovers.js";

/**
 * What must be true of a pool account before its lease is released and another grid identity
 * may get it (packages/mapping README "Releasing pool leases"): no process of it runs, it has no
 * crontab or at job, nothing of it is left in the shared temporary directories, its home
 * directory is empty, and it owns no SysV IPC object or POSIX message queue (scrub-leftovers.ts); with Slurm
 * or Grid Engine, the batch system lists no job of it. `scrubAccount` makes that true where it can (as root) and
 * answers the reason when it cannot: the lease is then kept, and the next identity gets another
 * account.
 */

/** Shared temporary directories: entries the account owns here are removed. */
export const SHARED_TEMP_DIRS = ["/tmp", "/var/tmp", "/dev/shm"];
/** Cron and at spool directories of the common distributions (files there named by or owned by the account). */
const CRON_SPOOLS = ["/var/spool/cron/crontabs", "/var/spool/cron/tabs", "/var/spool/cron"];
const AT_SPOOLS = ["/var/spool/cron/atjobs", "/var/spool/at"];

const errno = (e: unknown) => (e as NodeJS.ErrnoException).code;

export interface ScrubOptions {
  config: CompiledConfig;
  log: Logger;
  /** Overrides for tests. */
  tempDirs?: readonly string[];
  cronSpools?: readonly string[];
  atSpools?: readonly string[];
  /** Where the mqueue file system is mounted (default /dev/mqueue). */
  mqueueDir?: string;
}

/**
 * Removes the entries of `dir` owned by `uid` (and, one level down, in world-writable
 * directories such as /tmp/.X11-unix) without following any link: each entry is checked by
 * lstat through the open directory and removed by `@ce/sessionfs` (descriptor-relative). With
 * every process of the account gone, nothing can swap an entry between check and removal (a
 * sticky directory lets only an entry's owner rename it). Returns what could not be removed.
 */
async function removeOwned(path: string, uid: number, depth = 1): Promise<string[]> {
  let dir: Dir;
  try {
    dir = await Dir.open(path);
  } catch (e) {
    if (errno(e) === "ENOENT") return [];
    return [`${path}: ${(e as Error).message}`];
  }
  const left: string[] = [];
  try {
    for (const name of await dir.entries()) {
      const st = await dir.lstat(name).catch(() => undefined);
      if (!st) continue;
      if (st.uid === uid) {
        await removeEntry(dir, name, `${path}/${name}`).catch((e: unknown) => left.push(`${path}/${name}: ${(e as Error).message}`));
      } else if (depth > 0 && st.isDirectory() && (st.mode & 0o002) !== 0) {
        left.push(...(await removeOwned(join(path, name), uid, depth - 1)));
      }
    }
  } finally {
    await dir.close();
  }
  return left;
}

async function have(cmd: string): Promise<boolean> {
  return (await execa("sh", ["-c", 'command -v "$1"', "have", cmd], { reject: false })).exitCode === 0;
}

/** Crontab and at jobs: removed with the tools when installed, and from the spool files in any case. */
async function removeSchedules(account: string, uid: number, o: ScrubOptions): Promise<string[]> {
  const left: string[] = [];
  if (await have("crontab")) {
    const r = await execa("crontab", ["-r", "-u", account], { reject: false, timeout: 30_000 });
    if (r.exitCode !== 0 && !/no crontab/i.test(String(r.stderr)))
      left.push(`crontab -r -u ${account}: ${String(r.stderr).trim().slice(0, 200)}`);
  }
  if (await have("atq")) {
    const r = await execa("atq", [], { reject: false, timeout: 30_000 });
    // "<id>\t<date> <queue> <user>" per job.
    const ids = String(r.stdout)
      .split("\n")
      .map((l) => l.trim().split(/\s+/))
      .filter((f) => f.length >= 2 && f[f.length - 1] === account && /^\d+$/.test(f[0]!))
      .map((f) => f[0]!);
    if (ids.length > 0) await execa("atrm", ids, { reject: false, timeout: 30_000 });
  }
  for (const spool of o.cronSpools ?? CRON_SPOOLS) {
    const dir = await Dir.open(spool).catch(() => undefined);
    if (!dir) continue;
    try {
      const st = await dir.lstat(account).catch(() => undefined);
      if (st && !st.isDirectory())
        await removeEntry(dir, account, `${spool}/${account}`).catch((e: unknown) =>
          left.push(`${spool}/${account}: ${(e as Error).message}`),
        );
    } finally {
      await dir.close();
    }
  }
  for (const spool of o.atSpools ?? AT_SPOOLS) {
    const names = await readdir(spool).catch(() => [] as string[]);
    if (names.length === 0) continue;
    left.push(...(await removeOwned(spool, uid, 0)));
  }
  return left;
}

/** Slurm: ids of the account's jobs the batch system still lists (any state); undefined when squeue cannot say. */
async function slurmJobs(account: string, config: CompiledConfig): Promise<string[] | undefined> {
  const r = await execa(join(config.lrms.slurm.binPath, "squeue"), ["-h", "-u", account, "-o", "%i"], { reject: false, timeout: 30_000 });
  if (r.exitCode !== 0) return undefined;
  return String(r.stdout)
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l !== "");
}

/**
 * Grid Engine: ids of the account's jobs qstat still lists (pending, held, running, suspended, in
 * deletion or in error); undefined when qstat cannot say (qmaster unreachable, no cell in the JEM's
 * environment, an answer that is not qstat's XML). The cell is the JEM's environment, as for the
 * back end's scripts.
 */
export async function sgeJobs(account: string, binPath: string): Promise<string[] | undefined> {
  const r = await execa(join(binPath, "qstat"), ["-u", account, "-xml"], { reject: false, timeout: 30_000, env: { LC_ALL: "C" } });
  const out = String(r.stdout);
  if (r.exitCode !== 0 || !/<job_info[\s>]/.test(out) || !out.trimEnd().endsWith("</job_info>")) return undefined;
  // One <job_list> per job (per running task of an array job): the ids, once each.
  return [...new Set([...out.matchAll(/<JB_job_number>(\d+)<\/JB_job_number>/g)].map((m) => m[1]!))];
}

/** The batch system's jobs of the account, or the reason the lease must stay; undefined when it has none. */
async function batchJobsLeft(account: string, config: CompiledConfig): Promise<string | undefined> {
  const [tool, ids] =
    config.lrms.backend === "slurm"
      ? ["squeue", await slurmJobs(account, config)]
      : config.lrms.backend === "sge"
        ? ["qstat", await sgeJobs(account, config.lrms.sge.binPath)]
        : [undefined, []];
  if (ids === undefined) return `${tool} cannot list the jobs of ${account}`;
  if (ids.length > 0) return `${tool} lists ${ids.length} job(s) of ${account} (ids ${ids.slice(0, 5).join(" ")})`;
  return undefined;
}

/**
 * Makes a pool account clean for its next holder. Returns undefined when it is (the lease may go),
 * else the reason it is not (the lease stays).
 */
export async function scrubAccount(account: string, o: ScrubOptions): Promise<string | undefined> {
  const a = (await lookupAccounts([account])).get(account);
  // No such account: nothing can run as it or own anything by that name.
  if (!a) return undefined;
  if (a.uid === 0) return `account ${account} is root`;
  const jobs = await batchJobsLeft(account, o.config);
  if (jobs !== undefined) return jobs;
  // Schedules first: a cron job started after the kill below would run as the next holder.
  const schedules = await removeSchedules(account, a.uid, o);
  const alive = await killAllOf(a.uid, a.gid);
  const files: string[] = [];
  for (const d of o.tempDirs ?? SHARED_TEMP_DIRS) files.push(...(await removeOwned(d, a.uid)));
  files.push(...(await emptyHome(await homeOf(account), a.uid, o.log)));
  files.push(...(await removeSysvIpc(a.uid)));
  files.push(...(await removeMqueues(o.mqueueDir ?? "/dev/mqueue", a.uid, o.log, removeOwned)));
  const problems = [
    ...schedules,
    ...(alive.length > 0 ? [`${alive.length} process(es) of ${account} could not be ended (pids ${alive.slice(0, 5).join(" ")})`] : []),
    ...files.slice(0, 5),
  ];
  if (problems.length > 0) {
    o.log.warn({ account, problems }, "pool account not clean: its lease is kept");
    return problems.join("; ");
  }
  return undefined;
}

/** The scrubber a privileged JEM hands to lease releases (none without root: nothing to scrub as). */
export function accountScrubber(o: ScrubOptions): ((account: string) => Promise<string | undefined>) | undefined {
  if (process.geteuid?.() !== 0) return undefined;
  return (account) => scrubAccount(account, o);
}

export { pidsOfUid };
