import { existsSync, readdirSync, readFileSync } from "node:fs";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { Keys, LUA_KEY_METHODS, luaKeyPrelude } from "./keys.js";
import { Locks } from "./locks.js";
import { RateLimiter, leaseSize } from "./ratelimit.js";
import { runScript, SCRIPTS } from "./scripts.js";
import { waitFor } from "@ce/testing";

const dir = (pkg: string) => new URL(`../../${pkg}/src/lua/`, import.meta.url);
const luaFiles = (pkg: string) => readdirSync(dir(pkg)).filter((f) => f.endsWith(".lua"));

describe("Lua script files", () => {
  it("are all registered, each opening with a comment naming its KEYS and ARGV; no other package has any", () => {
    const files = luaFiles("store").map((f) => f.replace(/\.lua$/, ""));
    expect(files.sort()).toEqual(
      Object.values(SCRIPTS)
        .map((s) => s.file)
        .sort(),
    );
    for (const f of luaFiles("store")) {
      const lines = readFileSync(new URL(f, dir("store")), "utf8").split("\n");
      const head = lines
        .slice(
          0,
          lines.findIndex((l) => !l.startsWith("--")),
        )
        .join("\n");
      expect(head, f).toMatch(/KEYS\[1(\]|\.\.)/);
      expect(head, f).toMatch(/ARGV/);
    }
    // The store is the one owner of Lua (and of the keys it touches): no script lives elsewhere.
    const packages = readdirSync(new URL("../../", import.meta.url)).filter((p) => p !== "store");
    for (const pkg of packages) expect(existsSync(dir(pkg)), `packages/${pkg}/src/lua`).toBe(false);
  });
});

describe("scripts against Redis", () => {
  let redis: Redis;
  const prefix = `{scripts-test-${process.pid}}`;
  beforeAll(() => {
    redis = new Redis(inject("redisUrl"));
  });
  afterAll(async () => {
    const found = await redis.keys(`${prefix}*`);
    if (found.length) await redis.del(...found);
    redis.disconnect();
  });

  it("ceKeys, the key layout prepended to scripts, builds exactly the keys of keys.ts", async () => {
    // Odd but legal pieces: Lua pattern and quote characters must come through as plain text.
    const odd = "{p%'\\.x}";
    const args = ["a-1", "b%s'"];
    const lua = `${luaKeyPrelude()}local K = ceKeys(ARGV[1]) local out = {}
      for i, m in ipairs(cjson.decode(ARGV[2])) do out[i] = K[m](ARGV[3], ARGV[4]) end return out`;
    const got = await redis.eval(lua, 0, odd, JSON.stringify(LUA_KEY_METHODS), ...args);
    const keys = new Keys(odd) as unknown as Record<string, (...a: string[]) => string>;
    expect(got).toEqual(LUA_KEY_METHODS.map((m) => keys[m]!(...args)));
  });

  it("refuses a call with another number of keys than the script declares", async () => {
    await expect(runScript(redis, "ceLockRelease", [], ["x"])).rejects.toThrow(/0 keys given, 1 declared/);
  });

  it("leases: a holder whose lease expired can neither extend nor release the next holder's", async () => {
    const a = new Locks(redis, prefix);
    const b = new Locks(redis, prefix);
    const first = await a.tryAcquire("job:x", 150);
    expect(first?.key).toBe(new Keys(prefix).lock("job:x"));
    expect(await b.tryAcquire("job:x", 5_000)).toBeUndefined();
    // Stop the refresh without releasing (a frozen process), let the lease expire.
    await redis.pexpire(first!.key, 1);
    await waitFor("the lease expired", async () => (await redis.exists(first!.key)) === 0, 5_000, { everyMs: 5 });
    const second = await b.tryAcquire("job:x", 5_000);
    expect(second?.held).toBe(true);
    await first!.release();
    expect(await redis.exists(first!.key)).toBe(1);
    await second!.release();
    expect(await redis.exists(first!.key)).toBe(0);
  });

  it("token bucket: the burst passes, the next request waits about 1/rate", async () => {
    const rl = new RateLimiter(redis, prefix);
    const who = { subject: "/CN=burst" };
    for (let i = 0; i < 3; i++) expect(await rl.take(who, 2, 3)).toBeUndefined();
    const wait = await rl.take(who, 2, 3);
    expect(wait).toBeGreaterThan(0);
    expect(wait).toBeLessThanOrEqual(500);
    // Another client has its own bucket.
    expect(await rl.take({ address: "192.0.2.1" }, 2, 3)).toBeUndefined();
  });

  it("token bucket leases: a gateway takes leaseSize() tokens per call, two gateways share the bucket", async () => {
    expect(leaseSize(2_000, 4_000)).toBe(100);
    expect(leaseSize(2, 3)).toBe(1);
    expect(leaseSize(1_000, 10)).toBe(10);
    const a = new RateLimiter(redis, prefix);
    const b = new RateLimiter(redis, prefix);
    const who = { subject: "/CN=lease" };
    // rate 100/s, burst 10: blocks of 5. 10 tokens in the bucket, two leases of 5, then refusals.
    const ok = await Promise.all(Array.from({ length: 5 }, () => a.take(who, 100, 10)));
    expect(ok.every((w) => w === undefined)).toBe(true);
    for (let i = 0; i < 5; i++) expect(await b.take(who, 100, 10)).toBeUndefined();
    const granted = [...(await Promise.all(Array.from({ length: 12 }, () => a.take(who, 100, 10))))].filter((w) => w === undefined).length;
    // Only what refilled meanwhile (100/s over a few ms) can still pass.
    expect(granted).toBeLessThan(6);
  });
});
