// `./ce start`'s own Redis: reused when the CE's Redis already answers on the configured port (our
// jem password works, no anonymous access), else started as redis-server with the ACL file written
// from the configuration. Anything else on that port stops the start with one line.
import { spawnSync } from "node:child_process";
import { chmodSync, existsSync, readFileSync, writeFileSync } from "node:fs";
import { createConnection } from "node:net";
import { join } from "node:path";
import { redisAclFile, redisAuth, REDIS_ROLES, type CompiledConfig } from "@ce/config";

export class StartError extends Error {
  readonly code = "START_FAILED";
  constructor(message: string) {
    super(message);
    this.name = "StartError";
  }
}

const resp = (args: string[]) => `*${args.length}\r\n${args.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join("")}`;

/** The first reply lines to `commands` (RESP), or the connection error; never waits more than `ms`. */
function ask(port: number, commands: string[][], ms = 1_500): Promise<string> {
  return new Promise((resolve) => {
    let got = "";
    const s = createConnection({ host: "127.0.0.1", port });
    const done = (v: string) => {
      clearTimeout(timer);
      s.destroy();
      resolve(v);
    };
    const timer = setTimeout(() => done(got || "TIMEOUT"), ms);
    s.on("connect", () => s.write(commands.map(resp).join("")));
    s.on("data", (d) => {
      got += String(d);
      if (got.split("\r\n").length > commands.length) done(got);
    });
    s.on("error", (e: NodeJS.ErrnoException) => done(e.code ?? "ERROR"));
    s.on("close", () => done(got || "CLOSED"));
  });
}

export interface EmbeddedRedis {
  port: number;
  started: boolean;
  stop(): Promise<void>;
}

export async function embeddedRedis(c: CompiledConfig, say: (line: string) => void): Promise<EmbeddedRedis> {
  const state = c.paths.stateDir;
  const users = REDIS_ROLES.map((role) => {
    const auth = redisAuth(c.redis, role);
    if (!auth.username || !auth.password)
      throw new StartError(`redis.users.${role}.passwordFile is not set (needed by the embedded Redis)`);
    return { username: auth.username, password: auth.password };
  });
  const jem = users[REDIS_ROLES.indexOf("jem")]!;
  const port = Number(new URL(c.redis.url).port || 6379);
  const ours = async () => (await ask(port, [["AUTH", jem.username, jem.password], ["PING"]])).includes("+PONG");
  const anon = await ask(port, [["PING"]]);
  const noop = async () => {};
  if (anon !== "ECONNREFUSED") {
    if (/NOAUTH|WRONGPASS/.test(anon) && (await ours())) {
      say(`ce: reusing the CE's Redis already answering on 127.0.0.1:${port} (ACL users, no anonymous access)`);
      return { port, started: false, stop: noop };
    }
    const what = anon.startsWith("+PONG")
      ? "a Redis without the CE's ACL users (it accepts anyone without a password)"
      : /^[-+]/.test(anon)
        ? "a Redis without the CE's ACL users"
        : "another program";
    throw new StartError(
      `127.0.0.1:${port} (redis.url) is in use by ${what}; stop it, or run the CE's own Redis on another port: CE__REDIS__URL=redis://127.0.0.1:${port + 1} ./ce start`,
    );
  }
  const acl = join(state, "redis", "users.acl");
  writeFileSync(acl, redisAclFile(`${c.redis.prefix}*`, users), { mode: 0o600 });
  chmodSync(acl, 0o600);
  const pidFile = join(state, "redis", "redis.pid");
  const logFile = join(state, "logs", "redis.log");
  const r = spawnSync(
    "redis-server",
    [
      "--bind",
      "127.0.0.1",
      "--port",
      String(port),
      "--protected-mode",
      "yes",
      "--aclfile",
      acl,
      "--dir",
      join(state, "redis"),
      "--appendonly",
      "yes",
      "--hash-max-listpack-value",
      "512",
      "--hash-max-listpack-entries",
      "128",
      "--daemonize",
      "yes",
      "--pidfile",
      pidFile,
      "--logfile",
      logFile,
    ],
    { encoding: "utf8" },
  );
  if (r.status !== 0)
    throw new StartError(
      `redis-server did not start (${r.error?.message ?? `exit code ${r.status}`}): ${(r.stderr || r.stdout).trim().split("\n").at(-1) ?? ""}`,
    );
  const pid = () => (existsSync(pidFile) ? Number(readFileSync(pidFile, "utf8").trim()) : undefined);
  const alive = (p: number | undefined) => {
    if (!p) return false;
    try {
      process.kill(p, 0);
      return true;
    } catch {
      return false;
    }
  };
  const stop = async () => {
    const p = pid();
    if (!alive(p)) return;
    process.kill(p!, "SIGTERM");
    for (let i = 0; i < 100 && alive(p); i++) await new Promise((res) => setTimeout(res, 100));
  };
  for (let i = 0; i < 50; i++) {
    if (await ours()) {
      say(`ce: started redis-server on 127.0.0.1:${port} (data in ${state}/redis; ACL users gateway, jem; passwords in ${state}/secrets/)`);
      return { port, started: true, stop };
    }
    await new Promise((res) => setTimeout(res, 100));
  }
  await stop();
  const tail = existsSync(logFile) ? readFileSync(logFile, "utf8").trim().split("\n").slice(-3).join(" | ") : "";
  throw new StartError(`redis-server on 127.0.0.1:${port} did not answer within 5 s; ${logFile}: ${tail}`);
}
