import { Failure } from "@ce/model";
import {
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  realpathSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { dirname, join, resolve, sep } from "node:path";

/**
 * Runtime environments (RTEs) as a site manages them, in ARC's layout (`arcctl rte`): under the
 * control dir, `rte/enabled/<NAME>` (may be requested) and `rte/default/<NAME>` (added to every
 * job) are symlinks to the RTE script, `rte/params/<NAME>` holds its parameters as `KEY=value`
 * lines. Names may contain `/` (`ENV/PROXY`). The configured lists (`jobs.runtimeEnvironments`,
 * `jobs.defaultRuntimeEnvironments`, scripts in `paths.rteDir`) count too, so a site can manage
 * RTEs by configuration alone. `ceadm rte` edits the files; the gateway (accept, GLUE2) and the
 * JEM (stage 0, job script) read them.
 */

/** The RTEs this CE ships (`ENV/CONTAINER`): packages/store/rte. */
// Beside the bundle (scripts/build-app.ts copies it there) or in the source tree.
export const SHIPPED_RTE_DIR = existsSync(join(import.meta.dirname, "rte"))
  ? join(import.meta.dirname, "rte")
  : resolve(import.meta.dirname, "../rte");

/**
 * Where RTEs come from besides `paths.rteDir`, offered by `ceadm rte list` and found by name by
 * `ceadm rte enable`: the CE's own, then where ARC packages install theirs (Debian `nordugrid-arc-arex`).
 */
export const SYSTEM_RTE_DIRS = [SHIPPED_RTE_DIR, "/usr/share/arc/rte"];

export interface RteConfig {
  paths: { controlDir: string; rteDir: string };
  jobs: { runtimeEnvironments: readonly string[]; defaultRuntimeEnvironments: readonly string[] };
}

export class RteError extends Failure<"BAD_NAME" | "NOT_FOUND" | "BAD_PARAM"> {
  constructor(code: "BAD_NAME" | "NOT_FOUND" | "BAD_PARAM", message: string) {
    super(code, message);
  }
}

const PARAM_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** A name is a relative path of plain segments (no `.`/`..`, no empty segment, no NUL or newline). */
export function checkRteName(name: string): string {
  if (
    !name ||
    name.length > 200 ||
    name.startsWith("/") ||
    /[\0\n\r]/.test(name) ||
    name.split("/").some((s) => s === "" || s === "." || s === "..")
  ) {
    throw new RteError("BAD_NAME", `invalid runtime environment name ${JSON.stringify(name.slice(0, 80))}`);
  }
  return name;
}

/** `<dir>/<name>` that cannot leave `dir`. */
function under(dir: string, name: string): string {
  const p = resolve(dir, checkRteName(name));
  if (!p.startsWith(resolve(dir) + sep)) throw new RteError("BAD_NAME", `invalid runtime environment name ${JSON.stringify(name)}`);
  return p;
}

const setDir = (cfg: RteConfig, set: "enabled" | "default" | "params") => join(cfg.paths.controlDir, "rte", set);

/** Names of the entries (files or symlinks, recursively) under `dir`. */
function listNames(dir: string, prefix = ""): string[] {
  let entries: import("node:fs").Dirent[];
  try {
    entries = readdirSync(join(dir, prefix), { withFileTypes: true });
  } catch {
    return [];
  }
  const out: string[] = [];
  for (const e of entries) {
    const name = prefix ? `${prefix}/${e.name}` : e.name;
    if (e.isDirectory()) out.push(...listNames(dir, name));
    else if (e.isFile() || e.isSymbolicLink()) out.push(name);
  }
  return out.sort();
}

const uniq = (xs: string[]) => [...new Set(xs)];

/** May be requested: configured + `rte/enabled/` + `rte/default/`. */
export function enabledRtes(cfg: RteConfig): string[] {
  return uniq([...cfg.jobs.runtimeEnvironments, ...listNames(setDir(cfg, "enabled")), ...defaultRtes(cfg)]);
}

/** Added to every job: configured + `rte/default/`. */
export function defaultRtes(cfg: RteConfig): string[] {
  return uniq([...cfg.jobs.defaultRuntimeEnvironments, ...listNames(setDir(cfg, "default"))]);
}

/**
 * The script of an RTE: the target of its `enabled`/`default` link, else `<rteDir>/<NAME>`;
 * undefined when there is no regular file. A link to /dev/null is a published-only dummy (ARC):
 * it resolves to undefined as well, so such an RTE cannot run.
 */
export function rteScript(cfg: RteConfig, name: string): string | undefined {
  for (const p of [under(setDir(cfg, "enabled"), name), under(setDir(cfg, "default"), name), under(cfg.paths.rteDir, name)]) {
    try {
      const real = realpathSync(p);
      if (statSync(real).isFile()) return real;
    } catch {
      // not there: next place
    }
  }
  return undefined;
}

/** Parameters of an RTE (`rte/params/<NAME>`): `KEY=value` lines, `#` comments; values taken literally. */
export function rteParams(cfg: RteConfig, name: string): Array<{ name: string; value: string }> {
  let text: string;
  try {
    text = readFileSync(under(setDir(cfg, "params"), name), "utf8");
  } catch {
    return [];
  }
  return parseParams(text);
}

export function parseParams(text: string): Array<{ name: string; value: string }> {
  const out: Array<{ name: string; value: string }> = [];
  for (const line of text.split("\n")) {
    const t = line.trim();
    if (t === "" || t.startsWith("#")) continue;
    const i = t.indexOf("=");
    const key = i > 0 ? t.slice(0, i) : "";
    if (!PARAM_NAME.test(key)) continue;
    let value = t.slice(i + 1);
    // ARC's arcctl writes KEY="value": one level of quotes is the writer's, not the value's.
    const q = /^"(.*)"$/.exec(value) ?? /^'(.*)'$/.exec(value);
    if (q) value = q[1]!.replace(/\\(["\\$`])/g, "$1");
    out.push({ name: key, value });
  }
  return out;
}

/** `ARC style` parameter declarations of a script: `# param:NAME:values:default:description`. */
export function declaredParams(script: string): Array<{ name: string; values: string; default: string; description: string }> {
  let text = "";
  try {
    text = readFileSync(script, "utf8").slice(0, 65536);
  } catch {
    return [];
  }
  const out: Array<{ name: string; values: string; default: string; description: string }> = [];
  for (const m of text.matchAll(/^# param:([A-Za-z_][A-Za-z0-9_]*):([^:\n]*):([^:\n]*):(.*)$/gm)) {
    out.push({ name: m[1]!, values: m[2]!, default: m[3]!, description: m[4]!.trim() });
  }
  return out;
}

/**
 * Where a job's bearer token lives in its session (ENV/TOKEN's BEARER_TOKEN_FILE): written by the
 * JEM (apps/jem credential-files.ts), never served by the gateway's session routes.
 */
export const SESSION_TOKEN_FILE = ".bearer_token";

/** A credential an RTE cannot work without: an X.509 proxy or a bearer token. */
export type RteCredential = "proxy" | "token";

/**
 * RTEs known to need a credential without saying so in their header: ARC's own scripts, which run
 * unmodified (ENV/PROXY copies `<controldir>/job.<id>.proxy` into the session in stage 0).
 */
const KNOWN_NEEDS: Record<string, readonly RteCredential[]> = { "ENV/PROXY": ["proxy"] };

/**
 * What a script's header declares it needs: `# needs: proxy`, `# needs: token` (several words or
 * lines add up). The header is the comment block the script opens with; what follows is code.
 */
export function declaredNeeds(scriptText: string): RteCredential[] {
  const out = new Set<RteCredential>();
  for (const line of scriptText.slice(0, 65536).split("\n")) {
    const t = line.trim();
    if (t === "" || t.startsWith("#!")) continue;
    if (!t.startsWith("#")) break;
    const m = /^#\s*needs:\s*(.*)$/i.exec(t);
    for (const w of m?.[1]?.toLowerCase().split(/[\s,]+/) ?? []) if (w === "proxy" || w === "token") out.add(w);
  }
  return [...out].sort();
}

/** The credentials RTE `name` needs (its header, or what is known of ARC's own); none when it has no script. */
export function rteNeeds(cfg: RteConfig, name: string): RteCredential[] {
  const known = KNOWN_NEEDS[name.replace(/-\d.*$/, "")] ?? [];
  let text = "";
  try {
    const script = rteScript(cfg, name);
    text = script ? readFileSync(script, "utf8").slice(0, 65536) : "";
  } catch {
    text = "";
  }
  return [...new Set([...known, ...declaredNeeds(text)])].sort();
}

const needsCache = new WeakMap<object, { at: number; needs: Map<string, RteCredential[]> }>();

/** rteNeeds, read at most every `ttlMs` per configuration (the gateway asks at every submission). */
export function rteNeedsCached(cfg: RteConfig, name: string, ttlMs = 5_000, now = Date.now()): RteCredential[] {
  let hit = needsCache.get(cfg);
  if (!hit || now - hit.at >= ttlMs) needsCache.set(cfg, (hit = { at: now, needs: new Map() }));
  let needs = hit.needs.get(name);
  if (needs === undefined) hit.needs.set(name, (needs = rteNeeds(cfg, name)));
  return needs;
}

/** Every RTE script a site could enable: `<rteDir>` and the ARC system dirs (first one wins). */
export function availableRtes(cfg: RteConfig, systemDirs = SYSTEM_RTE_DIRS): Map<string, string> {
  const out = new Map<string, string>();
  for (const dir of [cfg.paths.rteDir, ...systemDirs]) {
    for (const name of listNames(dir)) if (!out.has(name)) out.set(name, join(dir, name));
  }
  return out;
}

function link(cfg: RteConfig, set: "enabled" | "default", name: string, target: string): void {
  const p = under(setDir(cfg, set), name);
  mkdirSync(dirname(p), { recursive: true });
  const tmp = `${p}.tmp-${process.pid}`;
  rmSync(tmp, { force: true });
  symlinkSync(target, tmp);
  renameSync(tmp, p);
}

function unlinkName(cfg: RteConfig, set: "enabled" | "default", name: string): boolean {
  const p = under(setDir(cfg, set), name);
  try {
    lstatSync(p);
  } catch {
    return false;
  }
  rmSync(p, { force: true });
  return true;
}

/** The script to link for `name`: an explicit file, else the first available one of that name. */
function sourceFor(cfg: RteConfig, name: string, file: string | undefined, systemDirs: readonly string[]): string {
  const target = file ? resolve(file) : availableRtes(cfg, [...systemDirs]).get(name);
  if (!target || !existsSync(target) || !statSync(target).isFile()) {
    throw new RteError(
      "NOT_FOUND",
      `no runtime environment script for ${name}${file ? ` at ${file}` : ` in ${[cfg.paths.rteDir, ...systemDirs].join(", ")}`}`,
    );
  }
  return target;
}

/** `ceadm rte enable NAME [FILE]`. */
export function enableRte(cfg: RteConfig, name: string, file?: string, systemDirs: readonly string[] = SYSTEM_RTE_DIRS): string {
  const target = sourceFor(cfg, checkRteName(name), file, systemDirs);
  link(cfg, "enabled", name, target);
  return target;
}

/** `ceadm rte default NAME [FILE]`: every job gets it. */
export function defaultRte(cfg: RteConfig, name: string, file?: string, systemDirs: readonly string[] = SYSTEM_RTE_DIRS): string {
  const target = sourceFor(cfg, checkRteName(name), file, systemDirs);
  link(cfg, "default", name, target);
  return target;
}

/** `ceadm rte disable NAME`: neither enabled nor default (configured lists are the config's). */
export function disableRte(cfg: RteConfig, name: string): boolean {
  const a = unlinkName(cfg, "enabled", name);
  const b = unlinkName(cfg, "default", name);
  return a || b;
}

/** `ceadm rte params NAME KEY=value…`: merges into the parameters file (empty value removes the key). */
export function setRteParams(cfg: RteConfig, name: string, assignments: readonly string[]): Array<{ name: string; value: string }> {
  const current = new Map(rteParams(cfg, name).map((p) => [p.name, p.value]));
  for (const a of assignments) {
    const i = a.indexOf("=");
    const key = i > 0 ? a.slice(0, i) : "";
    const value = a.slice(i + 1);
    if (!PARAM_NAME.test(key))
      throw new RteError("BAD_PARAM", `parameter must be NAME=value with NAME a shell variable name: ${JSON.stringify(a.slice(0, 80))}`);
    if (/[\0\n\r]/.test(value)) throw new RteError("BAD_PARAM", `parameter ${key}: value must be one line`);
    if (value === "") current.delete(key);
    else current.set(key, value);
  }
  const p = under(setDir(cfg, "params"), name);
  mkdirSync(dirname(p), { recursive: true });
  const body = [...current].map(([k, v]) => `${k}="${v.replace(/(["\\$`])/g, "\\$1")}"\n`).join("");
  const tmp = `${p}.tmp-${process.pid}`;
  writeFileSync(tmp, body, { mode: 0o644 });
  renameSync(tmp, p);
  return [...current].map(([k, v]) => ({ name: k, value: v }));
}

export interface RteListing {
  name: string;
  /** The script that runs (undefined: missing, or a published-only dummy). */
  script: string | undefined;
  enabled: boolean;
  default: boolean;
  params: Array<{ name: string; value: string }>;
}

/** `ceadm rte list`: the available scripts and every enabled or default name, with their state. */
export function listRtes(cfg: RteConfig, systemDirs: readonly string[] = SYSTEM_RTE_DIRS): RteListing[] {
  const enabled = new Set(enabledRtes(cfg));
  const defaults = new Set(defaultRtes(cfg));
  const available = availableRtes(cfg, [...systemDirs]);
  const names = uniq([...enabled, ...available.keys()]).sort();
  return names.map((name) => ({
    name,
    script: enabled.has(name) ? rteScript(cfg, name) : available.get(name),
    enabled: enabled.has(name),
    default: defaults.has(name),
    params: rteParams(cfg, name),
  }));
}

const enabledCache = new WeakMap<object, { at: number; names: string[] }>();

/** enabledRtes, read at most every `ttlMs` per configuration (the gateway asks at every submission). */
export function enabledRtesCached(cfg: RteConfig, ttlMs = 5_000, now = Date.now()): string[] {
  const hit = enabledCache.get(cfg);
  if (hit && now - hit.at < ttlMs) return hit.names;
  const names = enabledRtes(cfg);
  enabledCache.set(cfg, { at: now, names });
  return names;
}
