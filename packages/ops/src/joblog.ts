import { createReadStream } from "node:fs";
import { readFile } from "node:fs/promises";
import { createInterface } from "node:readline";
import { ControlDir, JOB_ID_RE } from "@ce/controldir";

/**
 * One job's story for operators (`ceadm jobs log`): the state history the JEM keeps in the job's
 * `errors` control file, and every line of the JEM's log that names the job.
 */

export interface StateHistory {
  path: string;
  lines?: string[] | undefined;
  /** Why the file could not be read (gone with the job, permissions). */
  unreadable?: string | undefined;
}

export async function readStateHistory(control: { controlDir: string; sessionRoot: string }, id: string): Promise<StateHistory> {
  if (!JOB_ID_RE.test(id)) return { path: "-", unreadable: "not a job id of this CE (a UUID)" };
  const path = new ControlDir(control.controlDir, control.sessionRoot).file(id, "errors");
  try {
    return { path, lines: (await readFile(path, "utf8")).split("\n").filter((l) => l.trim() !== "") };
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    const why =
      code === "ENOENT"
        ? "no such file (the job was cleaned, or never admitted)"
        : code === "EACCES"
          ? "permission denied (run as the CE account or root)"
          : (e as Error).message;
    return { path, unreadable: why };
  }
}

/**
 * Every JSON log line of `file` that names the job: its `jobId`, or its id among a burst line's
 * lists (`state changes`, `submitted to the batch system`). Streams the file; lines without a JSON
 * object are skipped.
 */
export async function jemLogLines(file: string, id: string): Promise<Record<string, unknown>[]> {
  const needle = JSON.stringify(id);
  const out: Record<string, unknown>[] = [];
  const rl = createInterface({ input: createReadStream(file, { encoding: "utf8" }), crlfDelay: Infinity });
  for await (const line of rl) {
    if (!line.includes(needle)) continue;
    try {
      // From the first brace: `docker compose logs` and journal exports put a prefix before the JSON.
      const o = JSON.parse(line.slice(Math.max(0, line.indexOf("{")))) as unknown;
      if (o && typeof o === "object" && mentions(o, id)) out.push(o as Record<string, unknown>);
    } catch {
      // not a pino line
    }
  }
  return out;
}

/** Whether the job id is a value somewhere in the line (not only inside a longer string). */
function mentions(v: unknown, id: string, depth = 0): boolean {
  if (v === id) return true;
  if (depth > 4 || !v || typeof v !== "object") return false;
  return Object.values(v).some((x) => mentions(x, id, depth + 1));
}

const LEVELS: Record<number, string> = { 10: "TRACE", 20: "DEBUG", 30: "INFO", 40: "WARN", 50: "ERROR", 60: "FATAL" };
/** Fields every line has, left out of the readable form. */
const NOISE = new Set(["level", "time", "msg", "pid", "hostname", "name", "app", "jobId", "requestId", "v"]);

/** A log line as one readable line: time, level, message, then the fields that say what happened. */
export function formatLogLine(o: Record<string, unknown>): string {
  const t = typeof o.time === "number" ? new Date(o.time).toISOString() : String(o.time ?? "-");
  const level = LEVELS[Number(o.level)] ?? String(o.level ?? "-");
  const fields = Object.entries(o)
    .filter(([k]) => !NOISE.has(k))
    .map(([k, v]) => `${k}=${typeof v === "string" ? v : JSON.stringify(v)}`);
  return [t, level.padEnd(5), String(o.msg ?? ""), ...fields].join(" ");
}
