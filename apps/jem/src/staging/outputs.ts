import { lstat, readdir, readFile, rm } from "node:fs/promises";
import { join } from "node:path";
import type { JobDescription, OutputFile } from "@ce/model";
import { sessionPath } from "./paths.js";

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
}

const wanted = (o: OutputFile, outcome: Outcome) => (outcome === "success" ? o.useIfSuccess : outcome === "failed" ? o.useIfFailure : o.useIfCancel);
const strip = (n: string) => n.replace(/^\/+/, "");

/**
 * Which outputs this outcome delivers (arex-jem §2.3 failure path, §5.1): targets flagged for the
 * outcome are uploaded; client-downloadable outputs are always kept; after a non-kill failure
 * with reruns left, client-uploaded inputs are kept too so a restart can reuse them.
 * `@list` outputs are expanded from the named session file (`name [url]` lines).
 */
export async function outputPlan(sessionDir: string, desc: JobDescription, outcome: Outcome, rerun: number): Promise<OutputPlan> {
  const plan: OutputPlan = { keep: [], keepDirs: [], uploads: [] };
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
    const text = await sessionPath(sessionDir, listName).then((p) => readFile(p, "utf8")).catch(() => "");
    for (const line of text.split("\n")) {
      const [name, url] = line.trim().split(/\s+/, 2);
      if (!name) continue;
      add({ ...o, name, target: url || undefined }, name);
    }
  }
  if (outcome === "failed" && rerun > 0) for (const i of desc.inputFiles) if (!i.source) plan.keep.push(strip(i.name));
  return plan;
}

/** Removes everything from the session dir that the plan does not keep. Never follows links. */
export async function purgeSession(sessionDir: string, plan: Pick<OutputPlan, "keep" | "keepDirs">): Promise<number> {
  const keep = new Set(plan.keep);
  const all = [...plan.keep, ...plan.keepDirs];
  let removed = 0;
  const walk = async (dir: string, rel: string): Promise<void> => {
    const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
    for (const e of entries) {
      const r = rel ? `${rel}/${e.name}` : e.name;
      if (keep.has(r) || plan.keepDirs.some((d) => r === d || r.startsWith(`${d}/`))) continue;
      if (e.isDirectory() && all.some((k) => k.startsWith(`${r}/`))) {
        await walk(join(dir, e.name), r);
        continue;
      }
      await rm(join(dir, e.name), { recursive: true, force: true });
      removed++;
    }
  };
  await walk(sessionDir, "");
  return removed;
}

/** Files under a directory output (relative to the session dir), regular files only. */
export async function filesUnder(sessionDir: string, dirName: string): Promise<string[]> {
  const out: string[] = [];
  const walk = async (rel: string): Promise<void> => {
    const abs = await sessionPath(sessionDir, rel);
    for (const e of await readdir(abs, { withFileTypes: true }).catch(() => [])) {
      const r = `${rel}/${e.name}`;
      if (e.isDirectory()) await walk(r);
      else if (e.isFile()) out.push(r);
    }
  };
  const st = await lstat(join(sessionDir, dirName)).catch(() => undefined);
  if (st?.isDirectory()) await walk(dirName.replace(/\/+$/, ""));
  return out;
}
