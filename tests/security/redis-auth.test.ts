/**
 * Redis requires authentication: what a job on the head node can do against the CE's
 * Redis, and what the CE's own users may not do. A private redis-server with the production ACL
 * (`redisAclFile("{ce}*", ...)`, the rules `./ce start` and deploy/ use) and a real gateway boot.
 */
import { chmodSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { createRequire } from "node:module";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { redactRedisUrl, redisAclFile, RedisSecretError, type CompiledConfig } from "@ce/config";
import { REDACT_PATHS, startGateway, type StartOptions } from "../../apps/gateway/src/server.js";
import { createPki, testConfig } from "../../apps/gateway/test/harness.js";
import { startJem } from "../../apps/jem/src/daemon.js";
import { startRedis, type RedisHandle } from "@ce/testing/redis";

type Logger = NonNullable<StartOptions["logger"]>;
// pino is the gateway's dependency, not this package's: the same module the gateway logs through.
const pino = createRequire(new URL("../../apps/gateway/package.json", import.meta.url))("pino") as (
  opts: object,
  dest?: Writable,
) => Logger;
const PREFIX = "{ce}";
let r: RedisHandle;
const open: Redis[] = [];
const dir = mkdtempSync(join(tmpdir(), "ce-redis-auth-"));

beforeAll(async () => {
  r = await startRedis({ keyPattern: `${PREFIX}*` });
});
afterAll(async () => {
  open.forEach((c) => c.disconnect());
  await r?.stop();
});

function client(auth: { username?: string; password?: string } = {}): Redis {
  const c = new Redis({
    host: "127.0.0.1",
    port: r.port,
    lazyConnect: true,
    enableReadyCheck: false,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    ...auth,
  });
  c.on("error", () => {}); // refused AUTH surfaces on the command promises below
  open.push(c);
  return c;
}

const err = (p: Promise<unknown>) =>
  p.then(
    () => "OK (no error)",
    (e: Error) => e.message,
  );

describe("a client without the CE's credentials (what a job can do)", () => {
  it("gets NOAUTH for every data command, and cannot log in as default", async () => {
    const c = client();
    await c.connect();
    expect(await err(c.get(`${PREFIX}:job:x`))).toMatch(/^NOAUTH/);
    expect(await err(c.set(`${PREFIX}:job:x`, "1"))).toMatch(/^NOAUTH/);
    expect(await err(c.call("KEYS", "*"))).toMatch(/^NOAUTH/);
    expect(await err(c.call("INFO"))).toMatch(/^NOAUTH/);
    expect(await err(c.publish(`${PREFIX}:jem:abort`, "x"))).toMatch(/^NOAUTH/);
    // `default` is off: no password (empty, guessed or the real one of another user) opens it.
    for (const pw of ["", "nopass", r.users.jem.password]) expect(await err(c.call("AUTH", "default", pw))).toMatch(/^WRONGPASS/);
    expect(await err(c.call("AUTH", r.users.jem.password))).toMatch(/^WRONGPASS/);
    expect(await err(c.call("AUTH", "jem", "guess"))).toMatch(/^WRONGPASS/);
    expect(await err(c.get(`${PREFIX}:job:x`))).toMatch(/^NOAUTH/);
  });

  it("the aclfile disables default and holds only SHA-256 hashes", () => {
    const acl = redisAclFile(`${PREFIX}*`, [{ username: "gateway", password: "s3cret-gw" }]);
    expect(acl).toMatch(/^user default off /m);
    expect(acl).not.toContain("s3cret-gw");
    expect(acl).toMatch(/^user gateway on #[0-9a-f]{64} resetkeys ~\{ce\}\* resetchannels &\{ce\}\* /m);
  });
});

describe.each(["gateway", "jem"] as const)("the %s user", (role) => {
  let c: Redis;
  beforeAll(async () => {
    c = client(r.users[role]);
    await c.connect();
  });

  it("reads and writes keys, scripts and channels under the CE prefix (what BullMQ and the store need)", async () => {
    expect(await c.set(`${PREFIX}:probe:${role}`, "v")).toBe("OK");
    expect(await c.get(`${PREFIX}:probe:${role}`)).toBe("v");
    expect(await c.eval("return redis.call('INCR', KEYS[1])", 1, `${PREFIX}:n:${role}`)).toBe(1);
    expect(await c.publish(`${PREFIX}:jem:abort`, "x")).toBe(0);
    expect(await c.call("INFO", "server")).toMatch(/redis_version/);
  });

  it.each([
    ["CONFIG GET", ["CONFIG", "GET", "*"]],
    ["CONFIG SET", ["CONFIG", "SET", "dir", "/tmp"]],
    ["FLUSHALL", ["FLUSHALL"]],
    ["FLUSHDB", ["FLUSHDB"]],
    ["DEBUG", ["DEBUG", "SLEEP", "0"]],
    ["ACL LIST", ["ACL", "LIST"]],
    ["ACL SETUSER", ["ACL", "SETUSER", "default", "on", "nopass", "+@all", "~*"]],
    ["MODULE", ["MODULE", "LIST"]],
    ["SHUTDOWN", ["SHUTDOWN", "NOSAVE"]],
    ["KEYS", ["KEYS", "*"]],
    ["CLIENT KILL", ["CLIENT", "KILL", "TYPE", "normal"]],
    ["REPLICAOF", ["REPLICAOF", "127.0.0.1", "1"]],
  ])("cannot run %s", async (_name, [cmd, ...args]) => {
    // DEBUG is also off server-wide (enable-debug-command no, the default): either refusal counts.
    expect(await err(c.call(cmd!, ...args!))).toMatch(cmd === "DEBUG" ? /^(NOPERM|ERR DEBUG command not allowed)/ : /^NOPERM/);
  });

  it("cannot touch keys or channels outside the prefix, directly or from a script", async () => {
    expect(await err(c.get("other:secret"))).toMatch(/^NOPERM/);
    expect(await err(c.set("{other}:x", "1"))).toMatch(/^NOPERM/);
    expect(await err(c.publish("other-channel", "x"))).toMatch(/^NOPERM/);
    expect(await err(c.eval("return redis.call('GET', KEYS[1])", 1, "other:secret"))).toMatch(
      /can't access at least one of the keys|NOPERM/,
    );
    expect(await err(c.eval("return redis.call('FLUSHALL')", 0))).toMatch(/can't run this command|NOPERM/);
    // The server is still up and the data is still there (SHUTDOWN and FLUSHALL were refused).
    expect(await c.get(`${PREFIX}:probe:${role}`)).toBe("v");
  });
});

describe("boot with password files", () => {
  const pki = createPki();
  const file = (name: string, content: string, mode: number) => {
    const p = join(dir, name);
    writeFileSync(p, content, { mode });
    chmodSync(p, mode);
    return p;
  };
  const config = (users: CompiledConfig["redis"]["users"]): CompiledConfig => {
    const c = testConfig(`redis://127.0.0.1:${r.port}`, mkdtempSync(join(dir, "state-")), PREFIX, pki);
    return { ...c, redis: { ...c.redis, users } };
  };

  it("a group/other-readable password file stops the gateway and the JEM, naming the file", async () => {
    const loose = file("loose.password", r.users.gateway.password, 0o644);
    const users = { gateway: { username: "gateway", passwordFile: loose }, jem: { username: "jem", passwordFile: loose } };
    const gw = startGateway(config(users), { logger: pino({ level: "silent" }) });
    await expect(gw).rejects.toThrow(RedisSecretError);
    await expect(gw).rejects.toThrow(
      `redis.users.gateway.passwordFile ${loose} is readable by group or others (mode 0644); run: chmod 600 ${loose}`,
    );
    await expect(startJem(config(users), { logger: pino({ level: "silent" }), watch: false })).rejects.toThrow(
      `redis.users.jem.passwordFile ${loose} is readable by group or others`,
    );
    const missing = join(dir, "missing.password");
    await expect(startGateway(config({ ...users, gateway: { username: "gateway", passwordFile: missing } }))).rejects.toThrow(
      `redis.users.gateway.passwordFile ${missing} cannot be read: ENOENT`,
    );
  });

  it("the gateway logs in as `gateway` from its file and never logs the password (debug level)", async () => {
    const pw = r.users.gateway.password;
    const lines: string[] = [];
    const sink = new Writable({ write: (chunk: Buffer, _e, cb) => (lines.push(chunk.toString("utf8")), cb()) });
    const logger = pino({ level: "debug", redact: { paths: REDACT_PATHS, censor: "[redacted]" } }, sink);
    const gwFile = file("gateway.password", `${pw}\n`, 0o600);
    const gw = await startGateway(config({ gateway: { username: "gateway", passwordFile: gwFile }, jem: { username: "jem" } }), {
      logger,
      drainMs: 50,
    });
    try {
      expect(await gw.services.redis.call("ACL", "WHOAMI")).toBe("gateway");
    } finally {
      await gw.close();
    }
    // A wrong password: the server's refusal (what the gateway logs as "redis connection error") does not echo it.
    const bad = client({ username: "gateway", password: "not-the-password-xyz" });
    const errors: string[] = [];
    bad.on("error", (e: Error) => errors.push(e.message));
    await err(bad.connect());
    const refusal = errors.join("\n");
    expect(refusal).toMatch(/WRONGPASS/);
    expect(refusal).not.toContain("not-the-password-xyz");
    const log = lines.join("");
    expect(lines.length).toBeGreaterThan(0);
    expect(log).not.toContain(pw);
    expect(log).not.toContain("not-the-password-xyz");
  });

  it("URLs with a password are redacted before they are shown", () => {
    expect(redactRedisUrl("redis://jem:s3cret@redis:6379/0")).toBe("redis://***@redis:6379/0");
    expect(redactRedisUrl("rediss://:s3cret@h")).toBe("rediss://***@h");
    expect(redactRedisUrl("redis://127.0.0.1:6379")).toBe("redis://127.0.0.1:6379");
  });
});
