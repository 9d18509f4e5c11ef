import type { UsageRecord } from "../record.js";

/**
 * APEL message texts, with only the fields APEL's loader knows (it refuses any other): a header
 * line, then records of `Key: value` lines, each record closed by a `%%` line. Times are epoch
 * seconds. `ServiceLevelType` and `ServiceLevel` always go together.
 */
export const HEADER = {
  individual: "APEL-individual-job-message: v0.3",
  summary: "APEL-summary-job-message: v0.2",
  /** Normalised summaries: APEL's loader tells them from v0.2 by the whole header line. */
  normalisedSummary: "APEL-summary-job-message: v0.3",
  sync: "APEL-sync-message: v0.1",
} as const;

export interface ApelSite {
  /** GOCDB site name. */
  site: string;
  submitHost: string;
  /** CE host (MachineName of job records). */
  machineName: string;
}

/** Without a configured benchmark, the unit and value A-REX reports (HEPSPEC 1.0). */
const benchmark = (r: UsageRecord): [string, number] =>
  r.benchmarkType && r.benchmarkValue ? [r.benchmarkType, r.benchmarkValue] : ["HEPSPEC", 1];

type Fields = [string, string | number | null | undefined][];

/**
 * What Python's `str.strip()` removes (APEL strips every key and value): ASCII blanks, the
 * separators \x1c–\x1f and \x85, and Unicode spaces. Not \ufeff, which JavaScript's trim() would take.
 */
export const PY_WHITESPACE = "\\t\\n\\v\\f\\r \\x1c-\\x1f\\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000";
const EDGE_BLANKS = new RegExp(`^[${PY_WHITESPACE}]+|[${PY_WHITESPACE}]+$`, "g");

/**
 * A value as it can stand in an APEL record and be read back unchanged. APEL's loader splits the
 * message into records on `%%` anywhere in the text, a record into lines on `\n`, a line at its
 * first `:`, and strips both sides; so a DN or FQAN (chosen by a CA or a VO, or an issuer's `sub`)
 * could end its record early, add `Key: value` lines of its choosing, or change when stripped,
 * and one refused record makes APEL refuse the whole message, other users' records with it.
 * Control characters and Unicode line separators become a space, a run of `%` one `%` (no `%%`
 * survives, and none can form with the neighbouring text, which is a `: ` before and a line end
 * after), and the edges are stripped as APEL would.
 */
export function apelValue(v: string | number): string {
  return String(v)
    .replace(/[\x00-\x1f\x7f-\x9f\u2028\u2029]/g, " ")
    .replace(/%{2,}/g, "%")
    .replace(EDGE_BLANKS, "");
}

function render(header: string, records: Fields[]): string {
  const body = records
    .map((f) => {
      const lines = f.flatMap(([k, v]) => {
        const text = v === null || v === undefined ? "" : apelValue(v);
        return text === "" ? [] : [`${k}: ${text}`];
      });
      return `${lines.join("\n")}\n%%\n`;
    })
    .join("");
  return `${header}\n${body}`;
}

/**
 * Identity fields. A VOMS job sends its FQAN (APEL derives VO, group and role from it); a token
 * or VOMS-less job sends no FQAN but VO, VOGroup and VORole from its groups or the fallback VO.
 */
function identity(r: UsageRecord): Fields {
  const voms = r.ownerDn !== null && r.fqan !== null;
  return [
    ["GlobalUserName", r.owner],
    ...(voms ? ([["FQAN", r.fqan]] as Fields) : []),
    ["VO", r.vo],
    ["VOGroup", r.voGroup ?? `/${r.vo}`],
    ["VORole", r.voRole ?? "Role=NULL"],
  ];
}

