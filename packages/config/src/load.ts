import { readFileSync } from "node:fs";
import { isAbsolute, resolve } from "node:path";
import YAML from "yaml";
import { ZodError } from "zod";
import { configSchema, type Config, type ConfigInput } from "./schema.js";

/** Configuration after defaults are applied and every derived value is resolved (absolute paths, default queue). */
export interface CompiledConfig extends Config {
  paths: Config["paths"] & { stateDir: string; controlDir: string; sessionRoot: string; rteDir: string };
  auth: Config["auth"] & { caDir: string; voms: Config["auth"]["voms"] & { dir: string; hostNames: string[] } };
  jobs: Config["jobs"] & { defaultQueue: string };
  lrms: Config["lrms"] & { scriptsDir: string; callsPerSecond: number };
  /** `scheme://host[:port]` of endpoint.url, the default token audience. */
  origin: string;
  /** Path part of endpoint.url (e.g. `/arex`), where the REST interface is mounted. */
  mountPath: string;
}

export class ConfigError extends Error {
  readonly code = "CONFIG_INVALID";
  constructor(message: string) {
    super(message);
    this.name = "ConfigError";
    Object.setPrototypeOf(this, new.target.prototype);
  }
}

/**
 * Environment overrides: `CE__GATEWAY__PORT=9443` sets `gateway.port`. Values are parsed as JSON
 * when they look like JSON (numbers, booleans, arrays), else taken as strings.
 */
export function envOverrides(env: NodeJS.ProcessEnv = process.env): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, raw] of Object.entries(env)) {
    if (!k.startsWith("CE__") || raw === undefined) continue;
    const path = k.slice(4).split("__").map(camel);
    let value: unknown = raw;
    if (/^(true|false|-?\d+(\.\d+)?|\[.*\]|\{.*\})$/s.test(raw.trim())) {
      try {
        value = JSON.parse(raw);
      } catch {
        value = raw;
      }
    }
    let node = out;
    for (const seg of path.slice(0, -1)) node = (node[seg] ??= {}) as Record<string, unknown>;
    node[path[path.length - 1]!] = value;
  }
  return out;
}

function camel(s: string): string {
  return s.toLowerCase().replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());
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
  const text = readFileSync(file, "utf8");
  try {
    return (file.endsWith(".json") ? JSON.parse(text) : YAML.parse(text)) ?? {};
  } catch (e) {
    throw new ConfigError(`cannot parse ${file}: ${(e as Error).message}`);
  }
}

/** Validates and compiles. Relative paths are resolved against `baseDir` (the config file's directory or cwd). */
export function compileConfig(input: ConfigInput, baseDir = process.cwd()): CompiledConfig {
  let cfg: Config;
  try {
    cfg = configSchema.parse(input);
  } catch (e) {
    if (e instanceof ZodError) {
      const lines = e.issues.map((i) => `  ${i.path.join(".") || "(root)"}: ${i.message}`);
      throw new ConfigError(`invalid configuration:\n${lines.join("\n")}`);
    }
    throw e;
  }
  const abs = (p: string) => (isAbsolute(p) ? p : resolve(baseDir, p));
  const stateDir = abs(cfg.paths.stateDir);
  const url = new URL(cfg.endpoint.url);
  const queues = cfg.jobs.queues;
  if (queues.length === 0) throw new ConfigError("invalid configuration:\n  jobs.queues: at least one queue is required");
  const defaultQueue = cfg.jobs.defaultQueue ?? queues[0]!.name;
  if (!queues.some((q) => q.name === defaultQueue)) {
    throw new ConfigError(`invalid configuration:\n  jobs.defaultQueue: "${defaultQueue}" is not one of jobs.queues`);
  }
  return {
    ...cfg,
    paths: {
      ...cfg.paths,
      stateDir,
      controlDir: abs(cfg.paths.controlDir ?? `${stateDir}/control`),
      sessionRoot: abs(cfg.paths.sessionRoot ?? `${stateDir}/session`),
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
      scriptsDir: abs(cfg.lrms.scriptsDir ?? resolve(import.meta.dirname, "../../../apps/jem/backends")),
      callsPerSecond: cfg.lrms.callsPerSecond ?? DEFAULT_LRMS_RATE[cfg.lrms.backend] ?? 20,
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
  const merged = deepMerge(deepMerge(fromFile as Record<string, unknown>, envOverrides(env)), (opts.overrides ?? {}) as Record<string, unknown>);
  return compileConfig(merged as ConfigInput, file ? resolve(file, "..") : process.cwd());
}
