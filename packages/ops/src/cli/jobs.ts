import type { CompiledConfig } from "@ce/config";
import { failureWords, NO_VO, type LocalUser } from "@ce/model";
import type { JobRecord } from "@ce/store";
import { voOf } from "@ce/store";
import { parseDuration, parseInternalStates, stuckJobs } from "../insight.js";
import { formatLogLine, jemLogLines, readStateHistory } from "../joblog.js";
import type { AdminOps, JobRow } from "../ops.js";
import { stateColour } from "./colour.js";
import { ago, cut, iso, table } from "./format.js";

/** `ceadm jobs list|show|stuck|log`: what an operator looks at first, first. */

export interface CliContext {
  ops: AdminOps;
  config: CompiledConfig;
  json: boolean;
  out: (s: string) => void;
  /** Colour the tables (a TTY without NO_COLOR: cli/colour.ts). */
  colour?: boolean | undefined;
  values: {
    owner?: string | undefined;
    state?: string | undefined;
    limit?: string | undefined;
    all?: boolean | undefined;
    "older-than"?: string | undefined;
    log?: string | undefined;
  };
}

const print = (c: CliContext, json: unknown, human: () => string) => c.out(c.json ? JSON.stringify(json, null, 2) : human());

/** The columns of `jobs list` and `jobs stuck`. */
function rowCells(j: JobRow, now: number): (string | number | undefined)[] {
  return [j.id, j.rest, j.state, ago((now - j.stateSince) / 1000), cut(j.name, 24), j.account, j.vo ?? NO_VO, j.queue, j.owner];
}
/** STATE and INTERNAL cells in their colour. */
const paintStates = (col: number, v: string) => (col === 1 || col === 2 ? stateColour(v) : undefined);
const ROW_HEADERS = ["ID", "STATE", "INTERNAL", "AGE", "NAME", "ACCOUNT", "VO", "QUEUE", "OWNER"];

export async function listJobs(c: CliContext): Promise<number> {
  const limit = c.values.limit ? Number(c.values.limit) : undefined;
  const res = await c.ops.listJobs({ owner: c.values.owner, states: c.ops.parseStates(c.values.state), limit });
  const now = Date.now();
  print(
    c,
    res,
    () =>
      `${table(
        ROW_HEADERS,
        res.jobs.map((j) => rowCells(j, now)),
        { colour: c.colour, paintCell: paintStates },
      )}\n${res.jobs.length} of ${res.total} job(s); AGE = time in the current state`,
  );
  return 0;
}

export async function stuck(c: CliContext): Promise<number> {
  const olderThan = c.values["older-than"] ? parseDuration(c.values["older-than"]) : undefined;
  const jobs = await stuckJobs(c.ops.redis, c.ops.prefix, { states: parseInternalStates(c.values.state), olderThan });
  const now = Date.now();
  print(c, { jobs }, () =>
    jobs.length === 0
      ? `no job past its age (${olderThan !== undefined ? `--older-than ${ago(olderThan)}` : "SUBMIT 30m, CANCELING 2h, ACCEPTED/PREPARING/FINISHING 6h"})`
      : `${table(
          [...ROW_HEADERS.slice(0, 4), "LIMIT", ...ROW_HEADERS.slice(4)],
          jobs.map((j) => {
            const r = rowCells(j, now);
            return [...r.slice(0, 4), ago(j.limit), ...r.slice(4)];
          }),
        )}\n${jobs.length} job(s) past their age in state; \`ceadm jobs log <id>\` tells a job's story`,
  );
  return 0;
}

/** The mapped account spelled out. */
export function accountText(u: LocalUser | undefined): string | undefined {
  return u ? `${u.account} (uid ${u.uid}, gid ${u.gid}, groups ${u.groups?.join(",") ?? "-"}; by ${u.rule})` : undefined;
}

/** One record field for `jobs show --all`: times as ISO, the mapped account spelled out. */
export function showField(k: string, v: unknown): string {
  if (k === "localUser" && v && typeof v === "object") return accountText(v as LocalUser)!;
  if (k === "fqans" && Array.isArray(v)) return v.join(", ");
  if (typeof v === "object") return JSON.stringify(v);
  return /^(created|updated|stateSince|startedAt|endedAt|cleanupAt|removeAt|delegationExpires|uploadDeadline)$/.test(k)
    ? (iso(v as number) ?? "-")
    : String(v);
}

/** failureWords' cause and advice, continuation lines indented under the value column. */
function failureText(failure: string): string {
  const w = failureWords(failure);
  return [w.cause, ...(w.advice ? [w.advice] : [])].join("\n").split("\n").join("\n             ");
}