export function individualMessage(site: ApelSite, recs: readonly UsageRecord[]): string {
  return render(
    HEADER.individual,
    recs.map((r) => {
      const [slt, sl] = benchmark(r);
      const id = identity(r);
      return [
        ["Site", site.site],
        ["SubmitHost", site.submitHost],
        ["MachineName", site.machineName],
        ["Queue", r.partition ?? r.queue],
        ["LocalJobId", r.batchId ?? r.jobId],
        ["LocalUserId", r.account],
        id[0]!,
        ...id.slice(1),
        ["WallDuration", r.wallSeconds],
        ["CpuDuration", r.cpuSeconds],
        ["Processors", r.processors],
        ["NodeCount", r.nodeCount || null],
        ["StartTime", startOf(r)],
        ["EndTime", r.endTime],
        ["InfrastructureDescription", "APEL-CE-REST"],
        ["InfrastructureType", "grid"],
        ["MemoryReal", r.maxRssKb],
        ["ServiceLevelType", slt],
        ["ServiceLevel", sl],
      ];
    }),
  );
}

/** A start time APEL accepts: never after the end. */
export const startOf = (r: UsageRecord) => Math.min(r.endTime, r.startTime ?? r.endTime - r.wallSeconds);

export interface SummaryRow {
  year: number;
  month: number;
  globalUserName: string;
  vo: string;
  voGroup: string;
  voRole: string;
  serviceLevelType: string;
  serviceLevel: number;
  nodeCount: number;
  processors: number;
  earliestEnd: number;
  latestEnd: number;
  wall: number;
  cpu: number;
  jobs: number;
}

/**
 * The factor APEL normalises by (its server's rule): the benchmark value per core, for `si2k` that
 * value / 250 (HEPSPEC06 is SPECint2000 / 250; HEPscore23 is scaled to match HEPSPEC06).
 */
export const normalisationFactor = (type: string, value: number) => (type.toLowerCase() === "si2k" ? value / 250 : value);

/** Monthly sums per user, VO group and role, benchmark, node and processor count (A-REX's grouping). */
export function summarize(recs: readonly UsageRecord[]): SummaryRow[] {
  return groupMonthly(recs, (r, base) => {
    const [serviceLevelType, serviceLevel] = benchmark(r);
    return { row: { ...base, serviceLevelType, serviceLevel }, key: [serviceLevelType, serviceLevel] };
  });
}

type BaseRow = Omit<SummaryRow, "serviceLevelType" | "serviceLevel">;

/**
 * Sums `recs` per month, user, VO, group, role, node and processor count, and whatever else `make`
 * adds to the key; `make` also gives the row a group starts with, and `add` sums what that row adds.
 */
function groupMonthly<R extends BaseRow>(
  recs: readonly UsageRecord[],
  make: (r: UsageRecord, base: BaseRow) => { row: R; key: unknown[] },
  add?: (g: R, r: UsageRecord) => void,
): R[] {
  const groups = new Map<string, R>();
  for (const r of recs) {
    const d = new Date(r.endTime * 1000);
    const base: BaseRow = {
      year: d.getUTCFullYear(),
      month: d.getUTCMonth() + 1,
      globalUserName: r.owner,
      vo: r.vo,
      voGroup: r.voGroup ?? `/${r.vo}`,
      voRole: r.voRole ?? "Role=NULL",
      nodeCount: r.nodeCount || 1,
      processors: r.processors,
      earliestEnd: r.endTime,
      latestEnd: r.endTime,
      wall: 0,
      cpu: 0,
      jobs: 0,
    };
    const { row, key } = make(r, base);
    const k = JSON.stringify([
      base.year,
      base.month,
      base.globalUserName,
      base.vo,
      base.voGroup,
      base.voRole,
      ...key,
      base.nodeCount,
      base.processors,
    ]);
    const g = groups.get(k) ?? row;
    g.earliestEnd = Math.min(g.earliestEnd, r.endTime);
    g.latestEnd = Math.max(g.latestEnd, r.endTime);
    g.wall += r.wallSeconds;
    g.cpu += r.cpuSeconds;
    g.jobs += 1;
    add?.(g, r);
    groups.set(k, g);
  }
  return [...groups.values()];
}

