// `./ce start` (scripts/start.sh): the embedded development CE and its supervisor. One start per
// state directory (lock: <state>/ce.pid); first-start setup; its own Redis; the JEM and a gateway,
// each waited for by its own readiness signal with a time limit; a banner with what actually
// listens; then each component brought back with a reason line when it exits. Ctrl-C (or SIGTERM)
// stops what it started and exits 0.
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { join, resolve } from "node:path";
import { ConfigError, loadConfig, type CompiledConfig } from "@ce/config";
import { Component, describeExit, NotReady, readable, reasonLine } from "./component.js";
import { embeddedRedis, StartError, type EmbeddedRedis } from "./embedded-redis.js";
import { banner } from "./banner.js";

const ROOT = resolve(import.meta.dirname, "../..");
const STATE = resolve(process.env.CE_STATE_DIR ?? join(ROOT, ".ce"));
/** How long a component may take to report ready (its first start and every restart). */
const START_TIMEOUT_MS = Number(process.env.CE_START_TIMEOUT ?? 90) * 1000;
/** Restart delays double from the first up to the last; a run longer than BACKOFF_RESET_MS starts over. */
const BACKOFF_MS = [1_000, 60_000];
const BACKOFF_RESET_MS = 60_000;

const say = (line: string) => process.stdout.write(`${line}\n`);
const complain = (line: string) => process.stderr.write(`${line}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let stopping = false;
let booting: Promise<void> = Promise.resolve();
let redis: EmbeddedRedis | undefined;
const components: Component[] = [];
const LOCK = join(STATE, "ce.pid");
let locked = false;

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** One `./ce start` per state directory: the lock holds the supervisor's pid; a dead holder's lock is taken over. */
function lock(): void {
  mkdirSync(join(STATE, "run"), { recursive: true });
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      writeFileSync(LOCK, `${process.pid}\n`, { flag: "wx" });
      locked = true;
      return;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e;
    }
    const pid = Number(readFileSync(LOCK, "utf8").trim());
    const cmd = existsSync(`/proc/${pid}/cmdline`) ? readFileSync(`/proc/${pid}/cmdline`, "utf8") : "";
    if (pid > 0 && pid !== process.pid && alive(pid) && (cmd === "" || cmd.includes("scripts/dev/run.ts"))) {
      const url = existsSync(join(STATE, "run", "url")) ? readFileSync(join(STATE, "run", "url"), "utf8").trim() : "";
      throw new StartError(
        `a CE is already running from ${STATE} (pid ${pid}${url ? `, ${url}` : ""}); stop it first (Ctrl-C in its terminal, or kill ${pid})`,
      );
    }
    rmSync(LOCK, { force: true });
  }
  throw new StartError(`cannot take the lock ${LOCK}`);
}

/** Refuses a port something else listens on, before anything starts (one line, no waiting). */
async function portFree(host: string, port: number, key: string, env: string): Promise<void> {
  const err = await new Promise<NodeJS.ErrnoException | undefined>((res) => {
    const s = createServer();
    s.once("error", (e) => res(e));
    s.listen({ host, port, exclusive: true }, () => s.close(() => res(undefined)));
  });
  if (err?.code === "EADDRINUSE")
    throw new StartError(
      `${host}:${port} (${key}) is already in use by another program; stop it or choose another port: ${env}=<port> ./ce start`,
    );
  if (err) throw new StartError(`cannot listen on ${host}:${port} (${key}): ${err.code ?? err.message}`);
}

/** The gateway runs from its build (the deployed form), rebuilt when a source is newer. */
function buildGateway(): void {
  const dist = join(ROOT, "apps/gateway/dist/main.js");
  const built = existsSync(dist) ? statSync(dist).mtimeMs : 0;
  const newer = (dir: string): boolean =>
    existsSync(dir) &&
    readdirSync(dir, { withFileTypes: true, recursive: true }).some(
      (e) => e.isFile() && e.name.endsWith(".ts") && statSync(join(e.parentPath, e.name)).mtimeMs > built,
    );
  const sources = [join(ROOT, "apps/gateway/src"), ...readdirSync(join(ROOT, "packages")).map((p) => join(ROOT, "packages", p, "src"))];
  if (built && !sources.some(newer)) return;
  const r = spawnSync(process.execPath, ["--import", "tsx", "scripts/build-app.ts", "gateway"], { cwd: ROOT, encoding: "utf8" });
  if (r.status !== 0)
    throw new StartError(`building the gateway failed: ${(r.stderr || r.stdout).trim().split("\n").slice(-3).join(" | ")}`);
}

/** Keeps the previous run's log as `<name>.log.1`; this run's starts empty. */
function rotate(file: string): void {
  if (existsSync(file) && statSync(file).size > 0) renameSync(file, `${file}.1`);
}

function loadConfigOrFail(): CompiledConfig {
  try {
    return loadConfig();
  } catch (e) {
    if (e instanceof ConfigError) throw new StartError(e.message);
    throw e;
  }
}

/** Everything up to the banner; resolves early (and quietly) when a stop was asked for meanwhile. */
async function boot(): Promise<void> {
  lock();
  const setup = spawnSync(process.execPath, ["--import", "tsx", "scripts/dev/setup.ts", STATE], { cwd: ROOT, encoding: "utf8" });
  if (setup.status !== 0)
    throw new StartError(
      `first-start setup failed: ${setup.stderr.trim().split("\n").filter(Boolean).at(-1) ?? `exit code ${setup.status}`}`,
    );
  process.env.CE_CONFIG ??= join(STATE, "ce.yaml");
  let config = loadConfigOrFail();
  // A port given alone moves the development endpoint with it (the URL clients and the banner use).
  const endpoint = new URL(config.endpoint.url);
  if (process.env.CE__GATEWAY__PORT && !process.env.CE__ENDPOINT__URL && ["localhost", "127.0.0.1", "[::1]"].includes(endpoint.hostname)) {
    endpoint.port = String(config.gateway.port);
    process.env.CE__ENDPOINT__URL = endpoint.href.replace(/\/$/, "");
    config = loadConfigOrFail();
  }
  await portFree(config.gateway.host, config.gateway.port, "gateway.port", "CE__GATEWAY__PORT");
  if (config.admin.enabled) {
    await portFree(config.admin.host, config.admin.port, "admin.port", "CE__ADMIN__PORT");
    await portFree(config.admin.host, config.admin.jemPort, "admin.jemPort", "CE__ADMIN__JEM_PORT");
  }
  const mapped = config.mapping
    ? [...new Set(config.mapping.rules.map((r) => r.user ?? (r.pool ? "pool" : "gridmap")))].join(",")
    : undefined;
  const me = spawnSync("id", ["-un"], { encoding: "utf8" }).stdout.trim();
  say(
    mapped
      ? `ce: mapping is on: jobs run as the mapped local account (${mapped}), never as the CE (${me})`
      : `ce: mapping is off: jobs run as ${me}, the CE's own account (developer-only mode; run as root or configure \`mapping\` for isolation)`,
  );

  const logs = join(STATE, "logs");
  mkdirSync(logs, { recursive: true });
  for (const f of ["jem.log", "gateway.log", "redis.log"]) rotate(join(logs, f));
  if (config.redis.embedded) redis = await embeddedRedis(config, say);
  if (stopping) return;

  buildGateway();
  const env = { ...process.env };
  const run = join(STATE, "run");
  const jem = new Component(
    "jem",
    "the JEM",
    ["--import", "tsx", "apps/jem/src/main.ts"],
    env,
    join(logs, "jem.log"),
    join(run, "jem.ready"),
    join(run, "jem.pid"),
  );
  const gateway = new Component(
    "gateway",
    "the gateway",
    ["--max-old-space-size=256", "apps/gateway/dist/main.js"],
    env,
    join(logs, "gateway.log"),
    join(run, "gateway.ready"),
    join(run, "gateway.pid"),
  );
  components.push(jem, gateway);
  for (const c of components) c.start();
  for (const c of components) {
    try {
      await c.waitReady(START_TIMEOUT_MS, () => stopping);
    } catch (e) {
      if (stopping) return;
      const lines = c.logLines(15);
      const last = reasonLine(lines);
      complain(`ce: ${c.title} did not start: ${(e as Error).message}${last ? `; last log line: ${readable(last)}` : ""}`);
      if (lines.length > 1) complain(`ce: the last lines of ${c.log} from this run:\n${lines.map((l) => `  ${readable(l)}`).join("\n")}`);
      throw new StartError("");
    }
  }
  writeFileSync(join(run, "url"), `${config.endpoint.url}\n`);
  say(banner({ config, state: STATE, gateway: gateway.ready!, jem: jem.ready! }));
}

