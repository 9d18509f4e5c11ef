import { execFile } from "node:child_process";
import { join } from "node:path";
import type { Logger } from "pino";

/**
 * Slot numbers of the batch system for GLUE2 (TotalSlots, FreeSlots, UsedSlots): Slurm's from
 * `sinfo`, Grid Engine's from `qhost -q`, read at most once per refresh period whatever the
 * request rate, so a broker polling /info never loads slurmctld or sge_qmaster.
 */

export interface Slots {
  total: number;
  /** CPUs running jobs. */
  allocated: number;
  /** CPUs free to start jobs (down or drained ones are in neither). */
  idle: number;
}

export interface ClusterSlots extends Slots {
  /** By partition (Slurm, without sinfo's `*` default marker) or cluster queue (Grid Engine) name. */
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

/**
 * Parses `qhost -q -xml`: per host, its queue instances with `slots`, `slots_used`, `slots_resv`
 * and `state_string`. A cluster queue sums its instances; an instance in any state (disabled,
 * unknown, alarm, suspended, error, ...) has no idle slot, as for qstat -g c's AVAIL. A host in
 * several queues counts once in the cluster's totals (its largest queue instance, its used slots
 * of all queues, capped by that). Elements that do not parse are skipped.
 */
export function parseQhost(text: string): ClusterSlots {
  type Inst = { slots: number; used: number; resv: number; state: string };
  const hosts = new Map<string, Map<string, Partial<Inst>>>();
  let host: Map<string, Partial<Inst>> | undefined;
  for (const raw of text.split("\n")) {
    const h = /^\s*<host name='([^'<>]+)'>/.exec(raw);
    if (h) {
      host = h[1] === "global" ? undefined : new Map();
      if (host) hosts.set(h[1]!, host);
      continue;
    }
    const v = /^\s*<queuevalue qname='([^'<>]+)' name='(slots|slots_used|slots_resv|state_string)'>([^<]*)<\/queuevalue>/.exec(raw);
    if (!v || !host) continue;
    const inst = host.get(v[1]!) ?? {};
    host.set(v[1]!, inst);
    if (v[2] === "state_string") inst.state = v[3]!;
    else if (/^\d{1,9}$/.test(v[3]!)) inst[v[2] === "slots" ? "slots" : v[2] === "slots_used" ? "used" : "resv"] = Number(v[3]);
  }
  const partitions = new Map<string, Slots>();
  let [total, allocated, idle] = [0, 0, 0];
  for (const queues of hosts.values()) {
    let [hTotal, hUsed, hFree] = [0, 0, 0];
    for (const [name, q] of queues) {
      if (q.slots === undefined) continue;
      const used = Math.min(q.used ?? 0, q.slots);
      const free = q.state ? 0 : Math.max(0, q.slots - used - (q.resv ?? 0));
      const p = partitions.get(name) ?? { total: 0, allocated: 0, idle: 0 };
      partitions.set(name, { total: p.total + q.slots, allocated: p.allocated + used, idle: p.idle + free });
      hTotal = Math.max(hTotal, q.slots);
      hUsed += used;
      hFree = Math.max(hFree, free);
    }
    hUsed = Math.min(hUsed, hTotal);
    total += hTotal;
    allocated += hUsed;
    idle += Math.min(hFree, hTotal - hUsed);
  }
  return { total, allocated, idle, partitions };
}

export interface SlotsOptions {
  binPath: string;
  log: Logger;
  /** How long an answer is used (default 60 s). */
  refreshMs?: number;
  /** Bound on one run of the tool (default 10 s). */
  timeoutMs?: number;
}
/** Slurm's name for the options. */
export type SlurmSlotsOptions = SlotsOptions;

interface Source {
  tool: string;
  args: string[];
  parse: (text: string) => ClusterSlots;
}

/**
 * Cached batch-system slots (`sinfo` or `qhost`). `get()` answers the cached value while it is fresh; a stale one is still
 * answered at once while one refresh runs in the background; only the very first call waits (at
 * most timeoutMs). A failed run keeps the last good answer and is retried after the refresh
 * period; undefined until the tool has answered once.
 */
export class LrmsSlots {
  private value: ClusterSlots | undefined;
  private at = -Infinity;
  private running: Promise<void> | undefined;

  constructor(
    private readonly o: SlotsOptions,
    private readonly src: Source,
  ) {}

  async get(now = Date.now()): Promise<ClusterSlots | undefined> {
    if (now - this.at >= (this.o.refreshMs ?? 60_000) && !this.running) {
      this.running = this.refresh().finally(() => (this.running = undefined));
    }
    if (this.value === undefined && this.running) await this.running;
    return this.value;
  }

  private async refresh(): Promise<void> {
    try {
      const { tool, args, parse } = this.src;
      const out = await run(join(this.o.binPath, tool), args, this.o.timeoutMs ?? 10_000);
      const v = parse(out);
      if (v.partitions.size === 0)
        throw new Error(`${tool} listed no ${tool === "sinfo" ? "partition" : "queue"}: ${JSON.stringify(out.slice(0, 200))}`);
      this.value = v;
    } catch (err) {
      this.o.log.warn(
        { err, reason: (err as Error).message },
        `info: batch system slots unavailable (${this.src.tool} failed); slot numbers are the last known ones`,
      );
    } finally {
      // Also after a failure: a broken tool is retried once per period, not once per request.
      this.at = Date.now();
    }
  }
}

/** Slurm: `sinfo -N`, per node and partition. */
export class SlurmSlots extends LrmsSlots {
  constructor(o: SlotsOptions) {
    super(o, { tool: "sinfo", args: ["-h", "-a", "-N", "-o", "%N %P %C"], parse: parseSinfo });
  }
}

/** Grid Engine: `qhost -q -xml`, per host and queue instance (the cell is the gateway's environment). */
export class SgeSlots extends LrmsSlots {
  constructor(o: SlotsOptions) {
    super(o, { tool: "qhost", args: ["-q", "-xml"], parse: parseQhost });
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
