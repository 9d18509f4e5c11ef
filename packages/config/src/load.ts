import { Failure } from "@ce/model";
import { existsSync, readFileSync } from "node:fs";
import { isAbsolute, join, resolve } from "node:path";
import YAML from "yaml";
import { z } from "zod";
import { nearest, schemaKeys, strictDeep } from "./keys.js";
import { configSchema, type Config, type ConfigInput } from "./schema.js";

/** Configuration after defaults are applied and every derived value is resolved (absolute paths, default queue). */
export interface CompiledConfig extends Config {
  paths: Config["paths"] & { stateDir: string; controlDir: string; sessionRoot: string; batchRoot: string; rteDir: string };
  auth: Config["auth"] & { caDir: string; voms: Config["auth"]["voms"] & { dir: string; hostNames: string[] } };
  jobs: Config["jobs"] & { defaultQueue: string };
  lrms: Config["lrms"] & { scriptsDir: string; callsPerSecond: number };
  /** `scheme://host[:port]` of endpoint.url, the default token audience. */
  origin: string;
  /** Path part of endpoint.url (e.g. `/arex`), where the REST interface is mounted. */
  mountPath: string;
}

export class ConfigError extends Failure<"CONFIG_INVALID"> {
  constructor(message: string) {
    super("CONFIG_INVALID", message);
  }
}

/** Where each configured value came from, for messages that name the file or the variable. */
export interface ConfigOrigins {
  /** The configuration file, when one was read. */
  file?: string;
  /** Dotted key path → the `CE__…` variable that set it. */
  env: Map<string, string>;
}

const STRICT = strictDeep(configSchema);
const KEYS = schemaKeys(configSchema);
/** `CE__ADMIN__JEM_PORT` → its key; every key outside a list has one (sections too: a JSON object). */
const BY_ENV = new Map(KEYS.filter((k) => k.env).map((k) => [k.env!, k]));

/**
 * Environment overrides: `CE__GATEWAY__PORT=9443` sets `gateway.port`; the name of every key is
 * derived from the schema (each camelCase segment in UPPER_SNAKE, `__` between segments:
 * `admin.jemPort` is `CE__ADMIN__JEM_PORT`). A `CE__` name that is no key stops the boot naming the
 * nearest one. Values of text keys are taken as they are; others are parsed as JSON when they look
 * like JSON (numbers, booleans, lists, objects).
 */
export function readEnv(env: NodeJS.ProcessEnv = process.env): { values: Record<string, unknown>; origins: Map<string, string> } {
  const values: Record<string, unknown> = {};
  const origins = new Map<string, string>();
  const unknown: string[] = [];
  for (const [k, raw] of Object.entries(env)) {
    if (!k.startsWith("CE__") || raw === undefined) continue;
    const key = BY_ENV.get(k);
    if (!key) {
      const hint = nearest(k, [...BY_ENV.keys()], "__");
      unknown.push(
        `unknown key ${k} in the environment (${hint ? `did you mean ${hint}?` : "names are CE__<SECTION>__<KEY>, listed in docs/configuration.md"})`,
      );
      continue;
    }
    let value: unknown = raw;
    const text = key.schema instanceof z.ZodString || key.schema instanceof z.ZodEnum;
    if (!text && /^(true|false|-?\d+(\.\d+)?|\[.*\]|\{.*\})$/s.test(raw.trim())) {
      try {
        value = JSON.parse(raw);
      } catch {
        value = raw;
      }
    }
    let node = values;
    for (const seg of key.path.slice(0, -1)) node = (node[seg] ??= {}) as Record<string, unknown>;
    node[key.path[key.path.length - 1]!] = value;
    origins.set(key.path.join("."), k);
  }
  if (unknown.length > 0) throw new ConfigError(`invalid configuration: ${unknown.sort().join("; ")}`);
  return { values, origins };
}

/** The overrides of `readEnv` alone. */
export function envOverrides(env: NodeJS.ProcessEnv = process.env): Record<string, unknown> {
  return readEnv(env).values;
}

function deepMerge(a: Record<string, unknown>, b: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...a };
  for (const [k, v] of Object.entries(b)) {
    const prev = out[k];
    out[k] =
      v && typeof v === "object" && !Array.isArray(v) && prev && typeof prev === "object" && !Array.isArray(prev)
        ? deepMerge(prev as Record<string, unknown>, v as Record<string, unknown>)
        : v;
  }
  return out;
}

