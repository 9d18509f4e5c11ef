import { existsSync } from "node:fs";
import { mkdir, readFile, rmdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { Logger } from "pino";
import { killPid, procStat } from "./procs.js";

/**
 * One cgroup per fork job, created and filled by the JEM as root (docs/fork-containment.md).
 * Every `cgroup.procs` stays root's: a job cannot move a process out, and everything it starts,
 * double-forked `setsid` daemons included, stays in. At the job's end the cgroup is frozen, every
 * process in it killed, and the cgroup removed.
 *
 * v2: one directory `<mount>/<parent>/<jobId>`; memory limit and OOM count when the memory
 * controller can be enabled below the parent, CPU time from `cpu.stat` (always there).
 * v1: the same relative path in the freezer hierarchy (required: it is what stops a forking job
 * while it is killed) and in pids, memory and cpuacct when mounted.
 */

export type CgroupMode = "auto" | "v2" | "v1" | "off";

export interface CgroupSettings {
  cgroup: CgroupMode;
  cgroupMount: string;
  cgroupParent: string;
}

interface Hierarchy {
  /** Controller name (v1) or "unified" (v2). */
  name: string;
  /** `<mount point>/<parent>`. */
  parent: string;
}

const V1_OPTIONAL = ["pids", "memory", "cpuacct"] as const;
const SETTLE_MS = 5_000;

const errno = (e: unknown) => (e as NodeJS.ErrnoException).code;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function tryWrite(file: string, text: string): Promise<boolean> {
  try {
    await writeFile(file, text);
    return true;
  } catch {
    return false;
  }
}

async function counter(file: string, key: string): Promise<number> {
  const text = await readFile(file, "utf8").catch(() => "");
  const m = new RegExp(`^${key} (\\d+)$`, "m").exec(text);
  return m ? Number(m[1]) : 0;
}

export class JobCgroups {
  private constructor(
    readonly kind: "v1" | "v2",
    private readonly hierarchies: Hierarchy[],
    /** Memory limits and OOM counts are available. */
    readonly memory: boolean,
    /** CPU time of the whole job can be read. */
    readonly cpu: boolean,
    /** `/<parent>`: how /proc/<pid>/cgroup names the parent in each hierarchy. */
    private readonly relParent: string,
  ) {}

  /**
   * The cgroups this host offers for jobs, or undefined (with the reason) when none can be used:
   * mode off, nothing mounted, or the parent cannot be created and written (not root).
   */
  static async detect(s: CgroupSettings): Promise<{ cgroups?: JobCgroups; reason?: string }> {
    if (s.cgroup === "off") return { reason: "lrms.fork.cgroup is off" };
    const m = s.cgroupMount;
    const pureV2 = existsSync(join(m, "cgroup.controllers"));
    const hybridV2 = existsSync(join(m, "unified", "cgroup.controllers"));
    const v1 = existsSync(join(m, "freezer", "cgroup.procs"));
    const tries: Array<() => Promise<JobCgroups | string>> = [];
    const v2At = (root: string) => () => JobCgroups.setupV2(root, s.cgroupParent);
    if (s.cgroup === "v2")
      tries.push(pureV2 ? v2At(m) : hybridV2 ? v2At(join(m, "unified")) : async () => `no cgroup v2 hierarchy under ${m}`);
    else if (s.cgroup === "v1")
      tries.push(v1 ? () => JobCgroups.setupV1(m, s.cgroupParent) : async () => `no cgroup v1 freezer hierarchy at ${join(m, "freezer")}`);
    else {
      // auto: v2 where it is the whole tree; on a hybrid host the controllers live in v1, so
      // v1 first, and the controller-less v2 tree (tracking and kill only) last.
      if (pureV2) tries.push(v2At(m));
      if (v1) tries.push(() => JobCgroups.setupV1(m, s.cgroupParent));
      if (hybridV2) tries.push(v2At(join(m, "unified")));
      if (tries.length === 0) tries.push(async () => `no cgroup hierarchy is mounted under ${m}`);
    }
    const reasons: string[] = [];
    for (const t of tries) {
      const r = await t();
      if (typeof r !== "string") return { cgroups: r };
      reasons.push(r);
    }
    return { reason: reasons.join("; ") };
  }

  /** Creates `<dir>` (and its parents) and proves a child can be made and removed in it. */
  private static async usable(dir: string): Promise<string | undefined> {
    try {
      await mkdir(dir, { recursive: true });
      const probe = join(dir, `.probe-${process.pid}`);
      await mkdir(probe).catch((e: unknown) => {
        if (errno(e) !== "EEXIST") throw e;
      });
      await rmdir(probe);
      return undefined;
    } catch (e) {
      return `cannot create cgroups in ${dir}: ${(e as Error).message}`;
    }
  }

  private static async setupV2(root: string, parent: string): Promise<JobCgroups | string> {
    const dir = join(root, parent);
    const why = await JobCgroups.usable(dir);
    if (why) return why;
    // Controllers for the jobs: enabled on every level from the root down (best effort: a
    // level that holds processes refuses, and then the parent simply does not offer them).
    const levels = parent.split("/");
    for (let i = 0; i < levels.length; i++) {
      const at = join(root, ...levels.slice(0, i));
      for (const c of ["memory", "pids"]) await tryWrite(join(at, "cgroup.subtree_control"), `+${c}`);
    }
    for (const c of ["memory", "pids"]) await tryWrite(join(dir, "cgroup.subtree_control"), `+${c}`);
    const enabled = (await readFile(join(dir, "cgroup.subtree_control"), "utf8").catch(() => "")).split(/\s+/);
    return new JobCgroups("v2", [{ name: "unified", parent: dir }], enabled.includes("memory"), true, `/${parent}`);
  }

  private static async setupV1(mount: string, parent: string): Promise<JobCgroups | string> {
    const hierarchies: Hierarchy[] = [];
    for (const name of ["freezer", ...V1_OPTIONAL]) {
      if (!existsSync(join(mount, name, "cgroup.procs"))) continue;
      const dir = join(mount, name, parent);
      const why = await JobCgroups.usable(dir);
      if (why && name === "freezer") return why;
      if (!why) hierarchies.push({ name, parent: dir });
    }
    const has = (n: string) => hierarchies.some((h) => h.name === n);
    return new JobCgroups("v1", hierarchies, has("memory"), has("cpuacct"), `/${parent}`);
  }

  describe(): string {
    const where = this.hierarchies.map((h) => h.parent).join(", ");
    return `cgroup ${this.kind} (${this.hierarchies.map((h) => h.name).join(", ")}) under ${where}; memory limit ${this.memory ? "by cgroup" : "by RLIMIT_AS"}, CPU time ${this.cpu ? "of the whole job" : "per process (RLIMIT_CPU)"}`;
  }

  /** How /proc/<pid>/cgroup names the job's cgroup (the submit script waits for it). */
  rel(jobId: string): string {
    return `${this.relParent}/${jobId}`;
  }

  /** How many lines of /proc/<pid>/cgroup name it once the job is placed. */
  get count(): number {
    return this.hierarchies.length;
  }

  private dir(h: Hierarchy, jobId: string): string {
    return join(h.parent, jobId);
  }

  private of(name: string): Hierarchy | undefined {
    return this.hierarchies.find((h) => h.name === name);
  }

  /** The primary hierarchy: freezer (v1) or the unified tree. */
  private get primary(): Hierarchy {
    return this.hierarchies[0]!;
  }

  /** The file the wrapper reads for OOM kills (a memory-exceeded reason), if any. */
  oomFile(jobId: string): string | undefined {
    if (!this.memory) return undefined;
    return this.kind === "v2"
      ? join(this.dir(this.primary, jobId), "memory.events")
      : join(this.dir(this.of("memory")!, jobId), "memory.oom_control");
  }

  /** Creates the job's cgroup (an existing one is kept: a resumed submission's job runs in it). */
  async create(jobId: string, limits: { memoryMB?: number | undefined }): Promise<void> {
    for (const h of this.hierarchies) {
      await mkdir(this.dir(h, jobId)).catch((e: unknown) => {
        if (errno(e) !== "EEXIST") throw e;
      });
    }
    if (!this.memory || !limits.memoryMB) return;
    const bytes = String(limits.memoryMB * 1024 * 1024);
    if (this.kind === "v2") {
      const d = this.dir(this.primary, jobId);
      await writeFile(join(d, "memory.max"), bytes);
      // No swap beyond the limit where swap is accounted.
      await tryWrite(join(d, "memory.swap.max"), "0");
    } else {
      const d = this.dir(this.of("memory")!, jobId);
      await writeFile(join(d, "memory.limit_in_bytes"), bytes);
      await tryWrite(join(d, "memory.memsw.limit_in_bytes"), bytes);
    }
  }

  /**
   * Moves process `pid` (the job's first, waiting for this before it starts anything) into the
   * job's cgroup in every hierarchy, the primary one last.
   */
  async place(jobId: string, pid: number): Promise<void> {
    for (const h of [...this.hierarchies].reverse()) await writeFile(join(this.dir(h, jobId), "cgroup.procs"), `${pid}\n`);
  }

  /** Pids in the job's cgroup (primary hierarchy); empty when it is gone. */
  async members(jobId: string): Promise<number[]> {
    const text = await readFile(join(this.dir(this.primary, jobId), "cgroup.procs"), "utf8").catch(() => "");
    return text.split("\n").filter(Boolean).map(Number);
  }

  /** CPU seconds the whole job used so far (undefined: not measured here). */
  async cpuSeconds(jobId: string): Promise<number | undefined> {
    if (this.kind === "v2") {
      const usec = await counter(join(this.dir(this.primary, jobId), "cpu.stat"), "usage_usec");
      return usec / 1e6;
    }
    const h = this.of("cpuacct");
    if (!h) return undefined;
    const ns = Number((await readFile(join(this.dir(h, jobId), "cpuacct.usage"), "utf8").catch(() => "0")).trim());
    return Number.isFinite(ns) ? ns / 1e9 : undefined;
  }

  /** Processes the kernel killed for the memory limit. */
  async oomKills(jobId: string): Promise<number> {
    const f = this.oomFile(jobId);
    return f ? counter(f, "oom_kill") : 0;
  }

  private async freeze(jobId: string, on: boolean): Promise<void> {
    const d = this.dir(this.primary, jobId);
    if (this.kind === "v2") {
      await tryWrite(join(d, "cgroup.freeze"), on ? "1" : "0");
      return;
    }
    await tryWrite(join(d, "freezer.state"), on ? "FROZEN" : "THAWED");
    // FREEZING until every task stopped; bounded (a task in uninterruptible sleep may hold it).
    for (let i = 0; on && i < 50; i++) {
      if ((await readFile(join(d, "freezer.state"), "utf8").catch(() => "FROZEN")).trim() === "FROZEN") break;
      await sleep(20);
    }
  }

  /**
   * Ends the job's cgroup: frozen (nothing forks while it is emptied), every process killed,
   * thawed (the kills land), waited for until empty, removed. Returns the pids still in it when
   * it could not be emptied (empty list: done). A cgroup already gone is done.
   */
  async end(jobId: string, log?: Logger): Promise<number[]> {
    const primary = this.dir(this.primary, jobId);
    if (!existsSync(primary)) return this.removeAll(jobId);
    if (this.kind === "v2" && (await tryWrite(join(primary, "cgroup.kill"), "1"))) {
      // cgroup.kill (Linux 5.14+) does freeze-and-kill in the kernel.
    } else {
      await this.freeze(jobId, true);
      for (const pid of await this.members(jobId)) killPid(pid);
      await this.freeze(jobId, false);
    }
    const deadline = Date.now() + SETTLE_MS;
    let left = await this.members(jobId);
    while (left.length > 0 && Date.now() < deadline) {
      for (const pid of left) killPid(pid);
      await sleep(20);
      left = await this.members(jobId);
    }
    if (left.length > 0) {
      const states = await Promise.all(left.slice(0, 5).map(async (p) => `${p}:${(await procStat(p))?.state ?? "?"}`));
      log?.warn({ jobId, left: left.length, states }, "job cgroup could not be emptied");
      return left;
    }
    return this.removeAll(jobId, log);
  }

  private async removeAll(jobId: string, log?: Logger): Promise<number[]> {
    for (const h of this.hierarchies) {
      const d = this.dir(h, jobId);
      for (let i = 0; ; i++) {
        try {
          await rmdir(d);
          break;
        } catch (e) {
          if (errno(e) === "ENOENT") break;
          // EBUSY: exiting tasks still counted for a moment.
          if (i >= 50) {
            log?.warn({ jobId, cgroup: d, err: e }, "job cgroup not removed");
            break;
          }
          await sleep(20);
        }
      }
    }
    return [];
  }
}
