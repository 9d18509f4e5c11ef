import { join } from "node:path";
import type { JobDescription } from "@ce/model";
import {
  type ControlFile,
  type InputStatus,
  parseKeyValues,
  readInputStatus as readStoredInputStatus,
  updateKeyValues,
  fileq,
} from "@ce/controldir";
import type { JemContext } from "./context.js";

/** JEM-private per-job files next to the control files (never served by diagnose). */
export type PrivateFile = "submitting" | "stagein.failed" | "stageout.done" | "token" | "hook.accepted";

export function privatePath(ctx: JemContext, id: string, name: PrivateFile): string {
  return join(ctx.control.jobDir(id), name);
}

export async function exists(path: string): Promise<boolean> {
  return (await fileq.one(["exists", path])) === true;
}

/** A control file (undefined when missing), through the file thread (@ce/controldir files.ts). */
export async function readControl(ctx: JemContext, id: string, name: ControlFile): Promise<string | undefined> {
  return ((await fileq.one(["read", ctx.control.file(id, name)])) as string | null) ?? undefined;
}

export async function readPrivate(ctx: JemContext, id: string, name: PrivateFile): Promise<string | undefined> {
  return ((await fileq.one(["read", privatePath(ctx, id, name)]).catch(() => null)) as string | null) ?? undefined;
}

export async function writePrivate(ctx: JemContext, id: string, name: PrivateFile, text: string): Promise<void> {
  await fileq.one(["write", privatePath(ctx, id, name), text, 0o600]);
}

export async function appendPrivate(ctx: JemContext, id: string, name: PrivateFile, line: string): Promise<void> {
  await fileq.one(["append", privatePath(ctx, id, name), line, 0o600]);
}

/**
 * The `submitting` marker: one line `<stamp> <pid> tag=<tag>` per submission attempt, appended
 * before the batch system is called. The tag of the first complete line names the submission in
 * the batch system (Slurm --comment, fork start record) for every later attempt, so an attempt
 * after a crash adopts what an earlier one started instead of starting it again.
 */
export function parseSubmitting(text: string | undefined): { tag: string; attempts: number } | undefined {
  const tags = [...(text ?? "").matchAll(/^\S+ \d+ tag=([A-Za-z0-9._-]{1,100})\n/gm)].map((m) => m[1]!);
  return tags[0] === undefined ? undefined : { tag: tags[0], attempts: tags.length };
}

export async function removePrivate(ctx: JemContext, id: string, ...names: PrivateFile[]): Promise<void> {
  await fileq.run(names.map((n) => ["unlink", privatePath(ctx, id, n)] as const));
}

// `spec` never changes after submission; a small cache saves a read + parse per state handler.
const SPEC_CACHE_MAX = 2_000;
const specCache = new Map<string, JobDescription>();

/** The normalized description the gateway stored as `spec` (JSON; dates come back as strings). */
export async function readSpec(ctx: JemContext, id: string): Promise<JobDescription | undefined> {
  const key = `${ctx.config.paths.controlDir}\0${id}`;
  const hit = specCache.get(key);
  if (hit) return hit;
  const d = await parseSpec(await readControl(ctx, id, "spec"));
  if (d) {
    if (specCache.size >= SPEC_CACHE_MAX) specCache.delete(specCache.keys().next().value!);
    specCache.set(key, d);
  }
  return d;
}

async function parseSpec(text: string | undefined): Promise<JobDescription | undefined> {
  if (!text) return undefined;
  try {
    const d = JSON.parse(text) as JobDescription;
    if (d.startTime !== undefined) d.startTime = new Date(d.startTime as unknown as string);
    d.inputFiles ??= [];
    d.outputFiles ??= [];
    d.arguments ??= [];
    d.runtimeEnvironments ??= [];
    return d;
  } catch {
    return undefined;
  }
}

/** Sets (or with `undefined` removes) keys of the `.local`-style `local` file. */
export async function updateLocal(ctx: JemContext, id: string, entries: Record<string, string | number | undefined>): Promise<void> {
  // Line-wise: repeated keys (voms=, notify=) must survive the JEM's updates.
  await ctx.control.write(id, "local", updateKeyValues((await readControl(ctx, id, "local")) ?? "", entries));
}

/** `lrms_done` in A-REX's format: `<code> <message>`; empty = 0; unparsable code = -1 + whole line. */
export function parseLrmsDone(text: string | undefined): { code: number; message: string } {
  if (text === undefined) return { code: -1, message: "Internal error" };
  const line = text.split("\n", 1)[0]?.trim() ?? "";
  if (line === "") return { code: 0, message: "" };
  const m = /^(\S+)\s*(.*)$/.exec(line);
  const code = m ? Number.parseInt(m[1]!, m[1]!.startsWith("0x") ? 16 : 10) : Number.NaN;
  return Number.isFinite(code) ? { code, message: m?.[2] ?? "" } : { code: -1, message: line };
}

export interface DiagFacts {
  exitCode?: number | undefined;
  nodes?: string | undefined;
  usedWallSeconds?: number | undefined;
  usedCpuSeconds?: number | undefined;
  usedMemoryMB?: number | undefined;
  usedUserSeconds?: number | undefined;
  usedSystemSeconds?: number | undefined;
  processors?: number | undefined;
  startedAt?: number | undefined;
  endedAt?: number | undefined;
}

