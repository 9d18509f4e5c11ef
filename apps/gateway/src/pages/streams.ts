import { normalizeSessionPath } from "@ce/model";
import type { JobRecord } from "@ce/store";
import type { Services } from "../context.js";
import { openTarget, SessionFsError } from "../services/session/index.js";

/*
 * The job's standard output and error on its page: named even when the job did not list them as
 * output files, and their last lines shown when the session directory still has them. The files
 * are the job's (hostile): opened through the session code's no-follow, regular-file-only,
 * single-link open, read only at their end (STREAM_TAIL_BYTES), and shown as text (JSX escapes).
 */

/** Bytes read at most from the end of stdout/stderr for the page. */
export const STREAM_TAIL_BYTES = 4096;
/** Lines of that tail shown. */
export const STREAM_TAIL_LINES = 20;

export interface StreamTail {
  which: "stdout" | "stderr";
  /** Session-relative name the description gave; undefined when it named none. */
  name?: string | undefined;
  /** Listed as an output file (kept after the job ends). */
  kept: boolean;
  /** The last lines, when the session directory still has the file. */
  tail?: string | undefined;
  size?: number | undefined;
  /** The tail starts inside the file (earlier bytes left out). */
  cut?: boolean | undefined;
}

/** What the stored description says about outputs and memory, for the failure's words. */
export interface SpecFacts {
  memoryMB?: number | undefined;
  outputs: Set<string>;
}

/** Reads the few description fields the job page needs (the `spec` control file is the description as JSON). */
export async function specFacts(s: Services, id: string): Promise<SpecFacts> {
  const text = await s.control.read(id, "spec").catch(() => undefined);
  const out: SpecFacts = { outputs: new Set() };
  if (!text) return out;
  try {
    const d = JSON.parse(text) as { memoryMB?: unknown; outputFiles?: unknown };
    if (typeof d.memoryMB === "number") out.memoryMB = d.memoryMB;
    if (Array.isArray(d.outputFiles))
      for (const f of d.outputFiles as { name?: unknown }[]) {
        const n = typeof f?.name === "string" ? normalizeSessionPath(f.name.replace(/^\/+/, "")) : undefined;
        if (n !== undefined) out.outputs.add(n);
      }
  } catch {
    // A spec the CE cannot read: the page says less, it does not fail.
  }
  return out;
}

export async function streamTails(s: Services, job: JobRecord, facts: SpecFacts): Promise<StreamTail[]> {
  const out: StreamTail[] = [];
  for (const which of ["stderr", "stdout"] as const) {
    const raw = job.summary?.[which];
    const name = raw ? normalizeSessionPath(raw.replace(/^\/+/, "")) : undefined;
    const entry: StreamTail = {
      which,
      name: name ?? raw,
      kept: name !== undefined && (facts.outputs.has(name) || [...facts.outputs].some((o) => o.endsWith("/") && name.startsWith(o))),
    };
    if (name && job.state !== "DELETED") Object.assign(entry, await readTail(s.control.sessionDir(job.id), name.split("/")));
    out.push(entry);
  }
  return out;
}

async function readTail(root: string, segments: string[]): Promise<Partial<StreamTail>> {
  let target;
  try {
    target = await openTarget(root, segments);
  } catch (e) {
    if (e instanceof SessionFsError) return {};
    throw e;
  }
  if (target.kind !== "file") {
    await target.dir.close();
    return {};
  }
  try {
    const size = target.stat.size;
    const start = Math.max(0, size - STREAM_TAIL_BYTES);
    const buf = Buffer.alloc(Math.min(STREAM_TAIL_BYTES, size));
    const { bytesRead } = await target.handle.read(buf, 0, buf.length, start);
    let lines = buf.subarray(0, bytesRead).toString("utf8").split("\n");
    // A cut tail starts inside a line; a final newline leaves an empty last element.
    if (start > 0) lines.shift();
    if (lines.at(-1) === "") lines.pop();
    const cut = start > 0 || lines.length > STREAM_TAIL_LINES;
    lines = lines.slice(-STREAM_TAIL_LINES);
    // Terminal control sequences and other C0 characters are shown as U+FFFD, never passed on.
    const tail = lines.join("\n").replace(/[\u0000-\u0008\u000b-\u001f\u007f]/g, "\ufffd");
    return { tail, size, cut };
  } finally {
    await target.handle.close();
  }
}
