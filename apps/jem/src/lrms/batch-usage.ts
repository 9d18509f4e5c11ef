/**
 * What the batch system measured of an ended job (the optional `usage` script of a back end,
 * apps/jem/backends/README.md): preferred to the job wrapper's `diag` in the usage record, field
 * by field, since the batch system sees the whole allocation, not the wrapper's child alone.
 */
export interface BatchUsage {
  /** Where the figures come from, e.g. `sacct` (accounting storage) or `jobcomp` (completion log). */
  source: string;
  /** Epoch seconds. */
  start?: number;
  end?: number;
  wall?: number;
  cpu?: number;
  cpuUser?: number;
  cpuSystem?: number;
  maxRssKb?: number;
  processors?: number;
  nodeCount?: number;
  nodes?: string;
}

const NUMERIC = ["start", "end", "wall", "cpu", "cpuUser", "cpuSystem", "maxRssKb", "processors", "nodeCount"] as const;
const SOURCE = /^[a-z][a-z0-9_-]{0,31}$/;
const NODES = /^[\][A-Za-z0-9._,-]{1,1024}$/;

/**
 * Parses `usage` output: `<jobId> source=<name> key=value ...` per job. Lines for jobs not asked
 * about, without a valid source, and keys not known or not valid are dropped (`bad` counts the
 * dropped lines); a job without a line has no batch figures.
 */
export function parseUsageOutput(stdout: string, jobIds: readonly string[]): { usage: Map<string, BatchUsage>; bad: number } {
  const wanted = new Set(jobIds);
  const usage = new Map<string, BatchUsage>();
  let bad = 0;
  for (const raw of stdout.split("\n")) {
    const words = raw.trim().split(/\s+/).filter(Boolean);
    if (words.length === 0) continue;
    const [jobId, ...pairs] = words;
    const kv = new Map(pairs.map((p) => [p.slice(0, p.indexOf("=")), p.slice(p.indexOf("=") + 1)] as const).filter(([k]) => k !== ""));
    const source = kv.get("source");
    if (!jobId || !wanted.has(jobId) || !source || !SOURCE.test(source)) {
      bad++;
      continue;
    }
    const u: BatchUsage = { source };
    for (const k of NUMERIC) {
      const v = kv.get(k);
      if (v !== undefined && /^\d{1,15}$/.test(v)) u[k] = Number(v);
    }
    const nodes = kv.get("nodes");
    if (nodes && NODES.test(nodes)) u.nodes = nodes;
    usage.set(jobId, u);
  }
  return { usage, bad };
}