const seconds = (v: string | undefined) => (v === undefined ? undefined : Number.parseFloat(v.replace(/s$/, "")));
const finite = (n: number | undefined) => (n !== undefined && Number.isFinite(n) ? n : undefined);

/** MDS time `YYYYMMDDHHMMSSZ` → ms. */
export function parseMdsTime(v: string | undefined): number | undefined {
  const m = v && /^(\d{4})(\d{2})(\d{2})(\d{2})(\d{2})(\d{2})Z$/.exec(v);
  return m ? Date.UTC(+m[1]!, +m[2]! - 1, +m[3]!, +m[4]!, +m[5]!, +m[6]!) : undefined;
}

/** `diag` key=value lines (last occurrence wins; `nodename` may repeat). */
export function parseDiag(text: string | undefined): DiagFacts {
  if (!text) return {};
  const kv: Record<string, string> = {};
  const nodes: string[] = [];
  for (const line of text.split("\n")) {
    const i = line.indexOf("=");
    if (i <= 0) continue;
    const k = line.slice(0, i).trim();
    const v = line.slice(i + 1).trim();
    if (k.toLowerCase() === "nodename" && v) nodes.push(v);
    else kv[k] = v;
  }
  const user = seconds(kv.UserTime ?? kv.usertime);
  const kernel = seconds(kv.KernelTime ?? kv.kerneltime);
  const rssKb = kv.MaxResidentMemory ?? kv.maxresidentmemory;
  return {
    exitCode: finite(kv.exitcode !== undefined ? Number.parseInt(kv.exitcode, 10) : undefined),
    nodes: nodes.length ? [...new Set(nodes)].join(",") : undefined,
    usedWallSeconds: finite(seconds(kv.WallTime ?? kv.walltime)),
    usedCpuSeconds: finite(user !== undefined || kernel !== undefined ? (user ?? 0) + (kernel ?? 0) : undefined),
    usedMemoryMB: finite(rssKb !== undefined ? Math.ceil(Number.parseFloat(rssKb) / 1024) : undefined),
    usedUserSeconds: finite(user),
    usedSystemSeconds: finite(kernel),
    processors: finite(kv.Processors !== undefined ? Number.parseInt(kv.Processors, 10) : undefined),
    startedAt: parseMdsTime(kv.LRMSStartTime),
    endedAt: parseMdsTime(kv.LRMSEndTime),
  };
}

/** `input_status` as session-relative paths; the format and its append-only rule live in @ce/controldir (inputstatus.ts). */
export function readInputStatus(ctx: JemContext, id: string): Promise<InputStatus> {
  return readStoredInputStatus(ctx.control, id);
}

/** Local id a previous (possibly interrupted) submission left in `local` or `grami`. */
export async function leftoverLocalId(ctx: JemContext, id: string): Promise<string | undefined> {
  const [localText, gramiText] = (await fileq.run([
    ["read", ctx.control.file(id, "local")],
    ["read", ctx.control.file(id, "grami")],
  ])) as Array<string | null>;
  const local = parseKeyValues(localText ?? "");
  if (local.localid) return local.localid;
  const grami = gramiText ?? "";
  const m = /^joboption_jobid=['"]?([^'"\n]+)['"]?$/m.exec(grami);
  return m?.[1]?.trim() || undefined;
}

/** Drops the batch id from `local` and `grami` (restart: the old batch job must not be adopted). */
export async function forgetLocalId(ctx: JemContext, id: string): Promise<void> {
  await updateLocal(ctx, id, { localid: undefined });
  const grami = await ctx.control.read(id, "grami");
  if (grami !== undefined && /^joboption_jobid=/m.test(grami)) {
    await ctx.control.write(id, "grami", grami.replace(/^joboption_jobid=.*\n?/gm, ""));
  }
}

export const utcStamp = (d = new Date()) => d.toISOString().replace(/\.\d+Z$/, "Z");

/**
 * Appends a free-text line to `errors` (A-REX style, timestamped). With the state lines of
 * states/transition.ts, the JEM's only writer of that file: a job's log never fails a step.
 */
export async function logErrors(ctx: JemContext, id: string, text: string): Promise<void> {
  await appendErrors(ctx, id, `${utcStamp()} ${text}`);
}

/** Appends text that already has its own lines and stamps (a batch command's stderr, RTE stage 0's log) to `errors`. */
export async function appendErrors(ctx: JemContext, id: string, text: string): Promise<void> {
  await ctx.control.append(id, "errors", text).catch(() => undefined);
}

/**
 * `lrms_done` written by the JEM, the one place besides the wrapper's own (and its copy,
 * priv.ts): `create` when the batch system reports an end the wrapper did not record (fails with
 * EEXIST if the wrapper's appeared meanwhile: the wrapper's wins), `replace` when CANCELING gives
 * up, `forget` on restart.
 */
export const batchEnd = {
  async create(ctx: JemContext, id: string, code: number | string, message: string): Promise<void> {
    await ctx.control.create(id, "lrms_done", `${code} ${message}\n`);
  },
  async replace(ctx: JemContext, id: string, text: string): Promise<void> {
    await ctx.control.write(id, "lrms_done", text);
  },
  async forget(ctx: JemContext, id: string): Promise<void> {
    await ctx.control.remove(id, "lrms_done");
  },
};
