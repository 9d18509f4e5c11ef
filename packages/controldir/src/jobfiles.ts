import {
  ADMISSION_REASON,
  awaitingMessage,
  awaitingText,
  clientUploads,
  type InputFile,
  type JobDescription,
  type LocalUser,
  type OutputFile,
} from "@ce/model";
import { type ControlDir, type ControlFile, keyValueLine, mdsTime, stateLine } from "./controldir.js";
import type { FsOp } from "./ops.js";

/**
 * The contents of a new job's control files (A-REX formats) and the one writer that creates them.
 * Only `createJobs` (protocol.ts) creates them (`jobFiles`); gateway, JEM tests and bench go through it.
 */

/** What the gateway knows about a job when it writes its control files. */
export interface JobFilesInput {
  id: string;
  description: JobDescription;
  source: string;
  owner: string;
  queue: string;
  backend: string;
  endpointUrl: string;
  hostname: string;
  version: string;
  lifetime: number;
  rerun: number;
  mainDelegation?: string | undefined;
  delegationExpires?: number | undefined;
  clientHost?: string | undefined;
  clientSoftware?: string | undefined;
  requestId: string;
  now: Date;
  /** The mapped local account (absent when mapping is off). */
  localUser?: LocalUser | undefined;
  /** FQANs in effect at submission, primary first (A-REX writes them as `voms=` lines). */
  fqans?: readonly string[] | undefined;
  /** When a job created waiting for client uploads stops waiting (ms); its `errors` says so. */
  uploadDeadline?: number | undefined;
}

/** A-REX token escaping in `.local` args and `.input`/`.output` lines: space, backslash, CR, LF. */
export function escapeToken(s: string): string {
  return s.replace(/[\\ \r\n]/g, (c) => (c === "\r" ? "\\r" : c === "\n" ? "\\n" : `\\${c}`));
}

function fileLine(name: string, url: string | undefined): string {
  const pfn = `/${escapeToken(name)}`;
  return url ? `${pfn} ${escapeToken(url)}` : pfn;
}

/**
 * `.local` keys in A-REX's write order, plus our `requestid`. Built line by line
 * (no list of entries first): every new job's `local` is rendered on the submission path.
 */
export function localFile(j: JobFilesInput, sessionDir?: string): string {
  const d = j.description;
  const kv = keyValueLine;
  let downloads = 0;
  for (const f of d.inputFiles) if (f.source) downloads++;
  let uploads = 0;
  for (const f of d.outputFiles) if (f.target) uploads++;
  let out =
    kv("globalid", j.id) +
    kv("headnode", j.endpointUrl) +
    kv("headhost", j.hostname) +
    kv("globalurl", `${j.endpointUrl}/rest/${j.version}/jobs/${j.id}`) +
    kv("interface", "org.nordugrid.arcrest") +
    kv("lrms", j.backend) +
    kv("queue", j.queue) +
    kv("args", d.executable !== undefined ? [d.executable, ...d.arguments].map(escapeToken).join(" ") : undefined) +
    kv("argscode", d.successExitCode ?? 0) +
    kv("subject", j.owner) +
    kv("starttime", mdsTime(j.now)) +
    kv("lifetime", j.lifetime);
  for (const n of d.notify) out += kv("notify", n);
  out +=
    kv("processtime", d.startTime ? mdsTime(d.startTime) : undefined) +
    kv("rerun", j.rerun) +
    kv("downloads", downloads) +
    kv("uploads", uploads) +
    kv("jobname", d.jobName) +
    kv("projectname", d.projectName) +
    kv("gmlog", d.logDir) +
    kv("delegexpiretime", j.delegationExpires ? mdsTime(new Date(j.delegationExpires)) : undefined) +
    kv("clientname", j.clientHost) +
    kv("clientsoftware", j.clientSoftware?.slice(0, 200)) +
    kv("delegationid", j.mainDelegation) +
    kv("sessiondir", sessionDir) +
    kv("diskspace", d.diskMB !== undefined ? d.diskMB * 1024 * 1024 : undefined) +
    kv("freestagein", d.freeStageIn ?? false) +
    kv("transfershare", "_default") +
    kv("priority", d.priority ?? 50) +
    kv("dryrun", d.dryRun ?? false) +
    kv("requestid", j.requestId) +
    // The mapping decided at submission (our keys; A-REX keeps it outside the .local file).
    kv("localuser", j.localUser?.account) +
    kv("localuid", j.localUser?.uid) +
    kv("localgid", j.localUser?.gid);
  for (const f of j.fqans ?? []) out += kv("voms", f);
  return out;
}

