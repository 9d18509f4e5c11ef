import { constants } from "node:fs";
import { chmod, mkdir, open, readdir, stat } from "node:fs/promises";
import { removePath, SessionFsError } from "@ce/sessionfs";
import { join } from "node:path";
import { fileq, type FsOp } from "./files.js";

/**
 * The control directory: one sub-directory per job, fanned out by id (`jobs/3f/2a/<id>/`) so no
 * directory holds millions of entries (docs/architecture.md, "Control directory") — 65,536 leaves, ~1,500 jobs each at
 * 100 M jobs — while a new job costs a single mkdir once the two upper levels exist. Redis replaces A-REX's
 * accepting/processing/finished state directories and request marks as the index of jobs.
 */

/** The files the diagnose endpoint may serve (spec E7), in spec order. */
export const DIAGNOSE_FILES = [
  "failed",
  "local",
  "errors",
  "description",
  "diag",
  "comment",
  "status",
  "acl",
  "xml",
  "input",
  "output",
  "input_status",
  "output_status",
  "statistics",
] as const;
export type DiagnoseFile = (typeof DIAGNOSE_FILES)[number];

/** Every per-job control file (diagnose files plus private ones never served). */
/** `spec`: the normalized JobDescription as JSON (gateway writes, JEM reads); never served. */
export type ControlFile = DiagnoseFile | "spec" | "proxy" | "grami" | "lrms_done" | "lrms_job" | "script";

export function isDiagnoseFile(s: string): s is DiagnoseFile {
  return (DIAGNOSE_FILES as readonly string[]).includes(s);
}

/** Job ids are UUIDs; only `[0-9a-f-]` ever reaches a path. */
export const JOB_ID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

export class ControlDir {
  // Normalized once, ending in a separator: per-file paths are then plain concatenation of a
  // checked id and a fixed name (path.join on every control-file access showed in profiles).
  private readonly jobsPrefix: string;
  private readonly sessionPrefix: string;
  /** Where batch dirs and doorbells live (`paths.batchRoot`): the session root unless configured apart. */
  readonly batchRoot: string;

  constructor(
    readonly root: string,
    readonly sessionRoot: string,
    batchRoot?: string,
  ) {
    this.jobsPrefix = join(root, "jobs", "x").slice(0, -1);
    this.sessionPrefix = join(sessionRoot, "x").slice(0, -1);
    this.batchRoot = batchRoot ?? sessionRoot;
  }

  jobDir(id: string): string {
    if (!JOB_ID_RE.test(id)) throw new Error(`not a job id: ${JSON.stringify(id).slice(0, 80)}`);
    return `${this.jobsPrefix}${id.slice(0, 2)}/${id.slice(2, 4)}/${id}`;
  }

  file(id: string, name: ControlFile): string {
    return `${this.jobDir(id)}/${name}`;
  }

  sessionDir(id: string): string {
    if (!JOB_ID_RE.test(id)) throw new Error(`not a job id: ${JSON.stringify(id).slice(0, 80)}`);
    return `${this.sessionPrefix}${id}`;
  }

  /**
   * The batch job's own directory, beside its session dir as A-REX keeps `<session>.diag`: the
   * job script, the batch system's output (`comment`), `diag`, the end marker `lrms_done` and the
   * job's proxy. Everything a batch job writes is under the session root, the one file system a
   * worker node shares with the CE; the control dir stays private to the head node. Not inside
   * the session dir: that is the user's (served, listed, counted against the quota, returned as
   * outputs), and the wrapper's files are the CE's to read.
   */
  batchDir(id: string): string {
    if (!JOB_ID_RE.test(id)) throw new Error(`not a job id: ${JSON.stringify(id).slice(0, 80)}`);
    return join(this.batchRoot, `${id}.lrms`);
  }

  /**
   * Flat directory of completion doorbells: a batch job drops `<id>` here after writing its
   * `lrms_done`, so one watch on one directory (`fs.watch`) sees every completion however many
   * jobs are active. The per-job `lrms_done` stays the truth; the doorbell only says "look".
   * Under the session root (not a job id, so never taken for a session): a batch job reaches
   * nothing of the control dir.
   */
  eventsDir(): string {
    return join(this.batchRoot, ".events");
  }

  eventFile(id: string): string {
    if (!JOB_ID_RE.test(id)) throw new Error(`not a job id: ${JSON.stringify(id).slice(0, 80)}`);
    return join(this.eventsDir(), id);
  }

