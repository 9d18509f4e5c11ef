import { execFile } from "node:child_process";
import { join } from "node:path";
import type { Logger } from "pino";

/**
 * Slot numbers of the batch system for GLUE2 (TotalSlots, FreeSlots, UsedSlots): Slurm's from
 * `sinfo`, read at most once per refresh period whatever the request rate, so a broker polling
 * /info never loads slurmctld.
 */

export interface Slots {
  total: number;
  /** CPUs running jobs. */
  allocated: number;
  /** CPUs free to start jobs (down or drained ones are in neither). */
  idle: number;
}

export interface ClusterSlots extends Slots {
  /** By partition name (without sinfo's `*` default marker). */
  partitions: Map<string, Slots>;
}

/** One `sinfo -N -o '%N %P %C'` line: node, partition, CPUs as allocated/idle/other/total. */
const LINE = /^(\S+)\s+(\S+?)\*?\s+(\d+)\/(\d+)\/(\d+)\/(\d+)$/;

/**
 * Parses per-node, per-partition CPU lines. A node in several partitions counts once in the
 * cluster's totals and in each of its partitions. Lines that do not parse are skipped.
 */
export function parseSinfo(text: string): ClusterSlots {
  const nodes = new Map<string, Slots>();
  const partitions = new Map<string, Slots>();
  for (const raw of text.split("\n")) {
    const m = LINE.exec(raw.trim());
    if (!m) continue;
    const s: Slots = { allocated: Number(m[3]), idle: Number(m[4]), total: Number(m[6]) };
    nodes.set(m[1]!, s);
    const p = partitions.get(m[2]!) ?? { total: 0, allocated: 0, idle: 0 };
    partitions.set(m[2]!, { total: p.total + s.total, allocated: p.allocated + s.allocated, idle: p.idle + s.idle });
  }
  const sum = (k: keyof Slots) => [...nodes.values()].reduce((a, s) => a + s[k], 0);
  return { total: sum("total"), allocated: sum("allocated"), idle: sum("idle"), partitions };
}

export interface SlurmSlotsOptions {
  binPath: string;
  log: Logger;
  /** How long an answer is used (default 60 s). */
  refreshMs?: number;
  /** Bound on one sinfo run (default 10 s). */
  timeoutMs?: number;
}

/**
 * Cached `sinfo`. `get()` answers the cached value while it is fresh; a stale one is still
 * answered at once while one refresh runs in the background; only the very first call waits (at
 * most timeoutMs). A failed run keeps the last good answer and is retried after the refresh
 * period; undefined until sinfo has answered once.
 */
export class SlurmSlots {
  private value: ClusterSlots | undefined;
  private at = -Infinity;
  private running: Promise<void> | undefined;

  constructor(private readonly o: SlurmSlotsOptions) {}

  async get(now = Date.now()): Promise<ClusterSlots | undefined> {
    if (now - this.at >= (this.o.refreshMs ?? 60_000) && !this.running) {
      this.running = this.refresh().finally(() => (this.running = undefined));
    }
    if (this.value === undefined && this.running) await this.running;
    return this.value;
  }

  private async refresh(): Promise<void> {
    try {
      const out = await run(join(this.o.binPath, "sinfo"), ["-h", "-a", "-N", "-o", "%N %P %C"], this.o.timeoutMs ?? 10_000);
      const v = parseSinfo(out);
      if (v.partitions.size === 0) throw new Error(`sinfo listed no partition: ${JSON.stringify(out.slice(0, 200))}`);
      this.value = v;
    } catch (err) {
      this.o.log.warn({ err, reason: (err as Error).message }, "info: batch system slots unavailable (sinfo failed); slot numbers are the last known ones");
    } finally {
      // Also after a failure: a broken sinfo is retried once per period, not once per request.
      this.at = Date.now();
    }
  }
}

function run(file: string, args: string[], timeout: number): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(file, args, { timeout, maxBuffer: 4 << 20, env: { ...process.env, LC_ALL: "C" } }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${file} failed: ${err.message}${stderr ? `: ${String(stderr).trim().slice(0, 500)}` : ""}`));
      else resolve(String(stdout));
    });
  });
}
