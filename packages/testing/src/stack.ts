import { spawn, execFileSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync, openSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { randomBytes } from "node:crypto";
import YAML from "yaml";
import { freePort } from "./ports.js";

const ROOT = resolve(import.meta.dirname, "../../..");

/** A whole CE (JEM + gateways as separate processes) on a temp state dir, like `./ce start`. */
export interface Stack {
  url: string;
  /** Service endpoint URLs of all gateways. */
  urls: string[];
  state: string;
  config: string;
  pki: string;
  adminToken: string;
  /** Environment for the ARC client / arcproxy with this stack's PKI and a private HOME. */
  arcEnv: NodeJS.ProcessEnv;
  logs(): string;
  /** CE processes that have exited on their own (a crash, unless the test stopped them). */
  exited(): string[];
  /** Gateway `i` (0-based): its pid, a signal to it, a fresh start with the same configuration (crash tests). */
  gateway(i: number): { pid: number | undefined; kill(signal: NodeJS.Signals): Promise<void>; restart(): void };
  /** The Redis key prefix of this CE. */
  prefix: string;
  /** SIGKILLs the JEM (not counted by `exited`) and starts a new one; resolves once it is spawned. */
  restartJem(opts?: { kill?: boolean }): Promise<void>;
  /** Whether the current JEM process is running. */
  jemAlive(): boolean;
  /** The JEM's pid (signals in tests: SIGSTOP/SIGCONT), undefined with `jem: false`. */
  readonly jemPid: number | undefined;
  stop(): Promise<void>;
}

export interface StackOptions {
  redisUrl: string;
  /**
   * The test Redis' CE users (`inject("redisUsers")`): the stack then logs in as `gateway` and
   * `jem` with password files, as in production. Without them it uses the URL's credentials.
   */
  redisUsers?: Record<"gateway" | "jem", { username: string; password: string }>;
  backend?: "fork" | "slurm" | "sge";
  gateways?: number;
  /** Deep-merged into the generated ce.yaml. */
  config?: Record<string, unknown>;
  env?: NodeJS.ProcessEnv;
  /** false: gateways only, no JEM (benches that measure the gateway's acknowledgement alone). */
  jem?: boolean;
  /** Runs after the state directory (PKI, secrets, ce.yaml) exists and before any process starts. */
  prepare?: (state: string) => void;
}

function merge(a: Record<string, unknown>, b: Record<string, unknown>): Record<string, unknown> {
  const out = { ...a };
  for (const [k, v] of Object.entries(b)) {
    const p = out[k];
    out[k] =
      v && typeof v === "object" && !Array.isArray(v) && p && typeof p === "object" && !Array.isArray(p)
        ? merge(p as Record<string, unknown>, v as Record<string, unknown>)
        : v;
  }
  return out;
}

export async function startStack(o: StackOptions): Promise<Stack> {
  const state = mkdtempSync(join(tmpdir(), "ce-stack-"));
  execFileSync("node", ["--import", "tsx", "scripts/dev/setup.ts", state], { cwd: ROOT, stdio: "ignore" });
  if (o.redisUsers) {
    for (const role of ["gateway", "jem"] as const) {
      writeFileSync(join(state, "secrets", `redis-${role}.password`), o.redisUsers[role].password, { mode: 0o600 });
    }
  }
  o.prepare?.(state);
  const cfgPath = join(state, "ce.yaml");
  const n = o.gateways ?? 1;
  const ports = await Promise.all(Array.from({ length: n * 2 + 1 }, () => freePort()));
  const prefix = `{s${randomBytes(4).toString("hex")}}`;
  const base = YAML.parse(readFileSync(cfgPath, "utf8")) as Record<string, unknown>;
  const procs: ChildProcess[] = [];
  const logFile = join(state, "logs", "stack.log");
  const out = openSync(logFile, "a");
  const env = { ...process.env, ...o.env, CE__LOGGING__LEVEL: process.env.CE_TEST_LOG_LEVEL ?? "info" };

  const configFor = (i: number) => {
    const cfg = merge(
      merge(base, {
        endpoint: { url: `https://localhost:${ports[i]}/arex` },
        redis: o.redisUsers
          ? { url: o.redisUrl.replace(/\/\/[^@/]*@/, "//"), prefix, embedded: false }
          : { url: o.redisUrl, prefix, embedded: false },
        gateway: { port: ports[i] },
        lrms: { backend: o.backend ?? "fork", pollIntervalMs: 500 },
        jem: { scanIntervalMs: 1000 },
        admin: { port: ports[n + i], jemPort: ports[2 * n] },
      }),
      o.config ?? {},
    );
    // Without the CE users, the URL's own credentials are the only ones sent.
    if (!o.redisUsers) delete (cfg.redis as { users?: unknown }).users;
    const p = join(state, `ce-${i}.yaml`);
    writeFileSync(p, YAML.stringify(cfg));
    return p;
  };
  const configs = Array.from({ length: n }, (_, i) => configFor(i));
  const spawnJem = () =>
    spawn("node", ["--import", "tsx", "apps/jem/src/main.ts"], {
      cwd: ROOT,
      env: { ...env, CE_CONFIG: configs[0] },
      stdio: ["ignore", out, out],
    });
  let jem: ChildProcess | undefined;
  const killed = new Set<ChildProcess>();
  if (o.jem !== false) procs.push((jem = spawnJem()));
  const gateways: ChildProcess[] = [];
  const spawnGateway = (i: number) => {
    const p = spawn("node", ["--import", "tsx", "apps/gateway/src/main.ts"], {
      cwd: ROOT,
      env: { ...env, CE_CONFIG: configs[i] },
      stdio: ["ignore", out, out],
    });
    const at = procs.indexOf(gateways[i]!);
    if (at >= 0) procs.splice(at, 1);
    gateways[i] = p;
    procs.push(p);
  };
  configs.forEach((_, i) => spawnGateway(i));
  const urls = ports.slice(0, n).map((p) => `https://localhost:${p}/arex`);
  const pki = join(state, "pki");
  const stop = async () => {
    await Promise.all(
      procs.map(
        (p) =>
          new Promise<void>((res) => {
            if (p.exitCode !== null || p.signalCode) return res();
            const t = setTimeout(() => p.kill("SIGKILL"), 5000);
            p.once("exit", () => (clearTimeout(t), res()));
            p.kill("SIGTERM");
          }),
      ),
    );
  };
  // Ready when every gateway answers the versions resource.
  const deadline = Date.now() + 60_000;
  for (const u of urls) {
    for (;;) {
      const dead = procs.find((p) => p.exitCode !== null);
      if (dead) {
        await stop();
        throw new Error(`a CE process exited during start:\n${readFileSync(logFile, "utf8").slice(-4000)}`);
      }
      try {
        execFileSync("curl", ["-sf", "-o", "/dev/null", "--cacert", `${pki}/ca/ca.pem`, `${u}/rest`], { stdio: "ignore" });
        break;
      } catch {
        if (Date.now() > deadline) {
          await stop();
          throw new Error(`CE did not become ready:\n${readFileSync(logFile, "utf8").slice(-4000)}`);
        }
        await new Promise((r) => setTimeout(r, 200));
      }
    }
  }
  const home = join(state, "home");
  execFileSync("mkdir", ["-p", join(home, ".arc")]);
  return {
    url: urls[0]!,
    urls,
    state,
    config: configs[0]!,
    pki,
    adminToken: readFileSync(join(state, "secrets", "admin.token"), "utf8").trim(),
    arcEnv: {
      ...process.env,
      HOME: home,
      X509_USER_CERT: `${pki}/user/cert.pem`,
      X509_USER_KEY: `${pki}/user/key.pem`,
      X509_USER_PROXY: `${pki}/user/proxy.pem`,
      X509_CERT_DIR: `${pki}/ca`,
    },
    logs: () => readFileSync(logFile, "utf8"),
    prefix,
    get jemPid() {
      return jem?.pid;
    },
    gateway: (i) => ({
      pid: gateways[i]!.pid,
      kill: (signal) =>
        new Promise<void>((res) => {
          const g = gateways[i]!;
          if (g.exitCode !== null || g.signalCode) return res();
          g.once("exit", () => res());
          g.kill(signal);
        }),
      restart: () => spawnGateway(i),
    }),
    exited: () =>
      procs
        .filter((p) => !killed.has(p) && (p.exitCode !== null || p.signalCode !== null))
        .map((p) => `${p.spawnargs.at(-1)} (pid ${p.pid}): ${p.exitCode ?? p.signalCode}`),
    jemAlive: () => jem !== undefined && jem.exitCode === null && jem.signalCode === null,
    async restartJem(opts = {}) {
      const old = jem;
      if (old && old.exitCode === null && old.signalCode === null && opts.kill !== false) {
        killed.add(old);
        const gone = new Promise<void>((r) => old.once("exit", () => r()));
        old.kill("SIGKILL");
        await gone;
      }
      procs.push((jem = spawnJem()));
    },
    async stop() {
      await stop();
      if (!process.env.CE_TEST_KEEP) rmSync(state, { recursive: true, force: true });
    },
  };
}
