import type { Dirent } from "node:fs";
import { readdir } from "node:fs/promises";
import { Dir, readSmallFile, removeEntry, SessionFsError, unlinkNonDir, walkFiles } from "@ce/sessionfs";
import { splitUrlOptions, type JobDescription, type OutputFile } from "@ce/model";
import { refusalText, sessionSegments } from "./paths.js";

export type Outcome = "success" | "failed" | "killed";

export interface UploadItem {
  /** Session-relative name; a trailing `/` is a directory uploaded recursively. */
  name: string;
  target: string;
  delegationId?: string | undefined;
  options: Record<string, string>;
}

export interface OutputPlan {
  /** Session-relative names that survive the purge (files, or directories without the slash). */
  keep: string[];
  /** Directories kept whole. */
  keepDirs: string[];
  uploads: UploadItem[];
  /** `@list` files that could not be read safely (a link, a FIFO, a hard link, too large): reasons. */
  refused: string[];
}

/** An `@list` output list is a few lines per file; a bigger one is refused, not read whole. */
export const MAX_LIST_BYTES = 1024 * 1024;
/**
 * Lines of one `@list`, as many as a description may list outputs: every line becomes a kept name
 * that the purge compares with each session entry, so a megabyte of one-letter lines would cost
 * the JEM seconds of CPU per job. A longer list is refused whole.
 */
export const MAX_LIST_LINES = 10_000;
/**
 * Bytes of all `@list` files of one job read together: a description may name 10,000 lists, and
 * the line cap alone would let each be a megabyte of one long line.
 */
export const MAX_LISTS_BYTES = 16 * 1024 * 1024;

const wanted = (o: OutputFile, outcome: Outcome) =>
  outcome === "success" ? o.useIfSuccess : outcome === "failed" ? o.useIfFailure : o.useIfCancel;
const strip = (n: string) => n.replace(/^\/+/, "");

/**
 * Which outputs this outcome delivers (docs/architecture.md, Job flow): targets flagged for the
 * outcome are uploaded; client-downloadable outputs are always kept; after a non-kill failure
 * with reruns left, client-uploaded inputs are kept too so a restart can reuse them.
 * `@list` outputs are expanded from the named session file (`name [url]` lines).
 */
export async function outputPlan(
  sessionDir: string,
  desc: JobDescription,
  outcome: Outcome,
  rerun: number,
  /** Lines of all `@list` files together (staging.maxOutputListLines). */
  maxListLines: number,
): Promise<OutputPlan> {
  const plan: OutputPlan = { keep: [], keepDirs: [], uploads: [], refused: [] };
  let lineTotal = 0;
  let byteTotal = 0;
  const add = (o: OutputFile, name: string) => {
    if (o.target && !wanted(o, outcome)) return;
    const clean = strip(name);
    if (clean.endsWith("/")) plan.keepDirs.push(clean.replace(/\/+$/, ""));
    else plan.keep.push(clean);
    if (o.target) plan.uploads.push({ name: clean, target: o.target, delegationId: o.delegationId, options: o.options ?? {} });
  };
  for (const o of desc.outputFiles) {
    if (!o.name.startsWith("@")) {
      add(o, o.name);
      continue;
    }
    const listName = o.name.slice(1);
    plan.keep.push(strip(listName));
    // Past a job's caps the remaining lists are refused unread: the job fails with the reason.
    if (lineTotal > maxListLines || byteTotal > MAX_LISTS_BYTES) {
      plan.refused.push(`output list /${strip(listName)}: not read, the job's output lists are over their limit already`);
      continue;
    }
    const text = await readList(sessionDir, listName, plan);
    byteTotal += Buffer.byteLength(text);
    const lines = text.split("\n").filter((l) => l.trim());
    lineTotal += lines.length;
    if (lines.length > MAX_LIST_LINES) {
      plan.refused.push(`output list /${strip(listName)}: ${lines.length} lines, more than the ${MAX_LIST_LINES} allowed`);
      continue;
    }
    if (lineTotal > maxListLines) {
      plan.refused.push(
        `output list /${strip(listName)}: ${lineTotal} lines with the lists before it, more than the ${maxListLines} one job's output lists may have together (staging.maxOutputListLines)`,
      );
      continue;
    }
    if (byteTotal > MAX_LISTS_BYTES) {
      plan.refused.push(
        `output list /${strip(listName)}: ${byteTotal} bytes with the lists before it, more than the ${MAX_LISTS_BYTES} one job's output lists may have together`,
      );
      continue;
    }
    for (const line of lines) {
      const [name, url] = line.trim().split(/\s+/, 2);
      if (!name) continue;
      // A line's URL carries its own options (the pilot's `;failureallowed=yes` object-store
      // lines): they count as the file's, as a description's URL options do; the list entry's win.
      const options = url ? { ...splitUrlOptions(url)?.options, ...o.options } : o.options;
      add({ ...o, name, target: url || undefined, options }, name);
    }
  }
  if (outcome === "failed" && rerun > 0) for (const i of desc.inputFiles) if (!i.source) plan.keep.push(strip(i.name));
  return plan;
}