export function summaryMessage(site: ApelSite, rows: readonly SummaryRow[]): string {
  return render(
    HEADER.summary,
    rows.map((g) => [
      ["Site", site.site],
      ["Month", g.month],
      ["Year", g.year],
      ["GlobalUserName", g.globalUserName],
      ["VO", g.vo],
      ["VOGroup", g.voGroup],
      ["VORole", g.voRole],
      ["SubmitHost", site.submitHost],
      ["InfrastructureType", "grid"],
      ["ServiceLevelType", g.serviceLevelType],
      ["ServiceLevel", g.serviceLevel],
      ["NodeCount", g.nodeCount],
      ["Processors", g.processors],
      ["EarliestEndTime", g.earliestEnd],
      ["LatestEndTime", g.latestEnd],
      ["WallDuration", g.wall],
      ["CpuDuration", g.cpu],
      ["NumberOfJobs", g.jobs],
    ]),
  );
}

export interface NormalisedRow extends Omit<SummaryRow, "serviceLevelType" | "serviceLevel"> {
  /** Σ wall × factor and Σ CPU × factor, unrounded (rounded once, when written). */
  normWall: number;
  normCpu: number;
}

/**
 * v0.3 rows: the same sums without the benchmark in the key, since a v0.3 record carries none and
 * APEL keeps one row per (site, month, user, VO, group, role, submit host, nodes, processors),
 * replacing an earlier one with the same key: two rows differing only by benchmark would lose one.
 * Each job's durations are normalised by its own queue's benchmark before they are summed.
 */
export function summarizeNormalised(recs: readonly UsageRecord[]): NormalisedRow[] {
  return groupMonthly(
    recs,
    (_r, base) => ({ row: { ...base, normWall: 0, normCpu: 0 }, key: [] }),
    (g, r) => {
      const f = normalisationFactor(...benchmark(r));
      g.normWall += r.wallSeconds * f;
      g.normCpu += r.cpuSeconds * f;
    },
  );
}

/** v0.3: `Infrastructure` (not `InfrastructureType`), no ServiceLevel lines, normalised durations in whole seconds. */
export function normalisedSummaryMessage(site: ApelSite, rows: readonly NormalisedRow[]): string {
  return render(
    HEADER.normalisedSummary,
    rows.map((g) => [
      ["Site", site.site],
      ["Month", g.month],
      ["Year", g.year],
      ["GlobalUserName", g.globalUserName],
      ["VO", g.vo],
      ["VOGroup", g.voGroup],
      ["VORole", g.voRole],
      ["SubmitHost", site.submitHost],
      ["Infrastructure", "grid"],
      ["NodeCount", g.nodeCount],
      ["Processors", g.processors],
      ["EarliestEndTime", g.earliestEnd],
      ["LatestEndTime", g.latestEnd],
      ["WallDuration", g.wall],
      ["CpuDuration", g.cpu],
      ["NormalisedWallDuration", Math.round(g.normWall)],
      ["NormalisedCpuDuration", Math.round(g.normCpu)],
      ["NumberOfJobs", g.jobs],
    ]),
  );
}

/** Jobs per month of this submit host: APEL compares them with what it holds. */
export function syncMessage(site: ApelSite, recs: readonly UsageRecord[]): string {
  const months = new Map<string, number>();
  for (const r of recs) {
    const m = new Date(r.endTime * 1000).toISOString().slice(0, 7);
    months.set(m, (months.get(m) ?? 0) + 1);
  }
  return render(
    HEADER.sync,
    [...months].sort().map(([m, n]) => [
      ["Site", site.site],
      ["SubmitHost", site.submitHost],
      ["NumberOfJobs", n],
      ["Month", Number(m.slice(5, 7))],
      ["Year", Number(m.slice(0, 4))],
    ]),
  );
}

/**
 * A message parsed back the way APEL's loader reads one (header up to the first `:`, records
 * split on `%%`, `Key: value` split at the first `:`): for tests and `--dry-run` checks.
 */
export function parseMessage(text: string): { header: string; records: Record<string, string>[] } {
  const nl = text.indexOf("\n");
  const header = text.slice(0, nl).trim();
  const records = text
    .slice(nl + 1)
    .split("%%")
    .map((chunk) => chunk.trim())
    .filter(Boolean)
    .map((chunk) => {
      const rec: Record<string, string> = {};
      for (const line of chunk.split("\n")) {
        const i = line.indexOf(":");
        if (i < 0) throw new Error(`line without a colon: ${line}`);
        rec[line.slice(0, i).trim()] = line.slice(i + 1).trim();
      }
      return rec;
    });
  return { header, records };
}
