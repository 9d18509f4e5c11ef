import { Failure, parseTokenOwner } from "@ce/model";
/**
 * A usage record: the facts of one job attempt that ended (FINISHED, FAILED or KILLED), as the
 * terminal move's script appended them to the usage stream (packages/store lua/update.lua: the job
 * record's hash fields, `recordId`, and `u.<name>` facts from the JEM).
 */
export interface UsageRecord {
  /** `<job id>/<restarts left>`: each attempt of a rerun job is its own record. */
  recordId: string;
  jobId: string;
  batchId: string | null;
  /** The owner as the CE knows it: a DN, or `<iss>/<sub>` for a token (`sub` escaped: @ce/model tokenOwner). */
  owner: string;
  ownerDn: string | null;
  tokenIssuer: string | null;
  tokenSubject: string | null;
  /** Never empty: from the FQANs / wlcg.groups, else the configured VOMS-less VO. */
  vo: string;
  voGroup: string | null;
  voRole: string | null;
  /** Primary FQAN (VOMS) or first group (token), as submitted. */
  fqan: string | null;
  /** Every FQAN, or every wlcg.groups entry, primary first. */
  fqans: string[];
  account: string | null;
  uid: number | null;
  queue: string;
  partition: string | null;
  /** Epoch seconds. */
  submitTime: number;
  startTime: number | null;
  endTime: number;
  wallSeconds: number;
  cpuUserSeconds: number;
  cpuSystemSeconds: number;
  cpuSeconds: number;
  maxRssKb: number | null;
  processors: number;
  nodeCount: number;
  nodes: string | null;
  exitCode: number | null;
  /** REST terminal state: FINISHED, FAILED or KILLED. */
  state: "FINISHED" | "FAILED" | "KILLED";
  failureCause: string | null;
  failure: string | null;
  bytesIn: number;
  bytesOut: number;
  bytesInCache: number;
  benchmarkType: string | null;
  benchmarkValue: number | null;
}

export interface RecordOptions {
  /** VO of jobs with neither FQANs nor groups. */
  vomslessVo: string;
}

export class BadUsageEntryError extends Failure<"ACCT_BAD_ENTRY"> {
  constructor(
    readonly entryId: string,
    reason: string,
  ) {
    super("ACCT_BAD_ENTRY", `usage stream entry ${entryId}: ${reason}`);
  }
}

/** Stream entry fields (flat list, as XREADGROUP returns them) → a hash; a repeated field keeps its last value. */
export function entryFields(flat: readonly string[]): Record<string, string> {
  const h: Record<string, string> = {};
  for (let i = 0; i + 1 < flat.length; i += 2) h[flat[i]!] = flat[i + 1]!;
  return h;
}

const num = (v: string | undefined): number | null => {
  if (v === undefined || v === "") return null;
  const n = Number(v);
  return Number.isFinite(n) ? n : null;
};
const secs = (ms: number | null) => (ms === null ? null : Math.floor(ms / 1000));
const json = <T>(v: string | undefined): T | undefined => {
  if (!v) return undefined;
  try {
    return JSON.parse(v) as T;
  } catch {
    return undefined;
  }
};

/** Values APEL's loader takes for NULL. */
export const NULL_NAMES = /^(none|null)$/i;

/**
 * VO, group and role of the primary FQAN. VOMS short form `/atlas/lcg1/Role=production` and
 * token groups `/atlas/production` alike: the VO is the first component, the group everything
 * before a `Role=` part. No FQAN: the VOMS-less VO, its group `/<vo>`.
 */
export function voOf(fqan: string | null | undefined, vomslessVo: string): { vo: string; group: string; role: string | null } {
  const parts = (fqan ?? "")
    .split("/")
    .map((p) => p.trim())
    .filter(Boolean);
  const groupParts = parts.filter((p) => !/^(Role|Capability)=/i.test(p));
  const role = parts.find((p) => /^Role=/i.test(p));
  const vo = groupParts[0];
  // APEL reads `none`, `null` and blanks as no value: such a first component is no VO either.
  if (!vo || NULL_NAMES.test(vo)) return { vo: vomslessVo, group: `/${vomslessVo}`, role: null };
  return { vo, group: `/${groupParts.join("/")}`, role: role && !/^Role=NULL$/i.test(role) ? role : null };
}

