import { chmodSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { compileConfig, loadConfig } from "./load.js";
import { readPasswordFile, redisAuth, RedisSecretError } from "./redis.js";

const dir = mkdtempSync(join(tmpdir(), "ce-redis-cfg-"));
const secret = (name: string, content: string, mode: number) => {
  const p = join(dir, name);
  writeFileSync(p, content, { mode });
  chmodSync(p, mode);
  return p;
};

describe("redis.users", () => {
  it("defaults to user names gateway/jem without credentials; the embedded setup's files under <stateDir>/secrets", () => {
    const plain = compileConfig({}, dir);
    expect(plain.redis.users).toEqual({ gateway: { username: "gateway" }, jem: { username: "jem" } });
    expect(redisAuth(plain.redis, "gateway")).toEqual({});
    const embedded = compileConfig({ paths: { stateDir: "st" }, redis: { embedded: true } }, dir);
    expect(embedded.redis.users.jem).toEqual({ username: "jem", passwordFile: join(dir, "st/secrets/redis-jem.password") });
  });

  it("each app reads its own file, set per app in the file or by CE__REDIS__USERS__<APP>__PASSWORD_FILE", () => {
    const gw = secret("gw", "pw-gateway\n", 0o600);
    const jem = secret("jem", "pw-jem", 0o400);
    const c = loadConfig({
      env: {
        CE__REDIS__USERS__GATEWAY__PASSWORD_FILE: gw,
        CE__REDIS__USERS__JEM__PASSWORD_FILE: jem,
        CE__REDIS__USERS__JEM__USERNAME: "ce-jem",
      },
    });
    expect(redisAuth(c.redis, "gateway")).toEqual({ username: "gateway", password: "pw-gateway" });
    expect(redisAuth(c.redis, "jem")).toEqual({ username: "ce-jem", password: "pw-jem" });
    // The compiled config names the file, never the password.
    expect(JSON.stringify(c)).not.toContain("pw-gateway");
  });

  it.each([0o644, 0o640, 0o604, 0o660])("refuses a password file with mode 0%s, naming the file", (mode) => {
    const p = secret(`loose-${mode}`, "pw", mode);
    expect(() => readPasswordFile(p)).toThrow(RedisSecretError);
    expect(() => readPasswordFile(p)).toThrow(
      `redis password file ${p} is readable by group or others (mode 0${mode.toString(8)}); run: chmod 600 ${p}`,
    );
  });

  it("refuses a missing, empty or non-regular password file", () => {
    expect(() => readPasswordFile(join(dir, "nope"))).toThrow(/nope cannot be read: ENOENT/);
    expect(() => readPasswordFile(secret("empty", "\n", 0o600))).toThrow(/empty is empty/);
    expect(() => readPasswordFile(dir)).toThrow(/is not a regular file/);
  });

  it("rejects user names Redis' ACL syntax cannot carry", () => {
    expect(() => compileConfig({ redis: { users: { gateway: { username: "a b" } } } })).toThrow(
      /redis\.users\.gateway\.username: Redis user names/,
    );
  });
});
