import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { aclPasswordHash, redisAclFile } from "@ce/config";
import { freePort } from "./ports.js";
import { TEST_KEY_PATTERN } from "./redis.js";

/**
 * Real Redis high-availability set-ups on loopback, from Debian's redis-server and redis-sentinel
 * (scripts/ensure-system-deps.sh installs both): a primary + one replica + three sentinels, and a
 * 3-primary Redis Cluster. Same ACL as the single test server (redis-server.ts): `default` off,
 * the CE users `gateway` and `jem`, `ce-test` (+KEYS) for fixtures, plus the users replication,
 * the sentinels and `redis-cli --cluster create` need. Every process is our child and is stopped
 * by its pid. Also used by scripts/redis/ha.ts (manual runs) and scripts/bench-durability.ts.
 */
export const HAS_SENTINEL = spawnSync("redis-sentinel", ["--version"]).status === 0;

type Users = Record<"gateway" | "jem", { username: string; password: string }>;
const pw = () => randomBytes(18).toString("base64url");

export interface RedisProc {
  port: number;
  readonly pid: number;
  /** SIGKILL (a crash) or SIGTERM (a clean stop); resolves when the process is gone. */
  kill(signal?: NodeJS.Signals): Promise<void>;
  readonly alive: boolean;
  /**
   * Starts the stopped server again with the same arguments (data dir, AOF) plus `extraArgs`
   * (e.g. `--replicaof` the new primary, as the config file Sentinel rewrites would say).
   */
  restart(extraArgs?: string[]): Promise<void>;
  log(): string;
}

