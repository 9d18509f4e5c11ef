import type { FileHandle } from "node:fs/promises";
import type { Stats } from "node:fs";
import { type JobRecord, type PendingByReason, readPendingByReason } from "@ce/store";
import { type ControlFile, DIAGNOSE_FILES, type DiagnoseFile, RENDERED_ON_REQUEST } from "@ce/controldir";
import { NO_VO, REST_STATES, type RestState } from "@ce/model";
import type { Services } from "../context.js";

/*
 * What the pages for people read, beyond a single record: an owner's jobs with the columns of the
 * job table, the state history of the `errors` control file, which diagnose files exist, and the
 * CE-wide counts per VO. All bounded: a person's page must not cost what a bulk request may.
 */

export const ROW_FIELDS = ["jobName", "created", "stateSince", "exitCode", "failure", "endedAt", "awaiting", "uploadDeadline"] as const;
export type JobRow = Pick<JobRecord, "id" | "owner" | "state" | "rest" | (typeof ROW_FIELDS)[number]>;

/** Records read at most for one job table (the newest of the selection); the page says so when cut. */
export const TABLE_READ_CAP = 5_000;

export interface OwnerJobs {
  /** Jobs per REST state (all of the owner's, whatever the filter). */
  byState: Partial<Record<RestState, number>>;
  total: number;
  /** Rows of the selection (at most TABLE_READ_CAP: the newest). */
  rows: JobRow[];
  /** How many jobs the selection had before the cap. */
  selected: number;
}

/**
 * The owner's jobs in `states` (all when undefined) with their table columns. The per-owner state
 * sets give every id with its state in one round trip; when the selection is over the cap, the
 * owner's creation-ordered index decides which are the newest.
 */
export async function ownerJobs(s: Services, owner: string, states?: readonly RestState[], name?: string): Promise<OwnerJobs> {
  const all = await s.jobs.list(owner, REST_STATES);
  const byState: Partial<Record<RestState, number>> = {};
  for (const j of all) if (j.state) byState[j.state] = (byState[j.state] ?? 0) + 1;
  const wanted = states ? new Set(states) : undefined;
  let ids = all.filter((j) => !wanted || (j.state && wanted.has(j.state))).map((j) => j.id);
  const selected = ids.length;
  if (ids.length > TABLE_READ_CAP) {
    const chosen = new Set(ids);
    const ordered = (await s.jobs.list(owner)).map((j) => j.id).filter((id) => chosen.has(id));
    ids = ordered.slice(-TABLE_READ_CAP);
  }
  const records = await s.jobs.getManyFields(ids, ROW_FIELDS);
  let rows = records.filter((r): r is JobRow => r !== undefined && r.owner === owner);
  if (name) {
    const needle = name.toLowerCase();
    rows = rows.filter((r) => (r.jobName ?? "").toLowerCase().includes(needle));
    return { byState, total: all.length, rows, selected: rows.length };
  }
  return { byState, total: all.length, rows, selected };
}

export interface HistoryEntry {
  at: string;
  from?: string | undefined;
  to?: string | undefined;
  text: string;
}

/** Bytes of the `errors` file shown at most (its end: the latest changes). */
export const HISTORY_TAIL_BYTES = 64 * 1024;

/**
 * The state history from the `errors` control file (the JEM's `<time> Job state change A -> B
 * Reason: …` lines, and other lines it writes there), oldest first. Only its last
 * HISTORY_TAIL_BYTES are read; `cut` says when earlier lines were left out.
 */
export async function jobHistory(s: Services, id: string): Promise<{ entries: HistoryEntry[]; cut: boolean }> {
  const text = await readTail(s, id, "errors", HISTORY_TAIL_BYTES);
  if (text === undefined) return { entries: [], cut: false };
  return { entries: parseHistory(text.content, text.cut), cut: text.cut };
}

