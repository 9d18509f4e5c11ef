import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { appendFileSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { aclPasswordHash, redisAclFile } from "@ce/config";
import { freePort } from "./ports.js";

/**
 * A throwaway real redis-server on a free loopback port (the project's own, not a container),
 * with the production ACL: `default` off, users `gateway` and `jem` with the CE rules (keys under
 * `{...}` prefixes, since every suite uses its own hash-tag prefix). `url` logs in as `ce-test`:
 * the same rules plus KEYS, which the suites' fixture cleanup uses.
 */
export interface RedisHandle {
  /** `redis://ce-test:<password>@127.0.0.1:<port>` */
  url: string;
  port: number;
  /** The CE's ACL users and their passwords. */
  users: Record<"gateway" | "jem", { username: string; password: string }>;
  /** Logs in as `admin` (every command and key: CONFIG, BGSAVE ... for the outage tests). */
  adminUrl: string;
  /** SIGKILL, as a crash: what the AOF holds is all that survives. */
  kill(): Promise<void>;
  /** Starts the server again on the same port and directory (from its AOF when `aof` is on). */
  restart(): Promise<void>;
  /** Directory of the server's files (AOF, snapshots). */
  dir: string;
  stop(): Promise<void>;
}

/** Key pattern of the test server's CE users: every suite prefix is a `{...}` hash tag. */
export const TEST_KEY_PATTERN = "{*";

/**
 * `keyPattern`: the CE users' key/channel pattern (production: `{ce}*`). `aof`: append-only file
 * with fsync on every write, so a killed server restarts with every acknowledged write.
 */
export async function startRedis(opts: { keyPattern?: string; aof?: boolean } = {}): Promise<RedisHandle> {
  const dir = mkdtempSync(join(tmpdir(), "ce-redis-"));
  const port = await freePort();
  const pw = () => randomBytes(24).toString("base64url");
  const users = { gateway: { username: "gateway", password: pw() }, jem: { username: "jem", password: pw() } };
  const test = { username: "ce-test", password: pw(), extraRules: "+keys" };
  const admin = { username: "admin", password: pw() };
  const acl =
    redisAclFile(opts.keyPattern ?? TEST_KEY_PATTERN, [users.gateway, users.jem, test]) +
    `user admin on #${aclPasswordHash(admin.password)} ~* &* +@all\n`;
  writeFileSync(join(dir, "users.acl"), acl, { mode: 0o600 });
  const persistence = [
    ...(opts.aof ? ["--appendonly", "yes", "--appendfsync", "always"] : ["--appendonly", "no"]),
    "--hash-max-listpack-value",
    "512",
    "--hash-max-listpack-entries",
    "128",
  ];
  let child: ChildProcess;
  const launch = async () => {
    child = spawn(
      "redis-server",
      [
        "--port",
        String(port),
        "--bind",
        "127.0.0.1",
        "--dir",
        dir,
        "--save",
        "",
        ...persistence,
        "--protected-mode",
        "yes",
        "--aclfile",
        join(dir, "users.acl"),
      ],
      { stdio: ["ignore", "pipe", "pipe"] },
    );
    let log = "";
    child.stdout?.on("data", (d) => {
      log += String(d);
      if (opts.aof) appendFileSync(join(dir, "server.log"), String(d));
    });
    child.stderr?.on("data", (d) => (log += String(d)));
    const started = Date.now();
    while (!log.includes("Ready to accept connections")) {
      if (child.exitCode !== null) throw new Error(`redis-server exited: ${log}`);
      if (Date.now() - started > 10_000) throw new Error(`redis-server did not start: ${log}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  };
  const halt = async (signal: NodeJS.Signals) => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((r) => child.once("exit", r));
    child.kill(signal);
    await exited;
  };
  await launch();
  return {
    url: `redis://${test.username}:${test.password}@127.0.0.1:${port}`,
    adminUrl: `redis://${admin.username}:${admin.password}@127.0.0.1:${port}`,
    port,
    users,
    dir,
    kill: () => halt("SIGKILL"),
    async restart() {
      await halt("SIGTERM");
      await launch();
    },
    async stop() {
      await halt("SIGTERM");
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