async function spawnRedis(cmd: string, args: string[], ready: RegExp): Promise<RedisProc> {
  let child: ChildProcess;
  let log = "";
  let gone: Promise<void>;
  const start = async (readyAgain: RegExp, extra: string[] = []) => {
    const from = log.length;
    child = spawn(cmd, [...args, ...extra], { stdio: ["ignore", "pipe", "pipe"] });
    child.stdout?.on("data", (d) => (log += String(d)));
    child.stderr?.on("data", (d) => (log += String(d)));
    const c = child;
    gone = new Promise<void>((r) => c.once("exit", () => r()));
    const started = Date.now();
    while (!readyAgain.test(log.slice(from))) {
      if (c.exitCode !== null) throw new Error(`${cmd} exited: ${log}`);
      if (Date.now() - started > 10_000) throw new Error(`${cmd} did not start: ${log}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  };
  await start(ready);
  const alive = () => child.exitCode === null && child.signalCode === null;
  return {
    port: Number(args[args.indexOf("--port") + 1]),
    get pid() {
      return child.pid!;
    },
    get alive() {
      return alive();
    },
    async kill(signal = "SIGTERM") {
      if (alive()) process.kill(child.pid!, signal);
      await gone;
    },
    async restart(extraArgs = []) {
      if (alive()) throw new Error(`${cmd} on port ${args[args.indexOf("--port") + 1]} is still running`);
      await start(/Ready to accept connections/, extraArgs);
    },
    log: () => log,
  };
}

/** Operator user of every set (CONFIG, INFO commandstats, MEMORY USAGE, CLUSTER): measurements and set-up only. */
export interface AdminAuth {
  username: string;
  password: string;
}

function aclFile(dir: string, users: Users, extra: { username: string; password: string; rules: string }[]): string {
  const test = { username: "ce-test", password: pw(), extraRules: "+keys" };
  const lines = redisAclFile(TEST_KEY_PATTERN, [users.gateway, users.jem, test]).trimEnd().split("\n");
  for (const u of extra) lines.push(`user ${u.username} on #${aclPasswordHash(u.password)} ${u.rules}`);
  const file = join(dir, "users.acl");
  writeFileSync(file, `${lines.join("\n")}\n`, { mode: 0o600 });
  return test.password;
}

/** redis-server arguments shared by every node; `durability` is the AOF policy (`no`: no AOF). */
function serverArgs(port: number, dir: string, durability: "no" | "everysec" | "always"): string[] {
  mkdirSync(dir, { recursive: true });
  return [
    "--port",
    String(port),
    "--bind",
    "127.0.0.1",
    "--dir",
    dir,
    "--save",
    "",
    "--protected-mode",
    "yes",
    "--aclfile",
    join(dir, "..", "users.acl"),
    "--appendonly",
    durability === "no" ? "no" : "yes",
    ...(durability === "no" ? [] : ["--appendfsync", durability]),
  ];
}

export interface SentinelSet {
  masterName: string;
  /** CE users (for startStack's `redisUsers`). */
  users: Users;
  admin: AdminAuth;
  sentinels: RedisProc[];
  /** Redis servers; `primary()` tells which one is primary now. */
  servers: RedisProc[];
  /** File holding the sentinels' `requirepass` (mode 0600). */
  sentinelPasswordFile: string;
  /** `config.redis` for the CE (users come from startStack's password files). */
  ceConfig(): Record<string, unknown>;
  /** ioredis options of a fixture client (`ce-test`) that follows the primary through the sentinels. */
  testClientOptions(): Record<string, unknown>;
  /** The server the sentinels name as primary now. */
  primary(): Promise<RedisProc>;
  stop(): Promise<void>;
}

/** Primary + `replicas` replicas (default 1) + three sentinels (quorum 2, primary declared down after `downAfterMs`). */
export async function startSentinelSet(
  opts: { durability?: "no" | "everysec" | "always"; downAfterMs?: number; failoverTimeoutMs?: number; replicas?: number } = {},
): Promise<SentinelSet> {
  const dir = mkdtempSync(join(tmpdir(), "ce-sentinel-"));
  const masterName = "ce";
  const users: Users = { gateway: { username: "gateway", password: pw() }, jem: { username: "jem", password: pw() } };
  const repl = { username: "ce-repl", password: pw(), rules: "+psync +replconf +ping" };
  const sentinelUser = {
    username: "ce-sentinel",
    password: pw(),
    rules:
      "allchannels +multi +slaveof +ping +exec +subscribe +config|rewrite +role +publish +info +client|setname +client|kill +script|kill",
  };
  const admin = { username: "ce-admin", password: pw() };
  const testPassword = aclFile(dir, users, [repl, sentinelUser, { ...admin, rules: "~* &* +@all" }]);
  const sentinelPassword = pw();
  const sentinelPasswordFile = join(dir, "sentinel.password");
  writeFileSync(sentinelPasswordFile, sentinelPassword, { mode: 0o600 });
  const durability = opts.durability ?? "everysec";
  const procs: RedisProc[] = [];
  const stop = async () => {
    await Promise.all(procs.map((p) => p.kill("SIGTERM")));
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    const nReplicas = opts.replicas ?? 1;
    const [p0, ...rest] = await Promise.all(Array.from({ length: 1 + nReplicas + 3 }, () => freePort()));
    const sp = rest.slice(nReplicas);
    const replication = ["--masteruser", repl.username, "--masterauth", repl.password];
    const primary = await spawnRedis(
      "redis-server",
      [...serverArgs(p0!, join(dir, "r0"), durability), ...replication],
      /Ready to accept connections/,
    );
    procs.push(primary);
    const servers = [primary];
    for (const [i, port] of rest.slice(0, nReplicas).entries()) {
      const replica = await spawnRedis(
        "redis-server",
        [...serverArgs(port!, join(dir, `r${i + 1}`), durability), ...replication, "--replicaof", "127.0.0.1", String(p0)],
        /MASTER <-> REPLICA sync: Finished with success/,
      );
      procs.push(replica);
      servers.push(replica);
    }
    const sentinels: RedisProc[] = [];
    for (const port of sp) {
      const conf = join(dir, `sentinel-${port}.conf`);
      writeFileSync(
        conf,
        [
          `port ${port}`,
          "bind 127.0.0.1",
          `dir ${dir}`,
          `requirepass ${sentinelPassword}`,
          `sentinel monitor ${masterName} 127.0.0.1 ${p0} 2`,
          `sentinel auth-user ${masterName} ${sentinelUser.username}`,
          `sentinel auth-pass ${masterName} ${sentinelUser.password}`,
          `sentinel down-after-milliseconds ${masterName} ${opts.downAfterMs ?? 1000}`,
          `sentinel failover-timeout ${masterName} ${opts.failoverTimeoutMs ?? 3000}`,
          `sentinel parallel-syncs ${masterName} 1`,
          "",
        ].join("\n"),
        { mode: 0o600 },
      );
      const s = await spawnRedis("redis-sentinel", [conf, "--port", String(port)], /\+monitor master/);
      sentinels.push(s);
      procs.push(s);
    }
    const set: SentinelSet = {
      masterName,
      users,
      admin,
      sentinels,
      servers,
      sentinelPasswordFile,
      ceConfig: () => ({
        mode: "sentinel",
        sentinel: { nodes: sentinels.map((s) => `127.0.0.1:${s.port}`), masterName, passwordFile: sentinelPasswordFile },
      }),
      testClientOptions: () => ({
        sentinels: sentinels.map((s) => ({ host: "127.0.0.1", port: s.port })),
        name: masterName,
        sentinelPassword,
        username: "ce-test",
        password: testPassword,
        role: "master",
        failoverDetector: true,
      }),
      async primary() {
        for (const s of sentinels.filter((x) => x.alive)) {
          const r = spawnSync(
            "redis-cli",
            ["-p", String(s.port), "--no-auth-warning", "-a", sentinelPassword, "sentinel", "get-master-addr-by-name", masterName],
            { encoding: "utf8" },
          );
          const port = Number(r.stdout.trim().split("\n")[1]);
          const p = servers.find((x) => x.port === port);
          if (p) return p;
        }
        throw new Error("no sentinel names a primary");
      },
      stop,
    };
    return set;
  } catch (e) {
    await stop();
    throw e;
  }
}

export interface RedisClusterSet {
  users: Users;
  nodes: RedisProc[];
  ceConfig(): Record<string, unknown>;
  /** ioredis Cluster arguments of a fixture client (`ce-test`). */
  testClient(): { nodes: { host: string; port: number }[]; options: Record<string, unknown> };
  stop(): Promise<void>;
}

/** A local Redis Cluster of `primaries` primaries (no replicas), slots spread by `redis-cli --cluster create`. */
export async function startRedisCluster(
  opts: { primaries?: number; durability?: "no" | "everysec" | "always" } = {},
): Promise<RedisClusterSet> {
  const dir = mkdtempSync(join(tmpdir(), "ce-cluster-"));
  const users: Users = { gateway: { username: "gateway", password: pw() }, jem: { username: "jem", password: pw() } };
  const admin = { username: "ce-admin", password: pw(), rules: "~* &* +@all" };
  const testPassword = aclFile(dir, users, [admin]);
  const n = opts.primaries ?? 3;
  const procs: RedisProc[] = [];
  const stop = async () => {
    await Promise.all(procs.map((p) => p.kill("SIGTERM")));
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    const ports = await Promise.all(Array.from({ length: 2 * n }, () => freePort()));
    for (let i = 0; i < n; i++) {
      // Bus port chosen explicitly (default port+10000 may be taken or out of range).
      procs.push(
        await spawnRedis(
          "redis-server",
          [
            ...serverArgs(ports[i]!, join(dir, `n${i}`), opts.durability ?? "no"),
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            join(dir, `n${i}`, "nodes.conf"),
            "--cluster-port",
            String(ports[n + i]),
            "--cluster-node-timeout",
            "2000",
            "--masteruser",
            admin.username,
            "--masterauth",
            admin.password,
          ],
          /Ready to accept connections/,
        ),
      );
    }
    const create = spawnSync(
      "redis-cli",
      [
        "--user",
        admin.username,
        "--pass",
        admin.password,
        "--no-auth-warning",
        "--cluster",
        "create",
        ...procs.map((p) => `127.0.0.1:${p.port}`),
        "--cluster-replicas",
        "0",
        "--cluster-yes",
      ],
      { encoding: "utf8", timeout: 30_000 },
    );
    if (create.status !== 0) throw new Error(`redis-cli --cluster create failed: ${create.stdout}${create.stderr}`);
    // Wait until every node sees the cluster as ok (slots gossiped).
    const deadline = Date.now() + 20_000;
    for (const p of procs) {
      for (;;) {
        const r = spawnSync(
          "redis-cli",
          ["-p", String(p.port), "--user", admin.username, "--pass", admin.password, "--no-auth-warning", "cluster", "info"],
          { encoding: "utf8" },
        );
        if (r.stdout.includes("cluster_state:ok")) break;
        if (Date.now() > deadline) throw new Error(`cluster did not converge: ${r.stdout}`);
        await new Promise((res) => setTimeout(res, 100));
      }
    }
    return {
      users,
      nodes: procs,
      ceConfig: () => ({ mode: "cluster", cluster: { nodes: procs.map((p) => `127.0.0.1:${p.port}`) } }),
      testClient: () => ({
        nodes: procs.map((p) => ({ host: "127.0.0.1", port: p.port })),
        options: { redisOptions: { username: "ce-test", password: testPassword } },
      }),
      stop,
    };
  } catch (e) {
    await stop();
    throw e;
  }
}

export interface StandaloneRedis {
  users: Users;
  admin: AdminAuth;
  server: RedisProc;
  ceConfig(): Record<string, unknown>;
  stop(): Promise<void>;
}

/** One redis-server with the given AOF policy (the durability bench's baseline settings). */
export async function startStandalone(opts: { durability?: "no" | "everysec" | "always" } = {}): Promise<StandaloneRedis> {
  const dir = mkdtempSync(join(tmpdir(), "ce-redis-"));
  const users: Users = { gateway: { username: "gateway", password: pw() }, jem: { username: "jem", password: pw() } };
  const admin = { username: "ce-admin", password: pw() };
  aclFile(dir, users, [{ ...admin, rules: "~* &* +@all" }]);
  const port = await freePort();
  const server = await spawnRedis(
    "redis-server",
    serverArgs(port, join(dir, "r0"), opts.durability ?? "everysec"),
    /Ready to accept connections/,
  );
  return {
    users,
    admin,
    server,
    ceConfig: () => ({ mode: "standalone", url: `redis://127.0.0.1:${port}` }),
    async stop() {
      await server.kill("SIGTERM");
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