export function parseConfigFile(file: string): ConfigInput {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (e) {
    throw new ConfigError(`cannot read the configuration file ${file}: ${systemReason(e)}`);
  }
  try {
    return (file.endsWith(".json") ? JSON.parse(text) : YAML.parse(text)) ?? {};
  } catch (e) {
    // The YAML parser's message carries a code frame on further lines; its first line says where.
    throw new ConfigError(`cannot parse ${file}: ${(e as Error).message.split("\n")[0]}`);
  }
}

/** The JEM's shipped back-end scripts: beside the bundle (scripts/build-app.ts) or in the source tree. */
const SHIPPED_BACKENDS = existsSync(join(import.meta.dirname, "backends"))
  ? join(import.meta.dirname, "backends")
  : resolve(import.meta.dirname, "../../../apps/jem/backends");

/** Validates and compiles. Relative paths are resolved against `baseDir` (the config file's directory or cwd). */
export function compileConfig(input: ConfigInput, baseDir = process.cwd(), origins: ConfigOrigins = { env: new Map() }): CompiledConfig {
  const parsed = STRICT.safeParse(input);
  if (!parsed.success) throw new ConfigError(`invalid configuration: ${describeIssues(parsed.error, input, origins)}`);
  const cfg: Config = parsed.data;
  const abs = (p: string) => (isAbsolute(p) ? p : resolve(baseDir, p));
  const stateDir = abs(cfg.paths.stateDir);
  const url = new URL(cfg.endpoint.url);
  const queues = cfg.jobs.queues;
  if (queues.length === 0) throw new ConfigError("invalid configuration: jobs.queues: at least one queue is required");
  const defaultQueue = cfg.jobs.defaultQueue ?? queues[0]!.name;
  if (!queues.some((q) => q.name === defaultQueue)) {
    throw new ConfigError(`invalid configuration: jobs.defaultQueue: "${defaultQueue}" is not one of jobs.queues`);
  }
  return {
    ...cfg,
    paths: {
      ...cfg.paths,
      stateDir,
      controlDir: abs(cfg.paths.controlDir ?? `${stateDir}/control`),
      sessionRoot: abs(cfg.paths.sessionRoot ?? `${stateDir}/session`),
      batchRoot: abs(cfg.paths.batchRoot ?? cfg.paths.sessionRoot ?? `${stateDir}/session`),
      rteDir: abs(cfg.paths.rteDir ?? `${stateDir}/rte`),
    },
    redis: { ...cfg.redis, users: redisUsers(cfg, stateDir, abs) },
    auth: {
      ...cfg.auth,
      caDir: abs(cfg.auth.caDir ?? `${stateDir}/pki/ca`),
      voms: {
        ...cfg.auth.voms,
        dir: abs(cfg.auth.voms.dir ?? `${stateDir}/pki/vomsdir`),
        hostNames: cfg.auth.voms.hostNames.length ? cfg.auth.voms.hostNames : [new URL(cfg.endpoint.url).hostname],
      },
    },
    jobs: { ...cfg.jobs, defaultQueue },
    lrms: {
      ...cfg.lrms,
      scriptsDir: abs(cfg.lrms.scriptsDir ?? SHIPPED_BACKENDS),
      callsPerSecond: cfg.lrms.callsPerSecond ?? DEFAULT_LRMS_RATE[cfg.lrms.backend] ?? 20,
      ...(cfg.lrms.nodeCaFile ? { nodeCaFile: abs(cfg.lrms.nodeCaFile) } : {}),
    },
    origin: url.origin,
    mountPath: url.pathname.replace(/\/+$/, ""),
  };
}

/** Batch-system operations per second by back end (schema `lrms.callsPerSecond`); 0 = no limit. */
const DEFAULT_LRMS_RATE: Record<string, number> = { fork: 0, slurm: 100 };