/** An `@list` file's text, read through `@ce/sessionfs`; missing = empty (A-REX), unsafe = refused. */
async function readList(sessionDir: string, listName: string, plan: OutputPlan): Promise<string> {
  try {
    return (await readSmallFile(sessionDir, sessionSegments(listName), MAX_LIST_BYTES, { refuseHardLinks: true })).toString("utf8");
  } catch (e) {
    if (e instanceof SessionFsError && e.kind === "missing") return "";
    plan.refused.push(`output list ${refusalText(e)}`);
    return "";
  }
}

/** Entries of the purge between two turns of the event loop. */
const PACE = 64;

/** The names in a sorted array that start with `prefix`: a contiguous run from its lower bound. */
function anyStartsWith(sorted: readonly string[], prefix: string): boolean {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (sorted[mid]! < prefix) lo = mid + 1;
    else hi = mid;
  }
  return lo < sorted.length && sorted[lo]!.startsWith(prefix);
}

/**
 * Removes everything from the session dir that the plan does not keep. Never follows links:
 * directories are entered relative to the held parent (O_NOFOLLOW), deletion is iterative.
 * Recursion only follows the kept names' ancestors, whose depth the description bounds.
 * Each entry costs a set lookup and a binary search over the sorted kept names (is it the parent
 * of one?), so 20,000 entries against 50,000 listed names is milliseconds, not the minute that
 * comparing every entry with every name took (issue 33).
 */
export async function purgeSession(sessionDir: string, plan: Pick<OutputPlan, "keep" | "keepDirs">): Promise<number> {
  const keep = new Set([...plan.keep, ...plan.keepDirs]);
  // Below a kept directory nothing is looked at (it is skipped whole), so only exact names matter.
  const all = [...keep].sort();
  let removed = 0;
  let ops = 0;
  const walk = async (dir: Dir, rel: string): Promise<void> => {
    for (const e of await readdir(dir.self, { withFileTypes: true }).catch(() => [] as Dirent[])) {
      // Synchronous unlinks (unlinkNonDir: async ones cost ~5× the CPU), with a turn of the event
      // loop every PACE entries so other jobs are not held up.
      if (++ops % PACE === 0) await new Promise((r) => setImmediate(r));
      const name = e.name;
      const r = rel ? `${rel}/${name}` : name;
      if (keep.has(r)) continue;
      if (anyStartsWith(all, `${r}/`)) {
        // An output's parent that is not a directory (a link the job planted) is left in place
        // for the upload to refuse by name; it is never entered (O_NOFOLLOW if it was swapped).
        const child = e.isDirectory() ? await dir.child(name).catch(() => undefined) : undefined;
        if (!child) continue;
        try {
          await walk(child, r);
        } finally {
          await child.close();
        }
        continue;
      }
      if (!e.isDirectory()) {
        // Never follows a link (removes the entry itself); a directory swapped in since the
        // listing is removed as one below.
        let done: ReturnType<typeof unlinkNonDir> | "left";
        try {
          done = unlinkNonDir(dir, name, `/${r}`);
        } catch (err) {
          if (!(err instanceof SessionFsError)) throw err;
          done = "left"; // the job took the CE's access away: the wipe (root) removes it later
        }
        if (done === "removed") removed++;
        if (done !== "is-dir") continue;
      }
      // A race the job wins (a directory moved mid-delete) leaves that entry; the wipe retries it.
      const gone = await removeEntry(dir, name, `/${r}`).then(
        () => true,
        (e: unknown) => {
          if (e instanceof SessionFsError) return false;
          throw e;
        },
      );
      if (gone) removed++;
    }
  };
  const root = await Dir.open(sessionDir).catch(() => undefined);
  if (!root) return 0;
  try {
    await walk(root, "");
  } finally {
    await root.close();
  }
  return removed;
}

/**
 * Files under a directory output (relative to the session dir), regular files only; symlinks,
 * special files and hard links in it come back as refusal reasons (the job fails on them).
 */
export async function filesUnder(sessionDir: string, dirName: string): Promise<{ files: string[]; refused: string[] }> {
  try {
    const r = await walkFiles(sessionDir, sessionSegments(dirName));
    return { files: r.files, refused: r.refused.map(refusalText) };
  } catch (e) {
    if (e instanceof SessionFsError && e.kind === "missing") return { files: [], refused: [] };
    return { files: [], refused: [refusalText(e)] };
  }
}
