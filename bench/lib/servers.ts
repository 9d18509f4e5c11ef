/**
 * Servers under benchmark, started the way their operators start them:
 * - our CE: scripts/start.sh (what `./ce start` runs: embedded Redis, JEM with the fork back end,
 *   the built gateway) on its own state directory and ports, with shipped defaults;
 * - the reference A-REX: arex-start.sh of the reference tooling in AREX_REF_DIR (bench/README.md; arched job manager + WS front end).
 * Each gives its endpoint and the pids whose CPU the benchmark charges to it.
 */
import { spawn, execFileSync, type ChildProcess } from "node:child_process";
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { join, resolve } from "node:path";
import { freePort } from "@ce/testing";
import { sleep, type Procs } from "./proc.js";

export const ROOT = resolve(import.meta.dirname, "../..");
export const AREX_REF = process.env.AREX_REF_DIR ?? resolve(ROOT, "../shared/tools/arex-ref");

export interface Server {
  name: string;
  base: string;
  /** Environment the server was started with (placement and overrides). */
  env: Record<string, string>;
  procs: Procs;
  /** Config overrides beyond placement (ports, paths, PKI), shown next to the figures. */
  overrides: string[];
  stop(): Promise<void>;
}

function exited(child: ChildProcess): Promise<void> {
  return child.exitCode !== null || child.signalCode !== null ? Promise.resolve() : new Promise((r) => child.once("exit", () => r()));
}

/**
 * The CE's `./ce start` with its state in `state`, on free ports. `refPki`: the directory of the
 * reference's setup-creds.sh, whose host certificate and CA directory the CE then uses; without
 * it the CE uses its own development PKI (`<state>/pki`, user proxy `<state>/pki/user/proxy.pem`).
 */
