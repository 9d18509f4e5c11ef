/**
 * A private single-node Slurm for end-to-end suites, started with scripts/slurm/start-slurm.sh on
 * its own free ports and directory, so it never collides with another suite's cluster (e.g.
 * apps/jem/test/slurm.test.ts) running at the same time. `stop()` cancels its jobs, stops the
 * daemons by pid file and purges the directory.
 *
 * `{ accounting: true }` adds Slurm's accounting storage (scripts/slurm/start-slurmdbd.sh): a private
 * MariaDB and slurmdbd on loopback, associations, limits and QOS enforced, jobacct_gather/linux
 * sampling every second (sacct's MaxRSS of short jobs). Only the suites that ask pay for it (a few s).
 */
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { join, resolve } from "node:path";
import { freePort } from "./ports.js";

const SCRIPTS = resolve(import.meta.dirname, "../../../scripts/slurm");

/** Slurm daemons and the project's start script are present (CI installs slurm-wlm + munge). */
export const HAS_SLURM =
  existsSync(join(SCRIPTS, "start-slurm.sh")) &&
  spawnSync("sh", ["-c", "command -v sbatch && command -v slurmctld && command -v munged"]).status === 0;

/** MariaDB and slurmdbd are installed too (scripts/ensure-system-deps.sh slurmdbd). */
export const HAS_SLURMDBD =
  HAS_SLURM && spawnSync("sh", ["-c", "command -v slurmdbd && command -v mariadbd && command -v mariadb-install-db"]).status === 0;

export interface SlurmCluster {
  dir: string;
  /** Value for SLURM_CONF (every Slurm client call needs it). */
  conf: string;
  ctldPort: number;
  /** `sacctmgr -i <args>` against this cluster's slurmdbd (accounting clusters only); its output. */
  sacctmgr(...args: string[]): string;
  stop(): void;
}

/** `dir` must be short (munge socket path ≤ 100 bytes); default /tmp/ce-slurm-e<pid>. */
export async function startSlurm(
  dir = `/tmp/ce-slurm-e${process.pid}`,
  opts: { gpus?: number; accounting?: boolean } = {},
): Promise<SlurmCluster> {
  const [ctldPort, slurmdPort] = [await freePort(), await freePort()];
  const accounting = opts.accounting
    ? { SLURMDBD_PORT: String(await freePort()), SLURM_DB_PORT: String(await freePort()), SLURM_ACCT_GATHER_SECONDS: "1" }
    : {};
  const out = execFileSync("bash", [join(SCRIPTS, "start-slurm.sh"), dir], {
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"],
    env: {
      ...process.env,
      SLURM_CPUS: "8",
      SLURMCTLD_PORT: String(ctldPort),
      SLURMD_PORT: String(slurmdPort),
      SLURM_MIN_JOB_AGE: "300",
      SLURM_GPUS: String(opts.gpus ?? 0),
      ...accounting,
    },
  });
  const conf = /SLURM_CONF=(\S+)/.exec(out)?.[1]?.replace(/^'|'$/g, "");
  if (!conf || !existsSync(conf)) throw new Error(`start-slurm.sh printed no usable SLURM_CONF:\n${out}`);
  return {
    dir,
    conf,
    ctldPort,
    sacctmgr(...args: string[]) {
      if (!opts.accounting) throw new Error("sacctmgr: this test cluster was started without accounting storage");
      return execFileSync("sacctmgr", ["-i", ...args], { encoding: "utf8", env: { ...process.env, SLURM_CONF: conf } });
    },
    stop() {
      execFileSync("bash", [join(SCRIPTS, "stop-slurm.sh"), dir, "--purge"], {
        stdio: "ignore",
        env: { ...process.env, SLURM_CONF: conf },
      });
    },
  };
}