  /**
   * Roots with the modes of docs/security.md "Privilege separation": the control dir and `jobs/`
   * are the CE's alone (0700: no batch job needs them, docs/operations.md "What the worker nodes
   * share"); the session root is traverse-only for others (0711: a job reaches its own session and
   * batch dir by name, lists nothing); events is write-only for others (1733: a batch job rings
   * its doorbell, sees no other).
   */
  async ensureRoots(): Promise<void> {
    await mkdir(join(this.root, "jobs"), { recursive: true, mode: 0o700 });
    await mkdir(this.sessionRoot, { recursive: true, mode: 0o711 });
    await mkdir(this.batchRoot, { recursive: true, mode: 0o711 });
    await mkdir(this.eventsDir(), { recursive: true, mode: 0o1733 });
    const modes: Array<[string, number]> = [
      [this.root, 0o700],
      [join(this.root, "jobs"), 0o700],
      [this.eventsDir(), 0o1733],
      [this.sessionRoot, 0o711],
      [this.batchRoot, 0o711],
    ];
    // Not ours (a site-made volume root): the site set its modes.
    for (const [dir, mode] of modes) await chmod(dir, mode).catch(() => undefined);
  }

  async createJobDirs(id: string): Promise<void> {
    await mkdir(this.jobDir(id), { recursive: true, mode: 0o700 });
    await mkdir(this.sessionDir(id), { recursive: true, mode: 0o700 });
  }

  /*
   * Writing a control file: each way is a method here, taking the file's name as written in the
   * writer table (writers.ts), whose test finds every `control.<write|create|append|remove>(id, "<name>")`
   * in the sources. The `…Op` forms give the operation for a batch on the file thread
   * (`fileq.run`); the others run it alone.
   */

  /**
   * Whole-file replace: a fresh temporary name, then rename, so readers never see a half-written
   * file. Refused for `input_status`, which both processes append to (inputstatus.ts): a rename
   * would drop a record appended between the read and the rename.
   */
  writeOp(id: string, name: ControlFile, content: string, mode = 0o600): FsOp {
    if (name === "input_status") throw new Error("input_status is append-only: use appendInputs/forgetInputs");
    return ["write", this.file(id, name), content, mode];
  }

  /** A new file; EEXIST when there is one (nothing is overwritten). */
  createOp(id: string, name: ControlFile, content: string, mode = 0o600): FsOp {
    return ["create", this.file(id, name), content, mode];
  }

  /** Appends whole lines; O_APPEND keeps concurrent small appends from interleaving. */
  appendOp(id: string, name: ControlFile, text: string): FsOp {
    return ["append", this.file(id, name), text.endsWith("\n") ? text : `${text}\n`, 0o600];
  }

  /** Removes the file; a missing one is fine. */
  removeOp(id: string, name: ControlFile): FsOp {
    return ["unlink", this.file(id, name)];
  }

  async write(id: string, name: ControlFile, content: string, mode = 0o600): Promise<void> {
    await fileq.one(this.writeOp(id, name, content, mode));
  }

  async create(id: string, name: ControlFile, content: string, mode = 0o600): Promise<void> {
    await fileq.one(this.createOp(id, name, content, mode));
  }

  async append(id: string, name: ControlFile, text: string): Promise<void> {
    await fileq.one(this.appendOp(id, name, text));
  }

  async remove(id: string, name: ControlFile): Promise<void> {
    await fileq.one(this.removeOp(id, name));
  }

  /** The file's text; undefined when it is missing. No link is followed. */
  async read(id: string, name: ControlFile): Promise<string | undefined> {
    return (await fileq.one(["read", this.file(id, name)])) ?? undefined;
  }

  /** Appends a state-change line to `errors` the way A-REX does, for users reading diagnose/errors. */
  async logState(id: string, from: string, to: string, reason: string): Promise<void> {
    await this.append(id, "errors", stateLine(from, to, reason));
  }

  /**
   * Deletes the session dir without following any link in it: the job's account owns the tree and
   * can swap a directory for a link while the deletion runs (@ce/sessionfs walks it by descriptor).
   */
  async removeSession(id: string): Promise<void> {
    await removeTreeAt(this.sessionDir(id));
  }

  /** Session, batch and job dir, removed as removeSession does (the account owns the first two). */
  async removeAll(id: string): Promise<void> {
    await this.removeSession(id);
    await removeTreeAt(this.batchDir(id));
    await removeTreeAt(this.jobDir(id));
  }

