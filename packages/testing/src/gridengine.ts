/**
 * A private single-host Grid Engine for end-to-end suites: scripts/gridengine/start-sge.sh makes a
 * cell of its own under `dir` (own SGE_ROOT, classic spooling, host_aliases for the loopback host
 * name: see the script's header) and starts sge_qmaster and sge_execd on free loopback ports (a
 * preloaded shim binds them to 127.0.0.1: Grid Engine has no bind option), so it never
 * meets the packaged cell (/var/lib/gridengine/default) or another suite's. Installs nothing:
 * `scripts/ensure-system-deps.sh sge` does. `stop()` deletes its jobs and stops the daemons by pid.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { join, resolve } from "node:path";
import { freePort } from "./ports.js";

const SCRIPTS = resolve(import.meta.dirname, "../../../scripts/gridengine");

/** Debian's gridengine-master/-exec/-client are installed. */
export const HAS_GRIDENGINE =
  existsSync("/usr/lib/gridengine/sge_qmaster") &&
  existsSync("/usr/lib/gridengine/sge_execd") &&
  spawnSync("sh", ["-c", "command -v qsub && command -v qstat"]).status === 0;

export interface GridEngineCluster {
  dir: string;
  /** SGE_ROOT, SGE_CELL, SGE_QMASTER_PORT, SGE_EXECD_PORT: every client call and the JEM need them. */
  env: Record<string, string>;
  /** The cell's name for this host (the reverse name of 127.0.0.1). */
  host: string;
  /** sge_qmaster's and sge_execd's pids (the daemons, after they forked into the background). */
  pids: { qmaster: number; execd: number };
  stop(): void;
}

export async function startGridEngine(
  dir = `/tmp/ce-sge-e${process.pid}`,
  opts: { queues?: string[]; slots?: number } = {},
): Promise<GridEngineCluster> {
  const [qmaster, execd] = [await freePort(), await freePort()];
  const stop = () => execFileSync("bash", [join(SCRIPTS, "stop-sge.sh"), dir, "--purge"], { stdio: "ignore" });
  let out: string;
  try {
    out = execFileSync("bash", [join(SCRIPTS, "start-sge.sh"), dir], {
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"],
      env: {
        ...process.env,
        SGE_QMASTER_PORT: String(qmaster),
        SGE_EXECD_PORT: String(execd),
        SGE_QUEUES: (opts.queues ?? ["main"]).join(" "),
        SGE_SLOTS: String(opts.slots ?? 4),
      },
    });
  } catch (e) {
    stop(); // whatever half started
    const err = e as { stderr?: string; message: string };
    throw new Error(`start-sge.sh failed: ${err.stderr ?? err.message}`);
  }
  const env = Object.fromEntries(
    [...out.matchAll(/\b(SGE_ROOT|SGE_CELL|SGE_QMASTER_PORT|SGE_EXECD_PORT)=(\S+)/g)].map((m) => [m[1]!, m[2]!]),
  );
  const host = /SGE_HOST=(\S+)/.exec(out)?.[1];
  const pids = /qmaster pid (\d+), execd pid (\d+)/.exec(out);
  if (Object.keys(env).length !== 4 || !host || !pids) {
    stop();
    throw new Error(`start-sge.sh printed no usable environment:\n${out}`);
  }
  return { dir, env, host, pids: { qmaster: Number(pids[1]), execd: Number(pids[2]) }, stop };
}