export async function startCe(
  state: string,
  o: { refPki?: string; extraEnv?: Record<string, string>; log?: (s: string) => void; startTimeoutS?: number } = {},
): Promise<Server> {
  const [port, redisPort, adminPort, jemPort] = [await freePort(), await freePort(), await freePort(), await freePort()];
  const base = `https://localhost:${port}/arex`;
  const dir = o.refPki;
  // Placement only (ports, where the state and the PKI are): everything else is the shipped default.
  const placement: Record<string, string> = {
    CE_STATE_DIR: state,
    CE__ENDPOINT__URL: base,
    CE__GATEWAY__PORT: String(port),
    CE__REDIS__URL: `redis://127.0.0.1:${redisPort}`,
    CE__ADMIN__PORT: String(adminPort),
    CE__ADMIN__JEM_PORT: String(jemPort),
    ...(dir
      ? {
          CE__GATEWAY__TLS__CERT_FILE: join(dir, "host/hostcert.pem"),
          CE__GATEWAY__TLS__KEY_FILE: join(dir, "host/hostkey.pem"),
          CE__AUTH__CA_DIR: join(dir, "certificates"),
        }
      : {}),
  };
  const extra = o.extraEnv ?? {};
  const child = spawn("bash", ["scripts/start.sh"], {
    cwd: ROOT,
    env: { ...process.env, ...placement, ...extra },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  child.stdout!.on("data", (d: Buffer) => (out += d.toString()));
  child.stderr!.on("data", (d: Buffer) => (out += d.toString()));
  const t0 = Date.now();
  while (!out.includes("CE running")) {
    if (child.exitCode !== null) throw new Error(`./ce start exited ${child.exitCode}:\n${out}\n${tailLogs(join(state, "logs"))}`);
    const limitS = o.startTimeoutS ?? 180;
    if (Date.now() - t0 > limitS * 1000) {
      child.kill("SIGTERM"); // the supervisor stops what it started
      throw new Error(`./ce start did not come up in ${limitS} s:\n${out}`);
    }
    await sleep(200);
  }
  const kids = readdirSync("/proc")
    .filter((p) => /^\d+$/.test(p))
    .map(Number)
    .filter((p) => ppid(p) === child.pid);
  const byCmd = (s: string) => kids.filter((p) => cmdline(p).includes(s));
  const redisPid = Number(readFileSync(join(state, "redis/redis.pid"), "utf8").trim());
  const procs: Procs = { gateway: byCmd("apps/gateway/dist/main.js"), jem: byCmd("apps/jem/src/main.ts"), redis: [redisPid] };
  if (!procs.gateway!.length || !procs.jem!.length)
    throw new Error(`cannot find the CE's processes under ${child.pid}: ${kids.map((k) => `${k}:${cmdline(k)}`).join("; ")}`);
  o.log?.(`CE up at ${base} (gateway ${procs.gateway}, JEM ${procs.jem}, redis ${redisPid})`);
  return {
    name: "CE",
    base,
    env: { ...placement, ...extra },
    procs,
    overrides: Object.entries(extra).map(([k, v]) => `${k}=${v}`),
    stop: async () => {
      child.kill("SIGTERM");
      await Promise.race([exited(child), sleep(20_000)]);
      // start.sh stops what it started; make sure of it for the pids we know.
      for (const p of Object.values(procs).flat()) {
        try {
          process.kill(p, "SIGKILL");
        } catch {
          /* gone */
        }
      }
    },
  };
}

/** The reference A-REX on `dir` (credentials from setup-creds.sh), as its README starts it. */
export async function startArex(dir: string, o: { log?: (s: string) => void } = {}): Promise<Server> {
  const port = await freePort();
  const env = { ...process.env, AREX_LOGLEVEL: process.env.AREX_LOGLEVEL ?? "3" };
  const url = execFileSync("bash", [join(AREX_REF, "arex-start.sh"), dir, String(port)], {
    env,
    encoding: "utf8",
    stdio: ["ignore", "pipe", "inherit"],
  })
    .trim()
    .split("\n")
    .pop()!;
  const pids = ["arched-gm.pid", "arched-ws.pid"].map((f) => Number(readFileSync(join(dir, "arex/run", f), "utf8").trim()));
  o.log?.(`A-REX up at ${url} (arched ${pids.join(", ")})`);
  return {
    name: "A-REX",
    base: url,
    env: {},
    procs: { arched: pids },
    overrides: [
      `AREX_LOGLEVEL=${env.AREX_LOGLEVEL}`,
      `AREX_INFO_PERIOD=${process.env.AREX_INFO_PERIOD ?? 20}`,
      `AREX_WAKEUP=${process.env.AREX_WAKEUP ?? 10}`,
    ],
    stop: async () => {
      execFileSync("bash", [join(AREX_REF, "arex-stop.sh"), dir], { stdio: "inherit" });
    },
  };
}

function ppid(pid: number): number {
  try {
    return Number(readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ")[1]);
  } catch {
    return -1;
  }
}

function cmdline(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").replace(/\0/g, " ");
  } catch {
    return "";
  }
}

function tailLogs(dir: string): string {
  if (!existsSync(dir)) return "";
  return readdirSync(dir)
    .map((f) => `--- ${f}\n${readFileSync(join(dir, f), "utf8").split("\n").slice(-20).join("\n")}`)
    .join("\n");
}

export function versions(): Record<string, string> {
  const q = (cmd: string, args: string[]) => {
    try {
      return execFileSync(cmd, args, { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim();
    } catch {
      return "?";
    }
  };
  return {
    arex: q("dpkg-query", ["-W", "-f=${Version}", "nordugrid-arc-arex"]),
    ce: `${q("git", ["-C", ROOT, "rev-parse", "--short", "HEAD"])}${q("git", ["-C", ROOT, "status", "--porcelain", "--untracked-files=no"]) ? " (+ uncommitted changes)" : ""}`,
    node: process.version,
    redis:
      q("redis-server", ["--version"])
        .replace(/^Redis server /, "")
        .split(" ")[0] ?? "?",
  };
}
