import { createHash } from "node:crypto";
import { readFileSync, statSync } from "node:fs";
import { ConfigError } from "./load.js";
import type { CompiledConfig } from "./load.js";

/**
 * Redis authentication: every process logs in as the ACL user of its role (`gateway` for the
 * gateways, `jem` for the JEM and ceadm) with a password read from a file only the CE account can
 * read. The password lives in memory only: never in the compiled config, a URL or a log line.
 */
export type RedisRole = "gateway" | "jem";
export const REDIS_ROLES: readonly RedisRole[] = ["gateway", "jem"];

/** What ioredis and BullMQ need on top of host/port. Empty when the site sets no password file. */
export interface RedisAuth {
  username?: string;
  password?: string;
}

/** A password file that is missing, empty or readable by anyone but its owner. */
export class RedisSecretError extends ConfigError {
  readonly reason = "REDIS_PASSWORD_FILE";
}

/** Reads one password file; refuses group/other access (mode & 0o077) naming the file. */
export function readPasswordFile(file: string, key = "redis password file"): string {
  let mode: number;
  try {
    const st = statSync(file);
    if (!st.isFile()) throw new RedisSecretError(`${key} ${file} is not a regular file`);
    mode = st.mode & 0o777;
  } catch (e) {
    if (e instanceof RedisSecretError) throw e;
    throw new RedisSecretError(`${key} ${file} cannot be read: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
  if (mode & 0o077) {
    throw new RedisSecretError(`${key} ${file} is readable by group or others (mode 0${mode.toString(8)}); run: chmod 600 ${file}`);
  }
  const password = readFileSync(file, "utf8").trim();
  if (!password) throw new RedisSecretError(`${key} ${file} is empty`);
  return password;
}

/** Username + password of `role` from `redis.users.<role>`; `{}` when no password file is set. */
export function redisAuth(redis: Pick<CompiledConfig["redis"], "users">, role: RedisRole): RedisAuth {
  const user = redis.users?.[role];
  if (!user?.passwordFile) return {};
  return { username: user.username, password: readPasswordFile(user.passwordFile, `redis.users.${role}.passwordFile`) };
}

/** A Redis URL fit for a log line or an error message: any userinfo replaced. */
export function redactRedisUrl(url: string): string {
  return url.replace(/^([a-z][a-z0-9+.-]*:\/\/)[^@/?#]*@/i, "$1***@");
}

/**
 * ACL rules of the CE users: keys and pub/sub channels under the CE prefix only; every command
 * except the `@admin` and `@dangerous` categories (CONFIG, FLUSHALL, DEBUG, ACL, MODULE, SHUTDOWN,
 * KEYS, MONITOR, ...), plus INFO, which ioredis' ready check and BullMQ's version and eviction
 * checks need. Gateway and JEM get the same rules: BullMQ's Lua scripts (queue add on the gateway,
 * workers on the JEM) and the job records touch the same keys, so narrower command lists would not
 * narrow what either can reach; separate users give separate passwords and attribution (ACL LOG).
 */
export function redisAclRules(keyPattern: string): string {
  return `resetkeys ~${keyPattern} resetchannels &${keyPattern} nocommands +@all -@admin -@dangerous +info`;
}

/** SHA-256 of a password as Redis' ACL expects it after `#`: the aclfile never holds plaintext. */
export function aclPasswordHash(password: string): string {
  return createHash("sha256").update(password, "utf8").digest("hex");
}

/** The aclfile for redis-server: `default` off, one line per CE user. */
export function redisAclFile(keyPattern: string, users: { username: string; password: string; extraRules?: string }[]): string {
  // `default` is off (no client can log in as it), but it keeps the CE users' rules: Redis 7.0
  // replays an AOF's MULTI/EXEC blocks (the effects of every Lua script) as `default`, and with no
  // rights it drops them with NOPERM — a restart from the AOF silently lost every job record.
  const lines = [`user default off ${redisAclRules(keyPattern)}`];
  for (const u of users) {
    if (!/^[A-Za-z0-9_.-]+$/.test(u.username)) throw new ConfigError(`invalid Redis user name ${JSON.stringify(u.username)}`);
    lines.push(
      `user ${u.username} on #${aclPasswordHash(u.password)} ${redisAclRules(keyPattern)}${u.extraRules ? ` ${u.extraRules}` : ""}`,
    );
  }
  return `${lines.join("\n")}\n`;
}