  /**
   * Every job id that has a control dir, a session dir or a batch dir, with the newest mtime of them
   * (ms). For the lost-record sweep: one pass over the fan-out, O(jobs) but run rarely. Names
   * that are not job ids are not ours and are skipped.
   */
  async *listJobIds(): AsyncGenerator<{ id: string; mtimeMs: number }> {
    const seen = new Set<string>();
    const mtime = async (p: string) => (await stat(p).catch(() => undefined))?.mtimeMs ?? 0;
    const jobs = join(this.root, "jobs");
    for (const a of await readdir(jobs).catch(() => [] as string[])) {
      for (const b of await readdir(join(jobs, a)).catch(() => [] as string[])) {
        for (const id of await readdir(join(jobs, a, b)).catch(() => [] as string[])) {
          if (!JOB_ID_RE.test(id) || id.slice(0, 2) !== a || id.slice(2, 4) !== b) continue;
          seen.add(id);
          const times = await Promise.all([mtime(join(jobs, a, b, id)), mtime(this.sessionDir(id)), mtime(this.batchDir(id))]);
          yield { id, mtimeMs: Math.max(...times) };
        }
      }
    }
    const roots = this.batchRoot === this.sessionRoot ? [this.sessionRoot] : [this.sessionRoot, this.batchRoot];
    for (const root of roots) {
      for (const name of await readdir(root).catch(() => [] as string[])) {
        // `<id>` or `<id>.lrms`: a batch dir whose session is gone is still the job's.
        const id = name.endsWith(".lrms") ? name.slice(0, -5) : name;
        if (!JOB_ID_RE.test(id) || seen.has(id)) continue;
        seen.add(id);
        yield { id, mtimeMs: Math.max(await mtime(this.sessionDir(id)), await mtime(this.batchDir(id))) };
      }
    }
  }

  /** Opens a control file for reading without following a symlink (the job can't plant one here, but be safe). */
  async openForRead(id: string, name: ControlFile) {
    return open(this.file(id, name), constants.O_RDONLY | constants.O_NOFOLLOW);
  }
}

/** Removes the tree at `path` (its parent is the CE's) by descriptor, never through a link; a missing one is fine. */
async function removeTreeAt(path: string): Promise<void> {
  await removePath(path, []).catch((e: unknown) => {
    if (e instanceof SessionFsError && e.kind === "missing") return;
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return;
    throw e;
  });
}

/** An `errors` line of a state change, A-REX style (with its newline). */
export function stateLine(from: string, to: string, reason: string, at = new Date()): string {
  return `${at.toISOString().replace(/\.\d+Z$/, "Z")} Job state change ${from} -> ${to}   Reason: ${reason}\n`;
}

/** `.local`-style `key=value` lines. Values are single-line; newlines are escaped. */
export function formatKeyValues(entries: Array<[string, string | number | boolean | undefined]>): string {
  let out = "";
  for (const [k, v] of entries) out += keyValueLine(k, v);
  return out === "" ? "\n" : out;
}

/** One `key=value\n` line of a `.local`-style text; "" for an undefined or empty value (no line). */
export function keyValueLine(k: string, v: string | number | boolean | undefined): string {
  if (v === undefined || v === "") return "";
  const text = typeof v === "string" ? v : typeof v === "boolean" ? (v ? "yes" : "no") : String(v);
  return `${k}=${NEEDS_ESCAPE.test(text) ? text.replace(/\\/g, "\\\\").replace(/\n/g, "\\n") : text}\n`;
}
const NEEDS_ESCAPE = /[\\\n]/;

/**
 * Sets (or, with undefined/"", removes) keys of a `.local`-style text, keeping every other line
 * as it is, in order: keys that repeat by design (`voms=`, `notify=`) survive an update.
 */
export function updateKeyValues(text: string, entries: Record<string, string | number | undefined>): string {
  const keep = text.split("\n").filter((line) => {
    const i = line.indexOf("=");
    return i > 0 && !Object.hasOwn(entries, line.slice(0, i).trim());
  });
  const added = formatKeyValues(
    Object.entries(entries).map(([k, v]): [string, string | undefined] => [k, v === undefined ? undefined : String(v)]),
  );
  return [...keep, added.trimEnd()].filter(Boolean).join("\n").concat("\n");
}

export function parseKeyValues(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of text.split("\n")) {
    const i = line.indexOf("=");
    if (i <= 0) continue;
    // One pass, so an escaped backslash before `n` stays a backslash (inverse of formatKeyValues).
    out[line.slice(0, i).trim()] = line.slice(i + 1).replace(/\\([\\n])/g, (_, c: string) => (c === "n" ? "\n" : "\\"));
  }
  return out;
}

/** MDS time `YYYYMMDDHHMMSSZ` used in `.local`. */
let lastMds: [number, string] = [NaN, ""];
/** `YYYYMMDDhhmmssZ`; the last value is kept (a bulk submission formats one instant per job). */
export function mdsTime(d: Date): string {
  const t = d.getTime();
  if (t === lastMds[0]) return lastMds[1];
  const s = d
    .toISOString()
    .replace(/[-:T]/g, "")
    .replace(/\.\d+Z$/, "Z");
  lastMds = [t, s];
  return s;
}
