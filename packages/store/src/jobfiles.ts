import { ADMISSION_REASON, type InputFile, type JobDescription, type LocalUser, type OutputFile } from "@ce/model";
import { type ControlDir, type ControlFile, formatKeyValues, mdsTime, stateLine } from "./controldir.js";
import type { FileBatchJob } from "./filewriter.js";


/**
 * The contents of a new job's control files (A-REX formats) and the one writer that creates them.
 * Only `createJobs` (controlfiles.ts) creates them (`jobFiles`); gateway, JEM tests and bench go through it.
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
}

/** A-REX token escaping in `.local` args and `.input`/`.output` lines: space, backslash, CR, LF. */
export function escapeToken(s: string): string {
  return s.replace(/[\\ \r\n]/g, (c) => (c === "\r" ? "\\r" : c === "\n" ? "\\n" : `\\${c}`));
}

function fileLine(name: string, url: string | undefined): string {
  const pfn = `/${escapeToken(name)}`;
  return url ? `${pfn} ${escapeToken(url)}` : pfn;
}

/** `.local` keys in A-REX write order (arex-jem §1.4.2), plus our `requestid`. */
export function localFile(j: JobFilesInput, sessionDir?: string): string {
  const d = j.description;
  const args = d.executable !== undefined ? [d.executable, ...d.arguments].map(escapeToken).join(" ") : undefined;
  const entries: Array<[string, string | number | boolean | undefined]> = [
    ["globalid", j.id],
    ["headnode", j.endpointUrl],
    ["headhost", j.hostname],
    ["globalurl", `${j.endpointUrl}/rest/${j.version}/jobs/${j.id}`],
    ["interface", "org.nordugrid.arcrest"],
    ["lrms", j.backend],
    ["queue", j.queue],
    ["args", args],
    ["argscode", d.successExitCode ?? 0],
    ["subject", j.owner],
    ["starttime", mdsTime(j.now)],
    ["lifetime", j.lifetime],
    ...d.notify.map((n): [string, string] => ["notify", n]),
    ["processtime", d.startTime ? mdsTime(d.startTime) : undefined],
    ["rerun", j.rerun],
    ["downloads", d.inputFiles.filter((f) => f.source).length],
    ["uploads", d.outputFiles.filter((f) => f.target).length],
    ["jobname", d.jobName],
    ["projectname", d.projectName],
    ["gmlog", d.logDir],
    ["delegexpiretime", j.delegationExpires ? mdsTime(new Date(j.delegationExpires)) : undefined],
    ["clientname", j.clientHost],
    ["clientsoftware", j.clientSoftware?.slice(0, 200)],
    ["delegationid", j.mainDelegation],
    ["sessiondir", sessionDir],
    ["diskspace", d.diskMB !== undefined ? d.diskMB * 1024 * 1024 : undefined],
    ["freestagein", d.freeStageIn ?? false],
    ["transfershare", "_default"],
    ["priority", d.priority ?? 50],
    ["dryrun", d.dryRun ?? false],
    ["requestid", j.requestId],
    // The mapping decided at submission (our keys; A-REX keeps it outside the .local file).
    ["localuser", j.localUser?.account],
    ["localuid", j.localUser?.uid],
    ["localgid", j.localUser?.gid],
    ...(j.fqans ?? []).map((f): [string, string] => ["voms", f]),
  ];
  return formatKeyValues(entries);
}

/**
 * `input` / `output` in A-REX's format (`/<name> [<url>]` per line), rendered from the description
 * when `diagnose/input|output` asks: nothing writes these files any more.
 */
export const inputFile = (files: readonly InputFile[]) => files.map((f) => fileLine(f.name, f.source)).join("\n") + (files.length ? "\n" : "");
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

export const outputFile = (files: readonly OutputFile[]) => files.map((f) => fileLine(f.name, f.target)).join("\n") + (files.length ? "\n" : "");

/**
 * A new job's directories and control files, for `createFiles` (filewriter.ts), which creates
 * them in this order: `status` last, so a half-written job never looks like a job. `input` and
 * `output` (A-REX's file lists) are not written: they are derived from `spec`, so
 * `diagnose/input|output` renders them on demand (renderFileList); `input_status` comes into being
 * with its first appended line. The directories are fresh, so the files are written directly with
 * `wx` (no temp+rename; an existing file is an error, never overwritten). A job created admitted
 * (PREPARING, @ce/model CREATION_STATES) also gets the `errors` line of that move, as the JEM
 * would have written it.
 */
export function jobFiles(control: ControlDir, j: JobFilesInput, state: "ACCEPTED" | "PREPARING" = "ACCEPTED"): FileBatchJob {
  const files: string[] = [];
  const add = (name: ControlFile, content: string) => files.push(name, content);
  add("description", j.source);
  add("spec", JSON.stringify(j.description));
  add("local", localFile(j, control.sessionDir(j.id)));
  if (j.description.acl) add("acl", j.description.acl);
  if (state === "PREPARING") add("errors", stateLine("ACCEPTED", "PREPARING", ADMISSION_REASON, j.now));
  // Nothing reads a job before its Redis record exists (the commit point comes after this), so
  // "last" is enough; no temp file + rename needed.
  add("status", `${state}\n`);
  const base = control.jobDir(j.id);
  // Nobody but the CE in the session dir until the JEM hands it to the mapped account (2770) at submission.
  return { dirs: [base, control.sessionDir(j.id)], base, files };
}

/** Runs `fn` over `items` with at most `limit` in flight; results keep the input order. */
export async function mapLimit<T, R>(items: readonly T[], limit: number, fn: (item: T, i: number) => Promise<R>): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i]!, i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}
