import { readFileSync } from "node:fs";
import type { Redis } from "ioredis";
import { luaKeyPrelude } from "./keys.js";

/**
 * The store's Lua scripts: one file per script under ./lua (copied next to the gateway bundle by
 * scripts/build-app.ts), each opening with a comment listing its KEYS and ARGV. Every key a script
 * touches is passed as KEYS where the caller can compute it; the rest (indexes chosen by data read
 * inside the script) share the same `{ce}` hash tag, so every script runs in one Cluster slot.
 * Scripts marked `keysInLua` build such keys with `ceKeys(prefix)`, generated from keys.ts
 * (luaKeyPrelude) and prepended to their source: the layout is never written out in Lua. Scripts
 * marked `bumpsRev` change job records and get `bumpRev(key)` (lua/lib/rev.lua) the same way.
 */
export const SCRIPTS = {
  ceCreateJobs: { file: "create", numberOfKeys: undefined, keysInLua: true },
  ceUpdateJob: { file: "update", numberOfKeys: 5, keysInLua: true, bumpsRev: true },
  ceRemoveJob: { file: "remove", numberOfKeys: 7, keysInLua: true },
  ceRequest: { file: "request", numberOfKeys: 3, bumpsRev: true },
  ceCloseRequests: { file: "close-requests", numberOfKeys: undefined },
  ceDelegCreate: { file: "deleg-create", numberOfKeys: 3 },
  ceDelegExpiry: { file: "deleg-expiry", numberOfKeys: undefined, keysInLua: true, bumpsRev: true },
  ceUploadRange: { file: "upload-range", numberOfKeys: 1 },
  ceSessionBytes: { file: "session-bytes", numberOfKeys: 1 },
  ceWindow: { file: "window", numberOfKeys: 1 },
  ceTokenBucket: { file: "token-bucket", numberOfKeys: 1 },
  ceLockAcquire: { file: "lock-acquire", numberOfKeys: 1 },
  ceLockAcquireRead: { file: "lock-acquire-read", numberOfKeys: 2 },
  ceLockExtend: { file: "lock-extend", numberOfKeys: 1 },
  ceLockRelease: { file: "lock-release", numberOfKeys: 1 },
  ceLockReleaseRing: { file: "lock-release-ring", numberOfKeys: 3 },
  ceHoldRelease: { file: "hold-release", numberOfKeys: undefined, keysInLua: true },
  ceHoldWithdraw: { file: "hold-withdraw", numberOfKeys: 3 },
  ceAdvanceRing: { file: "advance-ring", numberOfKeys: 2 },
  ceAdvanceClaim: { file: "advance-claim", numberOfKeys: 2 },
  ceAdvanceOrphans: { file: "advance-orphans", numberOfKeys: 1 },
  ceStatusMany: { file: "status-many", numberOfKeys: undefined, keysInLua: true },
  ceGetMany: { file: "get-many", numberOfKeys: undefined },
  cePoolLease: { file: "pool-lease", numberOfKeys: 3 },
  cePoolRelease: { file: "pool-release", numberOfKeys: 5 },
  ceCountSets: { file: "count-sets", numberOfKeys: undefined },
  ceJobAges: { file: "job-ages", numberOfKeys: undefined, keysInLua: true },
} as const satisfies Record<string, { file: string; numberOfKeys: number | undefined; keysInLua?: true; bumpsRev?: true }>;

export type ScriptName = keyof typeof SCRIPTS;

const sources = new Map<string, string>();
const luaFile = (file: string) => readFileSync(new URL(`./lua/${file}.lua`, import.meta.url), "utf8");
const source = (name: ScriptName) => {
  const { file } = SCRIPTS[name];
  let s = sources.get(file);
  if (s === undefined) {
    s = luaFile(file);
    if ("bumpsRev" in SCRIPTS[name]) s = luaFile("lib/rev") + s;
    if ("keysInLua" in SCRIPTS[name]) s = luaKeyPrelude() + s;
    sources.set(file, s);
  }
  return s;
};

const defined = new WeakMap<Redis, Set<ScriptName>>();

/**
 * Runs a store script (EVALSHA, EVAL on a cache miss). Scripts with a variable number of keys
 * (`numberOfKeys: undefined`) take the key count as their first argument, as ioredis expects.
 */
export async function runScript(
  redis: Redis,
  name: ScriptName,
  keys: readonly string[],
  args: readonly (string | number)[],
): Promise<unknown> {
  let set = defined.get(redis);
  if (!set) defined.set(redis, (set = new Set()));
  const spec = SCRIPTS[name];
  if (!set.has(name)) {
    redis.defineCommand(
      name,
      spec.numberOfKeys === undefined ? { lua: source(name) } : { numberOfKeys: spec.numberOfKeys, lua: source(name) },
    );
    set.add(name);
  }
  if (spec.numberOfKeys !== undefined && keys.length !== spec.numberOfKeys)
    throw new Error(`script ${name}: ${keys.length} keys given, ${spec.numberOfKeys} declared`);
  const fn = (redis as unknown as Record<string, (...a: (string | number)[]) => Promise<unknown>>)[name]!;
  return spec.numberOfKeys === undefined ? fn.call(redis, keys.length, ...keys, ...args) : fn.call(redis, ...keys, ...args);
}