/** The lines of (the tail of) an `errors` file; `cut`: the text starts inside a line. */
export function parseHistory(content: string, cut: boolean): HistoryEntry[] {
  const lines = content.split("\n");
  // A cut file starts inside a line: that partial line is dropped.
  if (cut) lines.shift();
  const entries: HistoryEntry[] = [];
  for (const line of lines) {
    if (!line.trim()) continue;
    const m = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ) Job state change (\S+) -> (\S+)\s+Reason: (.*)$/.exec(line);
    if (m) entries.push({ at: m[1]!, from: m[2], to: m[3], text: m[4]! });
    else {
      const t = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)\s+(.*)$/.exec(line);
      entries.push(t ? { at: t[1]!, text: t[2]! } : { at: "", text: line });
    }
  }
  return entries;
}

async function readTail(s: Services, id: string, name: DiagnoseFile, max: number): Promise<{ content: string; cut: boolean } | undefined> {
  return withRegularFile(s, id, name, async (handle, st) => {
    const start = Math.max(0, st.size - max);
    const buf = Buffer.alloc(Math.min(max, st.size));
    const { bytesRead } = await handle.read(buf, 0, buf.length, start);
    return { content: buf.subarray(0, bytesRead).toString("utf8"), cut: start > 0 };
  });
}

/**
 * Runs `use` on a control file opened for reading when it is a regular file; undefined when it
 * is absent (or not a regular file). The handle is closed here, whatever `use` does.
 */
async function withRegularFile<T>(
  s: Services,
  id: string,
  name: ControlFile,
  use: (handle: FileHandle, st: Stats) => Promise<T>,
): Promise<T | undefined> {
  let handle: FileHandle;
  try {
    handle = await s.control.openForRead(id, name);
  } catch (e) {
    if (isAbsent(e)) return undefined;
    throw e;
  }
  try {
    const st = await handle.stat();
    return st.isFile() ? await use(handle, st) : undefined;
  } finally {
    await handle.close();
  }
}

const isAbsent = (e: unknown) => ["ENOENT", "ELOOP", "ENOTDIR"].includes((e as NodeJS.ErrnoException).code ?? "");

export interface DiagnoseEntry {
  type: DiagnoseFile;
  /** Size and time of a control file; undefined for the ones made from the record on request. */
  size?: number | undefined;
  mtimeMs?: number | undefined;
}

/** The diagnose files of a job that can be fetched, in the interface's order (docs/interface.md E7). */
export async function diagnoseEntries(s: Services, id: string): Promise<DiagnoseEntry[]> {
  const out: DiagnoseEntry[] = [];
  // `input` and `output` are made from the stored description, which a wiped job no longer has.
  const spec = await fileStat(s, id, "spec");
  for (const type of DIAGNOSE_FILES) {
    // Rendered from the record or the stored description on each request (routes/diagnose.ts; writer table).
    if (RENDERED_ON_REQUEST.has(type)) {
      if (spec || (type !== "input" && type !== "output")) out.push({ type });
      continue;
    }
    const st = await fileStat(s, id, type);
    if (st) out.push({ type, size: st.size, mtimeMs: st.mtimeMs });
  }
  return out;
}

/** Size and time of a regular control file; undefined when absent. */
async function fileStat(s: Services, id: string, name: ControlFile): Promise<{ size: number; mtimeMs: number } | undefined> {
  return withRegularFile(s, id, name, async (_handle, st) => ({ size: st.size, mtimeMs: st.mtimeMs }));
}

/** Columns of the per-VO table (REST states grouped the way a person asks "how busy is it"). */
export const VO_COLUMNS = {
  waiting: ["ACCEPTING", "ACCEPTED", "PREPARING", "PREPARED", "SUBMITTING"],
  queued: ["QUEUING", "HELD"],
  running: ["RUNNING", "EXITINGLRMS", "OTHER"],
  finishing: ["EXECUTED", "FINISHING", "KILLING"],
} as const satisfies Record<string, readonly RestState[]>;
export type VoColumn = keyof typeof VO_COLUMNS;

const VO_CACHE_MS = 10_000;
let voCache: { at: number; key: Services; value: VoCounts } | undefined;

export interface VoCounts {
  /** VO → column → jobs (every active job, whatever their number). */
  byVo?: Map<string, Record<VoColumn, number>> | undefined;
  active: number;
}

