import { Failure } from "@ce/model";
import { PY_WHITESPACE } from "./messages.js";
/**
 * What APEL's loader accepts, for tests: each message kind's allowed, mandatory, integer, decimal
 * and time fields and the checks its record classes make (apel/apel `apel/db/records/job.py`,
 * `summary.py`, `normalised_summary.py`, `sync.py`, `record.py`; the header matching of
 * `apel/db/loader/record_factory.py`). Written from those definitions, not a copy of them: a
 * message this check refuses is one APEL's loader would refuse, field by field.
 */

interface Kind {
  name: string;
  /** Every field a record may carry (ignored ones included); any other is refused. */
  fields: readonly string[];
  mandatory: readonly string[];
  ints: readonly string[];
  floats: readonly string[];
  times: readonly string[];
  check(rec: Record<string, string>, now: Date): string | undefined;
}

const JOB: Kind = {
  name: "job v0.3",
  fields: [
    "Site",
    "SubmitHost",
    "MachineName",
    "Queue",
    "LocalJobId",
    "LocalUserId",
    "GlobalUserName",
    "FQAN",
    "VO",
    "VOGroup",
    "VORole",
    "WallDuration",
    "CpuDuration",
    "Processors",
    "NodeCount",
    "StartTime",
    "EndTime",
    "InfrastructureDescription",
    "InfrastructureType",
    "MemoryReal",
    "MemoryVirtual",
    "ServiceLevelType",
    "ServiceLevel",
    "SubmitHostType",
    "UpdateTime",
  ],
  mandatory: ["Site", "LocalJobId", "WallDuration", "CpuDuration", "StartTime", "EndTime"],
  ints: ["WallDuration", "CpuDuration", "Processors", "NodeCount", "MemoryReal", "MemoryVirtual"],
  floats: ["ServiceLevel"],
  times: ["StartTime", "EndTime"],
  check(r, now) {
    const slt = isNull(r.ServiceLevelType) ? undefined : r.ServiceLevelType!;
    const sl = isNull(r.ServiceLevel) ? undefined : r.ServiceLevel;
    if ((slt === undefined) !== (sl === undefined)) return "ServiceLevelType and ServiceLevel must come together";
    if (slt !== undefined && !["si2k", "hepspec", "hepscore23"].includes(slt.toLowerCase())) return `ServiceLevelType ${slt} not valid`;
    const start = time(r.StartTime!),
      end = time(r.EndTime!);
    if (end < start) return "EndTime is before StartTime";
    if (end > now.getTime() / 1000 + 2 * 86_400) return "EndTime is in the future";
    return undefined;
  },
};

/** Month and year valid, not in the future; earliest/latest end inside that month and ordered; durations not negative. */
function monthChecks(r: Record<string, string>, now: Date, durations: readonly string[]): string | undefined {
  const y = Number(r.Year),
    m = Number(r.Month);
  if (!(m >= 1 && m <= 12)) return "Month value is out of range";
  const start = Date.UTC(y, m - 1, 1) / 1000,
    next = Date.UTC(y, m, 1) / 1000;
  if (start > now.getTime() / 1000) return "Month specified in record is in the future";
  const eet = isNull(r.EarliestEndTime) ? undefined : time(r.EarliestEndTime!);
  const let_ = isNull(r.LatestEndTime) ? undefined : time(r.LatestEndTime!);
  if (eet !== undefined && (eet < start || eet > next)) return "EarliestEndTime is not within stated month";
  if (let_ !== undefined && (let_ < start || let_ > next)) return "LatestEndTime is not within stated month";
  if (eet !== undefined && let_ !== undefined && eet > let_) return "LatestEndTime is earlier than EarliestEndTime";
  for (const d of durations) if (Number(r[d]) < 0) return `Negative ${d}`;
  return undefined;
}

const SUMMARY: Kind = {
  name: "summary v0.2",
  fields: [
    "Site",
    "Month",
    "Year",
    "GlobalUserName",
    "VO",
    "VOGroup",
    "VORole",
    "SubmitHost",
    "InfrastructureType",
    "ServiceLevelType",
    "ServiceLevel",
    "NodeCount",
    "Processors",
    "EarliestEndTime",
    "LatestEndTime",
    "WallDuration",
    "CpuDuration",
    "NumberOfJobs",
    "UpdateTime",
  ],
  mandatory: ["Site", "Month", "Year", "WallDuration", "CpuDuration", "NumberOfJobs"],
  ints: ["Month", "Year", "NodeCount", "Processors", "WallDuration", "CpuDuration", "NumberOfJobs"],
  floats: ["ServiceLevel"],
  times: ["EarliestEndTime", "LatestEndTime"],
  check: (r, now) => monthChecks(r, now, ["WallDuration", "CpuDuration"]),
};

const NORMALISED: Kind = {
  name: "normalised summary v0.3",
  fields: [
    "Site",
    "Month",
    "Year",
    "GlobalUserName",
    "VO",
    "VOGroup",
    "VORole",
    "SubmitHost",
    "Infrastructure",
    "NodeCount",
    "Processors",
    "EarliestEndTime",
    "LatestEndTime",
    "WallDuration",
    "CpuDuration",
    "NormalisedWallDuration",
    "NormalisedCpuDuration",
    "NumberOfJobs",
    "UpdateTime",
  ],
  mandatory: ["Site", "Month", "Year", "WallDuration", "CpuDuration", "NormalisedWallDuration", "NormalisedCpuDuration", "NumberOfJobs"],
  ints: [
    "Month",
    "Year",
    "NodeCount",
    "Processors",
    "WallDuration",
    "CpuDuration",
    "NormalisedWallDuration",
    "NormalisedCpuDuration",
    "NumberOfJobs",
  ],
  floats: [],
  times: ["EarliestEndTime", "LatestEndTime"],
  check: (r, now) => monthChecks(r, now, ["WallDuration", "CpuDuration", "NormalisedWallDuration", "NormalisedCpuDuration"]),
};