/** A job at a glance: state and failure first, then who, where and when; undefined lines left out. */
export function jobSummaryLines(r: JobRecord, now = Date.now()): [string, string][] {
  const since = (ms: number | undefined) => (ms ? `${iso(ms)} (${ago((now - ms) / 1000)} ago)` : undefined);
  const internal = r.pending ? `PENDING:${r.state}` : r.state;
  const requests = [r.killRequested && "kill", r.cleanRequested && "clean", r.restartRequested && "restart"].filter(Boolean).join(", ");
  const lines: [string, string | undefined][] = [
    [
      "State",
      `${r.rest} (${internal}${r.lrms ? `, batch ${r.lrms}` : ""}) for ${ago((now - r.stateSince) / 1000)}, since ${iso(r.stateSince)}`,
    ],
    // In words, cause first (the pages' text); `--all` shows the record's own `failure`.
    ["Failure", r.failure ? failureText(r.failure) : undefined],
    [
      "Failed",
      r.failure ? `cause ${r.failedCause ?? "-"}, in ${r.failedState ?? "-"} (restart point), ${r.rerun} restart(s) left` : undefined,
    ],
    ["Exit code", r.exitCode !== undefined ? String(r.exitCode) : undefined],
    ["Waiting for", r.awaiting ? `${r.awaiting}${r.uploadDeadline ? ` until ${iso(r.uploadDeadline)}` : ""}` : undefined],
    ["Requests", requests || undefined],
    ["Held", r.hold ? `submission ${r.hold} not yet answered` : undefined],
    ["Name", r.jobName],
    ["Owner", r.owner],
    ["Account", accountText(r.localUser)],
    ["VO", r.fqans?.length ? `${voOf(r.fqans) ?? NO_VO} (${r.fqans.join(", ")})` : NO_VO],
    ["Queue", `${r.queue} (${r.backend}${r.localId ? `, batch id ${r.localId}` : ""}${r.nodes ? `, on ${r.nodes}` : ""})`],
    ["Created", since(r.created)],
    ["Started", since(r.startedAt)],
    ["Ended", since(r.endedAt)],
    ["Delegation", r.delegationExpires ? `${r.mainDelegation ?? "-"}, expires ${iso(r.delegationExpires)}` : undefined],
    ["Request id", r.requestId],
  ];
  return lines.filter((l): l is [string, string] => l[1] !== undefined);
}

export async function show(c: CliContext, id: string): Promise<number> {
  const r = await c.ops.getJob(id);
  print(c, r, () => {
    const head = `Job ${r.id}\n${jobSummaryLines(r)
      .map(([k, v]) => `  ${k.padEnd(11)}${v}`)
      .join("\n")}`;
    return c.values.all
      ? `${head}\n\n${table(
          ["FIELD", "VALUE"],
          Object.entries(r).map(([k, v]) => [k, showField(k, v)]),
        )}`
      : `${head}\n(--all: every record field; \`ceadm jobs log ${r.id}\`: its history and JEM log lines)`;
  });
  return 0;
}

/** The JEM's log: --log, else logging.jemLogFile, else where `./ce start` writes it. */
export function jemLogFile(c: Pick<CliContext, "config" | "values">): string {
  return c.values.log ?? c.config.logging.jemLogFile ?? `${c.config.paths.stateDir}/logs/jem.log`;
}

export async function log(c: CliContext, id: string): Promise<number> {
  const history = await readStateHistory(c.config.paths, id);
  const file = jemLogFile(c);
  let lines: Record<string, unknown>[] | undefined;
  let logError: string | undefined;
  try {
    lines = await jemLogLines(file, id);
  } catch (e) {
    logError =
      (e as NodeJS.ErrnoException).code === "ENOENT" ? "no such file (give --log FILE or set logging.jemLogFile)" : (e as Error).message;
  }
  if (!history.lines && !lines?.length) {
    // Neither source knows the job: say so, unless the record does.
    await c.ops.getJob(id);
  }
  print(c, { id, history, jemLog: { file, lines, error: logError } }, () =>
    [
      `State history (${history.path}):`,
      ...(history.lines ?? [`  unreadable: ${history.unreadable}`]).map((l) => (l.startsWith("  ") ? l : `  ${l}`)),
      "",
      `JEM log lines (${file}):`,
      ...(logError ? [`  unreadable: ${logError}`] : lines!.length ? lines!.map((o) => `  ${formatLogLine(o)}`) : ["  none"]),
    ].join("\n"),
  );
  return 0;
}
