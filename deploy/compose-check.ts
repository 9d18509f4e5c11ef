/**
 * A minimal structural check of a compose file against the Compose Specification (key sets of
 * the top level, services, build, healthcheck, deploy; references between sections; value
 * shapes). Vendored because no Docker engine (`docker compose config`) is available here: it
 * catches typos and dangling references, not everything the engine would.
 */

type Doc = Record<string, unknown>;

const TOP = new Set(["version", "name", "services", "networks", "volumes", "secrets", "configs", "include", "models"]);
const SERVICE = new Set(
  (
    "annotations attach build blkio_config cap_add cap_drop cgroup cgroup_parent command configs container_name cpu_count " +
    "cpu_percent cpu_shares cpu_quota cpu_period cpu_rt_period cpu_rt_runtime cpus cpuset credential_spec depends_on deploy " +
    "develop device_cgroup_rules devices dns dns_opt dns_search domainname entrypoint env_file environment expose extends " +
    "external_links extra_hosts gpus group_add healthcheck hostname image init ipc isolation labels label_file links logging " +
    "mac_address mem_limit mem_reservation mem_swappiness memswap_limit models network_mode networks oom_kill_disable " +
    "oom_score_adj pid pids_limit platform ports post_start pre_stop privileged profiles provider pull_policy read_only " +
    "restart runtime scale secrets security_opt shm_size stdin_open stop_grace_period stop_signal storage_opt sysctls tmpfs " +
    "tty ulimits use_api_socket user userns_mode uts volumes volumes_from working_dir"
  ).split(" "),
);
const BUILD = new Set(
  (
    "context dockerfile dockerfile_inline entitlements args ssh labels cache_from cache_to no_cache additional_contexts " +
    "network provenance sbom pull target shm_size extra_hosts isolation privileged secrets tags ulimits platforms"
  ).split(" "),
);
const HEALTHCHECK = new Set(["disable", "interval", "retries", "test", "timeout", "start_period", "start_interval"]);
const DEPLOY = new Set([
  "endpoint_mode",
  "mode",
  "replicas",
  "labels",
  "rollback_config",
  "update_config",
  "resources",
  "restart_policy",
  "placement",
]);
const VOLUME_LONG = new Set(["type", "source", "target", "read_only", "consistency", "bind", "volume", "tmpfs", "image"]);
const DEPENDS_CONDITIONS = new Set(["service_started", "service_healthy", "service_completed_successfully"]);
const DURATION = /^(\d+(\.\d+)?(us|ms|s|m|h))+$/;
const PORT = /^((\[?[0-9a-fA-F.:]+\]?):)?((\d+(-\d+)?):)?\d+(-\d+)?(\/(tcp|udp|sctp))?$/;

const isObj = (v: unknown): v is Doc => typeof v === "object" && v !== null && !Array.isArray(v);
/** `x-*` extension keys are allowed wherever the spec allows extensions. */
const unknownKeys = (o: Doc, allowed: Set<string>) => Object.keys(o).filter((k) => !allowed.has(k) && !k.startsWith("x-"));

export interface VolumeMount {
  service: string;
  source: string;
  target: string;
  /** A named volume (declared at the top level) rather than a host path. */
  named: boolean;
}

export interface ComposeReport {
  errors: string[];
  mounts: VolumeMount[];
}

/** Parses a short volume spec `src:dst[:mode]` (sources may contain `${...}` already interpolated). */
export function parseShortVolume(spec: string): { source: string; target: string } | undefined {
  const parts = spec.split(":");
  if (parts.length === 1) return { source: "", target: parts[0]! };
  if (parts.length > 3) return undefined;
  return { source: parts[0]!, target: parts[1]! };
}