/**
 * Active jobs per VO, from the share counters the state-move scripts keep per queue, VO and REST
 * state (@ce/store shares.ts): one HGETALL, however many jobs; kept for VO_CACHE_MS. A job
 * without VOMS or token groups counts as NO_VO.
 */
export async function voCounts(s: Services, now = Date.now()): Promise<VoCounts> {
  if (voCache && voCache.key === s && now - voCache.at < VO_CACHE_MS) return voCache.value;
  const byVo = new Map<string, Record<VoColumn, number>>();
  let active = 0;
  for (const share of await s.jobs.shareCounts()) {
    const vo = share.vo === "" ? NO_VO : share.vo;
    for (const [rest, n] of Object.entries(share.byRest) as Array<[RestState, number]>) {
      const col = (Object.keys(VO_COLUMNS) as VoColumn[]).find((k) => (VO_COLUMNS[k] as readonly string[]).includes(rest));
      if (!col) continue;
      const row = byVo.get(vo) ?? { waiting: 0, queued: 0, running: 0, finishing: 0 };
      row[col] += n;
      byVo.set(vo, row);
      active += n;
    }
  }
  const value: VoCounts = { byVo, active };
  voCache = { at: now, key: s, value };
  return value;
}

let pendingCache: { at: number; key: Services; value: PendingByReason[] } | undefined;

/**
 * Jobs waiting in the batch system per queue, VO and the batch system's reason (issue 36; the same
 * sums as `ce_lrms_pending_jobs`): one HMGET per INLRMS job, so kept for VO_CACHE_MS like voCounts.
 */
export async function pendingReasons(s: Services, now = Date.now()): Promise<PendingByReason[]> {
  if (pendingCache && pendingCache.key === s && now - pendingCache.at < VO_CACHE_MS) return pendingCache.value;
  const value = await readPendingByReason(s.jobs.redis, s.config.redis.prefix);
  pendingCache = { at: now, key: s, value };
  return value;
}

/** `/atlas/Role=production` → `atlas`. */
export function voOf(fqans: readonly string[] | undefined): string {
  return /^\/([^/]+)/.exec(fqans?.[0] ?? "")?.[1] ?? NO_VO;
}

export interface FailureGroup {
  /** The reason with numbers masked, what the jobs of the group share. */
  key: string;
  /** The newest job's own reason. */
  example: string;
  count: number;
  newest: JobRow;
}

/** How far back "recent" failures go, and how many of the owner's failed jobs are read at most. */
export const RECENT_FAILURE_MS = 7 * 24 * 3600 * 1000;
const FAILURES_READ = 500;

/**
 * The owner's failed jobs of the last RECENT_FAILURE_MS, grouped by reason (numbers masked, so
 * `exit code 3` and `exit code 4` are one group), the largest group first. Only the owner's own:
 * another person's failure text may name their files and hosts.
 */
export async function recentFailures(s: Services, owner: string, now = Date.now()): Promise<FailureGroup[]> {
  const failed = (await s.jobs.list(owner, ["FAILED"])).map((j) => j.id);
  const records = await s.jobs.getManyFields(failed.slice(-FAILURES_READ), ROW_FIELDS);
  const groups = new Map<string, FailureGroup>();
  for (const r of records) {
    if (!r || r.owner !== owner) continue;
    const at = r.endedAt ?? r.stateSince;
    if (now - at > RECENT_FAILURE_MS) continue;
    const reason = (r.failure ?? "").trim() || "(no reason recorded)";
    const key = reason.replace(/\d+/g, "N").slice(0, 160);
    const g = groups.get(key);
    if (!g) groups.set(key, { key, example: reason, count: 1, newest: r });
    else {
      g.count++;
      if ((g.newest.endedAt ?? g.newest.stateSince) < at) Object.assign(g, { newest: r, example: reason });
    }
  }
  return [...groups.values()].sort((a, b) => b.count - a.count || (b.newest.endedAt ?? 0) - (a.newest.endedAt ?? 0));
}