const SYNC: Kind = {
  name: "sync v0.1",
  fields: ["Site", "SubmitHost", "NumberOfJobs", "Month", "Year"],
  mandatory: ["Site", "NumberOfJobs", "Month", "Year"],
  ints: ["NumberOfJobs", "Month", "Year"],
  floats: [],
  times: [],
  check: () => undefined,
};

/** Job and sync messages are matched on the header's name alone; summaries on the whole line (v0.2 vs v0.3). */
function kindOf(header: string): Kind {
  const name = header.slice(0, header.indexOf(":")).trim();
  if (name === "APEL-individual-job-message") return JOB;
  if (name === "APEL-sync-message") return SYNC;
  if (header === "APEL-summary-job-message: v0.2") return SUMMARY;
  if (header === "APEL-summary-job-message: v0.3") return NORMALISED;
  throw new ApelLoaderRefusal(`Message type ${header} not recognised`);
}

export class ApelLoaderRefusal extends Failure<"APEL_REFUSED"> {
  constructor(message: string) {
    super("APEL_REFUSED", message);
  }
}

/** Python's str.strip(), which APEL applies to the message, each record, key and value. */
const EDGES = new RegExp(`^[${PY_WHITESPACE}]+|[${PY_WHITESPACE}]+$`, "g");
const strip = (s: string) => s.replace(EDGES, "");

const isNull = (v: string | undefined) => v === undefined || ["none", "null", ""].includes(v.toLowerCase());
/** Python's int(): optional sign, digits (underscores between them), surrounding blanks. */
const isInt = (v: string) => /^\s*[+-]?\d+(_\d+)*\s*$/.test(v);
const isFloat = (v: string) =>
  /^\s*[+-]?(\d+(_\d+)*(\.(\d+(_\d+)*)?)?|\.\d+(_\d+)*)([eE][+-]?\d+)?\s*$/.test(v) || /^\s*[+-]?(inf|infinity|nan)\s*$/i.test(v);
/** Epoch seconds, or `%Y-%m-%dT%H:%M:%SZ`. */
function time(v: string): number {
  if (isInt(v)) return Number(v.replace(/_/g, ""));
  const m = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})Z$/.exec(v);
  if (!m) throw new ApelLoaderRefusal(`Unknown datetime format: ${v}`);
  return Date.UTC(+m[1]!, +m[2]! - 1, +m[3]!, +m[4]!, +m[5]!, +m[6]!) / 1000;
}

export interface CheckedMessage {
  kind: string;
  records: Record<string, string>[];
}

/**
 * Reads a message as APEL's loader does (first line the header; records split on `%%` wherever it
 * stands, blank ones skipped; lines split on `\n` only; each line `Key: value` split at the first
 * `:`, both stripped as Python strips) and applies its checks.
 * Throws ApelLoaderRefusal naming the record and the reason. `strictVo`: our own rule on top of
 * APEL's, that no record goes without a VO (APEL stores `none`/`null`/empty as no VO).
 */
export function checkApelMessage(text: string, opts: { now?: Date; strictVo?: boolean } = {}): CheckedMessage {
  const now = opts.now ?? new Date();
  // S/MIME hands the text back with CRLF line ends; the records are read from it as LF text.
  const lines = strip(text).replace(/\r\n/g, "\n").split("\n");
  const header = lines.shift() ?? "";
  if (!header.includes(":")) throw new ApelLoaderRefusal(`Message header is incorrect: ${header}`);
  const kind = kindOf(header);
  const records: Record<string, string>[] = [];
  lines
    .join("\n")
    .split("%%")
    .forEach((chunk, i) => {
      if (strip(chunk) === "") return;
      const where = `${kind.name} record ${i + 1}`;
      const rec: Record<string, string> = {};
      for (const line of strip(chunk).split("\n")) {
        const c = line.indexOf(":");
        if (c < 0) throw new ApelLoaderRefusal(`${where}: a line without a key-value pair: ${line}`);
        const key = strip(line.slice(0, c)),
          value = strip(line.slice(c + 1));
        if (!kind.fields.includes(key)) throw new ApelLoaderRefusal(`${where}: Unexpected field ${key}`);
        // APEL keeps the last of repeated keys; a repeat is ours to refuse, it means a value made a line.
        if (key in rec) throw new ApelLoaderRefusal(`${where}: field ${key} given twice`);
        rec[key] = value;
      }
      for (const f of kind.mandatory) if (isNull(rec[f])) throw new ApelLoaderRefusal(`${where}: Mandatory field ${f} not specified`);
      for (const [f, v] of Object.entries(rec)) {
        if (isNull(v)) continue;
        if (kind.ints.includes(f) && !isInt(v)) throw new ApelLoaderRefusal(`${where}: Invalid int value ${v} in field ${f}`);
        if (kind.floats.includes(f) && !isFloat(v)) throw new ApelLoaderRefusal(`${where}: Invalid float value ${v} in field ${f}`);
        if (kind.times.includes(f)) time(v);
      }
      const bad = kind.check(rec, now);
      if (bad) throw new ApelLoaderRefusal(`${where}: ${bad}`);
      if (opts.strictVo && kind !== SYNC && isNull(rec.VO) && isNull(rec.FQAN)) throw new ApelLoaderRefusal(`${where}: no VO`);
      records.push(rec);
    });
  return { kind: kind.name, records };
}