/** Brings `c` back whenever it exits, with one line saying why, waiting longer after each quick failure. */
async function supervise(c: Component): Promise<void> {
  let delay = BACKOFF_MS[0]!;
  for (;;) {
    const exit = await c.exited;
    if (stopping) return;
    const ran = Date.now() - c.startedAt;
    if (c.readyAt >= c.startedAt && Date.now() - c.readyAt > BACKOFF_RESET_MS) delay = BACKOFF_MS[0]!;
    const last = reasonLine(c.logLines(15));
    say(
      `ce: ${c.title} (pid ${c.child?.pid}) exited with ${describeExit(exit)} after ${Math.round(ran / 1000)} s; last log line: ${last ? readable(last) : "(none)"}; restarting in ${delay / 1000} s`,
    );
    await sleep(delay);
    if (stopping) return;
    delay = Math.min(delay * 2, BACKOFF_MS[1]!);
    c.start();
    try {
      await c.waitReady(START_TIMEOUT_MS, () => stopping);
      say(`ce: ${c.title} is back (pid ${c.child?.pid})`);
    } catch (e) {
      if (stopping) return;
      if (!(e instanceof NotReady) || !e.exit) {
        say(`ce: ${c.title} (pid ${c.child?.pid}) ${(e as Error).message}; stopping it`);
        await c.stop(5_000);
      }
    }
  }
}

async function shutdown(code: number): Promise<never> {
  stopping = true;
  // The start-up phase notices `stopping` within a few seconds; what it started is then known here.
  await booting.catch(() => undefined);
  // The gateway first (no new requests), then the JEM, then the Redis both use.
  for (const c of [...components].reverse()) await c.stop();
  await redis?.stop();
  if (locked) rmSync(LOCK, { force: true });
  for (const f of ["url", "jem.ready", "gateway.ready"]) rmSync(join(STATE, "run", f), { force: true });
  process.exit(code);
}

// Ctrl-C under `pnpm start` arrives twice at once (from the terminal and forwarded by pnpm): one
// stop. Another signal later means "stop now".
let firstSignal = 0;
for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
  process.on(sig, () => {
    if (firstSignal > 0) {
      if (Date.now() - firstSignal < 1_000) return;
      for (const c of components) if (c.running) c.child!.kill("SIGKILL");
      process.exit(1);
    }
    firstSignal = Date.now();
    say(`\nce: stopping (${sig})`);
    void shutdown(0);
  });
}

booting = boot();
booting.then(
  () => (stopping ? undefined : Promise.all(components.map(supervise))),
  (e: unknown) => {
    if (!(e instanceof StartError)) complain(`ce: cannot start: ${(e as Error).message}`);
    else if (e.message) complain(`ce: cannot start: ${e.message}`);
    if (!stopping) void shutdown(1);
  },
);