/**
 * `input` / `output` in A-REX's format (`/<name> [<url>]` per line), rendered from the description
 * when `diagnose/input|output` asks: nothing writes these files.
 */
export const inputFile = (files: readonly InputFile[]) =>
  files.map((f) => fileLine(f.name, f.source)).join("\n") + (files.length ? "\n" : "");
/** `diagnose/input|output` of a job from its `spec` text; undefined when there is no usable spec. */
export function renderFileList(kind: "input" | "output", specText: string | undefined): string | undefined {
  if (!specText) return undefined;
  let d: Partial<JobDescription>;
  try {
    d = JSON.parse(specText) as Partial<JobDescription>;
  } catch {
    return undefined;
  }
  if (!d || typeof d !== "object") return undefined;
  const list = kind === "input" ? d.inputFiles : d.outputFiles;
  const files = Array.isArray(list) ? list : [];
  return kind === "input" ? inputFile(files as InputFile[]) : outputFile(files as OutputFile[]);
}

export const outputFile = (files: readonly OutputFile[]) =>
  files.map((f) => fileLine(f.name, f.target)).join("\n") + (files.length ? "\n" : "");

/** A new job's directories and files as one file-thread operation (ops.ts `createJob`). */
export type CreateJobOp = Extract<FsOp, readonly ["createJob", ...unknown[]]>;

/**
 * A new job's directories and control files, created by one file-thread operation. `status` is not
 * written here: a job is a job once its Redis record exists (the commit after these files), the
 * JEM writes `status` at the job's first state move, and diagnose/status renders the record. `input` and
 * `output` (A-REX's file lists) are not written: they are derived from `spec`, so
 * `diagnose/input|output` renders them on demand (renderFileList); `input_status` comes into being
 * with its first appended line. The directories are fresh, so the files are written directly with
 * `wx` (no temp+rename; an existing file is an error, never overwritten). A job created admitted
 * (PREPARING, @ce/model CREATION_STATES) also gets the `errors` line of that move, as the JEM
 * would have written it.
 */
export function jobFiles(control: ControlDir, j: JobFilesInput, state: "ACCEPTED" | "PREPARING" = "ACCEPTED"): CreateJobOp {
  const files: string[] = [];
  // The writer table (writers.ts) finds each `create("<name>", …)` here.
  const create = (name: ControlFile, content: string) => files.push(name, content);
  create("description", j.source);
  create("spec", JSON.stringify(j.description));
  create("local", localFile(j, control.sessionDir(j.id)));
  if (j.description.acl) create("acl", j.description.acl);
  if (state === "PREPARING") {
    const uploads = clientUploads(j.description);
    const stamp = j.now.toISOString().replace(/\.\d+Z$/, "Z");
    const waiting = uploads.length > 0 ? `${stamp} ${awaitingMessage(awaitingText(uploads), j.uploadDeadline)}\n` : "";
    create("errors", stateLine("ACCEPTED", "PREPARING", ADMISSION_REASON, j.now) + waiting);
  }
  const base = control.jobDir(j.id);
  // Nobody but the CE in the session dir until the JEM hands it to the mapped account (2770) at submission.
  return ["createJob", [base, control.sessionDir(j.id)], base, files];
}