export function checkCompose(doc: unknown): ComposeReport {
  const errors: string[] = [];
  const mounts: VolumeMount[] = [];
  const err = (where: string, msg: string) => errors.push(`${where}: ${msg}`);
  if (!isObj(doc)) return { errors: ["(root): not a mapping"], mounts };
  for (const k of unknownKeys(doc, TOP)) err(k, "unknown top-level key");
  const declared = (section: string) => new Set(isObj(doc[section]) ? Object.keys(doc[section] as Doc) : []);
  const volumes = declared("volumes");
  const secrets = declared("secrets");
  const networks = new Set([...declared("networks"), "default"]);
  if (!isObj(doc.services) || Object.keys(doc.services).length === 0) {
    err("services", "at least one service is required");
    return { errors, mounts };
  }
  const services = Object.keys(doc.services);

  for (const [name, raw] of Object.entries(doc.services)) {
    const at = `services.${name}`;
    if (!/^[a-zA-Z0-9._-]+$/.test(name)) err(at, "invalid service name");
    if (!isObj(raw)) {
      err(at, "not a mapping");
      continue;
    }
    const s = raw;
    for (const k of unknownKeys(s, SERVICE)) err(`${at}.${k}`, "unknown service key");
    if (s.image === undefined && s.build === undefined) err(at, "needs image or build");
    if (typeof s.build === "object") {
      if (!isObj(s.build)) err(`${at}.build`, "must be a string or a mapping");
      else for (const k of unknownKeys(s.build, BUILD)) err(`${at}.build.${k}`, "unknown build key");
    }
    if (s.restart !== undefined && !/^(no|always|unless-stopped|on-failure(:\d+)?)$/.test(String(s.restart))) {
      err(`${at}.restart`, `invalid value ${JSON.stringify(s.restart)}`);
    }
    if (s.stop_grace_period !== undefined && !DURATION.test(String(s.stop_grace_period))) err(`${at}.stop_grace_period`, "not a duration");
    if (s.healthcheck !== undefined) {
      const h = s.healthcheck;
      if (!isObj(h)) err(`${at}.healthcheck`, "must be a mapping");
      else {
        for (const k of unknownKeys(h, HEALTHCHECK)) err(`${at}.healthcheck.${k}`, "unknown healthcheck key");
        for (const k of ["interval", "timeout", "start_period", "start_interval"]) {
          if (h[k] !== undefined && !DURATION.test(String(h[k]))) err(`${at}.healthcheck.${k}`, "not a duration");
        }
        const t = h.test;
        const okTest = typeof t === "string" || (Array.isArray(t) && ["CMD", "CMD-SHELL", "NONE"].includes(String(t[0])));
        if (h.disable !== true && !okTest) err(`${at}.healthcheck.test`, 'must be a string or ["CMD"|"CMD-SHELL"|"NONE", ...]');
      }
    }
    if (s.deploy !== undefined) {
      if (!isObj(s.deploy)) err(`${at}.deploy`, "must be a mapping");
      else {
        for (const k of unknownKeys(s.deploy, DEPLOY)) err(`${at}.deploy.${k}`, "unknown deploy key");
        if (s.deploy.replicas !== undefined && !Number.isInteger(s.deploy.replicas)) err(`${at}.deploy.replicas`, "not an integer");
      }
    }
    // depends_on: a list of names or a mapping name → {condition, restart, required}.
    const deps = s.depends_on;
    const depNames = Array.isArray(deps) ? deps.map(String) : isObj(deps) ? Object.keys(deps) : [];
    if (deps !== undefined && !Array.isArray(deps) && !isObj(deps)) err(`${at}.depends_on`, "must be a list or a mapping");
    for (const d of depNames) {
      if (!services.includes(d)) err(`${at}.depends_on`, `unknown service ${d}`);
      if (d === name) err(`${at}.depends_on`, "depends on itself");
    }
    if (isObj(deps)) {
      for (const [d, v] of Object.entries(deps)) {
        if (isObj(v) && v.condition !== undefined && !DEPENDS_CONDITIONS.has(String(v.condition)))
          err(`${at}.depends_on.${d}.condition`, `invalid ${String(v.condition)}`);
      }
    }
    for (const p of Array.isArray(s.ports) ? s.ports : s.ports === undefined ? [] : [null]) {
      if (typeof p === "number") continue;
      if (typeof p === "string" && PORT.test(p)) continue;
      if (isObj(p) && p.target !== undefined) continue;
      err(`${at}.ports`, `invalid port ${JSON.stringify(p)}`);
    }
    const env = s.environment;
    if (env !== undefined && !Array.isArray(env) && !isObj(env)) err(`${at}.environment`, "must be a list or a mapping");
    if (isObj(env)) {
      for (const [k, v] of Object.entries(env)) {
        if (v !== null && typeof v === "object") err(`${at}.environment.${k}`, "must be a scalar");
      }
    }
    for (const ref of Array.isArray(s.secrets) ? s.secrets : []) {
      const n = isObj(ref) ? String(ref.source) : String(ref);
      if (!secrets.has(n)) err(`${at}.secrets`, `undeclared secret ${n}`);
    }
    const nets = Array.isArray(s.networks) ? s.networks.map(String) : isObj(s.networks) ? Object.keys(s.networks) : [];
    for (const n of nets) if (!networks.has(n)) err(`${at}.networks`, `undeclared network ${n}`);
    for (const v of Array.isArray(s.volumes) ? s.volumes : s.volumes === undefined ? [] : [null]) {
      let m: { source: string; target: string } | undefined;
      if (typeof v === "string") m = parseShortVolume(v);
      else if (isObj(v)) {
        for (const k of unknownKeys(v, VOLUME_LONG)) err(`${at}.volumes`, `unknown volume key ${k}`);
        m = typeof v.target === "string" ? { source: String(v.source ?? ""), target: v.target } : undefined;
      }
      if (!m || !m.target.startsWith("/")) {
        err(`${at}.volumes`, `invalid volume ${JSON.stringify(v)}`);
        continue;
      }
      const named = m.source !== "" && !/^[./~]/.test(m.source);
      if (named && !volumes.has(m.source)) err(`${at}.volumes`, `undeclared named volume ${m.source}`);
      mounts.push({ service: name, source: m.source, target: m.target, named });
    }
  }
  for (const [n, s] of Object.entries(isObj(doc.secrets) ? doc.secrets : {})) {
    if (!isObj(s) || [s.file, s.environment, s.external].every((x) => x === undefined))
      err(`secrets.${n}`, "needs file, environment or external");
  }
  return { errors, mounts };
}

/**
 * Compose variable interpolation: `${VAR}`, `${VAR:-default}`, `${VAR-default}`, `${VAR:?msg}`,
 * `$VAR` and `$$`. Applied to every string of the parsed document, as the engine does.
 */
export function interpolate(value: unknown, env: Record<string, string | undefined>, errors: string[] = []): unknown {
  if (typeof value === "string") {
    return value.replace(
      /\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?)([-?])([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)/g,
      (m, name?: string, colon?: string, op?: string, arg?: string, bare?: string) => {
        if (m === "$$") return "$";
        const key = (name ?? bare)!;
        const v = env[key];
        const unset = v === undefined || (colon === ":" && v === "");
        if (op === "-") return unset ? (arg ?? "") : v!;
        if (op === "?" && unset) errors.push(`required variable ${key}: ${arg ?? "not set"}`);
        return v ?? "";
      },
    );
  }
  if (Array.isArray(value)) return value.map((v) => interpolate(v, env, errors));
  if (isObj(value)) return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, interpolate(v, env, errors)]));
  return value;
}