/** Password files made absolute; the embedded setup's default files under <stateDir>/secrets. */
function redisUsers(cfg: Config, stateDir: string, abs: (p: string) => string): Config["redis"]["users"] {
  const user = (role: "gateway" | "jem") => {
    const u = cfg.redis.users[role];
    const file = u.passwordFile ?? (cfg.redis.embedded ? `${stateDir}/secrets/redis-${role}.password` : undefined);
    return { username: u.username, ...(file ? { passwordFile: abs(file) } : {}) };
  };
  return { gateway: user("gateway"), jem: user("jem") };
}

/** Boot-time entry: `CE_CONFIG` (YAML or JSON file) merged with `CE__*` environment overrides. */
export function loadConfig(opts: { file?: string; env?: NodeJS.ProcessEnv; overrides?: ConfigInput } = {}): CompiledConfig {
  const env = opts.env ?? process.env;
  const file = opts.file ?? env.CE_CONFIG;
  const fromFile = file ? parseConfigFile(file) : {};
  const fromEnv = readEnv(env);
  const merged = deepMerge(
    deepMerge(fromFile as Record<string, unknown>, fromEnv.values),
    (opts.overrides ?? {}) as Record<string, unknown>,
  );
  return compileConfig(merged as ConfigInput, file ? resolve(file, "..") : process.cwd(), {
    ...(file ? { file } : {}),
    env: fromEnv.origins,
  });
}

/** `ENOENT` → "no such file or directory", as the one-line reason of a failed read. */
function systemReason(e: unknown): string {
  const code = (e as NodeJS.ErrnoException).code;
  const words: Record<string, string> = { ENOENT: "no such file or directory", EACCES: "permission denied", EISDIR: "is a directory" };
  return (code && words[code]) ?? (e as Error).message;
}

/** Candidate key paths for suggestions: `jobs.queues[].name` style. */
const KEY_PATHS = KEYS.map((k) => dotted(k.path));

function dotted(path: readonly (string | number)[]): string {
  return path
    .map((s) => (s === "[]" || typeof s === "number" ? "[]" : `.${s}`))
    .join("")
    .replace(/^\./, "");
}

/** Values whose text must not reach a log line. */
const SECRET = /(key|token|password|secret)$/i;

/** All issues as one line, each naming the key, its value and where that value came from. */
function describeIssues(err: z.ZodError, input: unknown, origins: ConfigOrigins): string {
  const where = (path: readonly (string | number)[]): string => {
    for (let n = path.length; n > 0; n--) {
      const v = origins.env.get(path.slice(0, n).join("."));
      if (v) return `from ${v}`;
    }
    return origins.file ? `in ${origins.file}` : "";
  };
  const parts = err.issues.map((i) => {
    if (i.code === "unrecognized_keys") {
      return i.keys
        .map((k) => {
          const path = [...i.path, k];
          const wrong = dotted(path);
          let hint = nearest(wrong, KEY_PATHS);
          // Back to the indices of the wrong path (`jobs.queues[].name` → `jobs.queues.0.name`).
          const idx = path.filter((s) => typeof s === "number");
          if (hint) hint = hint.replace(/\[\]/g, () => `.${idx.shift() ?? 0}`);
          const siblings = KEYS.filter((c) => c.path.length === path.length && dotted(c.path.slice(0, -1)) === dotted(i.path)).map((c) =>
            c.path.at(-1),
          );
          const help = hint ? `did you mean "${hint}"?` : `known keys here: ${siblings.join(", ")}`;
          return `unknown key "${path.join(".")}" ${where(path) || "in the configuration"} (${help})`;
        })
        .join("; ");
    }
    const key = i.path.join(".") || "(root)";
    const value = valueAt(input, i.path);
    const shown = value === undefined ? "" : SECRET.test(String(i.path.at(-1) ?? "")) ? "(value hidden)" : truncate(JSON.stringify(value));
    const from = [shown, where(i.path)].filter(Boolean).join(" ");
    return `${key}: ${i.message}${from ? ` (${from})` : ""}`;
  });
  return parts.join("; ");
}

function valueAt(v: unknown, path: readonly (string | number)[]): unknown {
  let cur = v;
  for (const seg of path) {
    if (cur === null || typeof cur !== "object") return undefined;
    cur = (cur as Record<string | number, unknown>)[seg];
  }
  return cur;
}

function truncate(s: string): string {
  return s.length > 80 ? `${s.slice(0, 77)}...` : s;
}