/** A usage record from one stream entry; throws BadUsageEntryError for an entry that is not one. */
export function usageRecord(entryId: string, h: Record<string, string>, opts: RecordOptions): UsageRecord {
  const jobId = h.id,
    recordId = h.recordId,
    owner = h.owner;
  if (!jobId || !recordId || !owner) throw new BadUsageEntryError(entryId, "no job id, record id or owner");
  const fqans = (json<unknown[]>(h.fqans) ?? []).filter((x): x is string => typeof x === "string" && x !== "");
  const fqan = fqans[0] ?? null;
  const { vo, group, role } = voOf(fqan, opts.vomslessVo);
  const localUser = json<{ account?: string; uid?: number }>(h.localUser);
  const isDn = owner.startsWith("/");
  const token = parseTokenOwner(owner);
  // What the batch system measured (`u.batch*`, e.g. Slurm's sacct) wins over the wrapper's diag,
  // field by field: it sees the whole allocation; a field it does not know keeps the wrapper's.
  const b = (k: string) => num(h[`u.batch${k}`]);
  const batchStart = b("Start"),
    batchEnd = b("End");
  const endMs = batchEnd !== null ? batchEnd * 1000 : (num(h.endedAt) ?? num(h.stateSince) ?? num(h.updated) ?? 0);
  const startMs = batchStart !== null ? batchStart * 1000 : num(h.startedAt);
  const wall = b("Wall") ?? num(h.usedWallSeconds);
  const batchCpu = b("Cpu") !== null || b("CpuUser") !== null;
  const user = batchCpu ? b("CpuUser") : num(h.usedUserSeconds);
  const system = batchCpu ? b("CpuSystem") : num(h.usedSystemSeconds);
  const cpu = batchCpu ? b("Cpu") : num(h.usedCpuSeconds);
  const rssKb = b("MaxRssKb") ?? (num(h.usedMemoryMB) === null ? null : num(h.usedMemoryMB)! * 1024);
  const outcome = h.outcome;
  const nodes = h.nodes || h["u.batchNodes"] || null;
  return {
    recordId,
    jobId,
    batchId: h.localId || null,
    owner,
    ownerDn: isDn ? owner : null,
    tokenIssuer: token?.iss ?? null,
    tokenSubject: token?.sub ?? null,
    vo,
    voGroup: group,
    voRole: role,
    fqan,
    fqans,
    account: localUser?.account ?? null,
    uid: typeof localUser?.uid === "number" ? localUser.uid : null,
    queue: h.queue ?? "",
    partition: h["u.partition"] || null,
    submitTime: secs(num(h.created)) ?? 0,
    startTime: secs(startMs),
    endTime: secs(endMs) ?? 0,
    wallSeconds: Math.max(0, Math.round(wall ?? (startMs !== null ? (endMs - startMs) / 1000 : 0))),
    cpuUserSeconds: Math.max(0, Math.round(user ?? cpu ?? 0)),
    cpuSystemSeconds: Math.max(0, Math.round(system ?? 0)),
    cpuSeconds: Math.max(0, Math.round(cpu ?? (user ?? 0) + (system ?? 0))),
    maxRssKb: rssKb,
    processors: Math.max(1, b("Processors") ?? num(h.processors) ?? 1),
    nodeCount: b("NodeCount") ?? (nodes ? nodes.split(",").length : 0),
    nodes,
    exitCode: num(h.exitCode),
    state: outcome === "failed" ? "FAILED" : outcome === "killed" ? "KILLED" : "FINISHED",
    failureCause: h.failedCause || null,
    failure: h.failure || null,
    bytesIn: num(h["u.bytesIn"]) ?? 0,
    bytesOut: num(h["u.bytesOut"]) ?? 0,
    bytesInCache: num(h["u.bytesInCache"]) ?? 0,
    benchmarkType: h["u.benchmarkType"] || null,
    benchmarkValue: num(h["u.benchmarkValue"]),
  };
}
