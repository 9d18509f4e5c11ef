import { opendir, readFile, stat } from "node:fs/promises";
import type { Redis } from "ioredis";
import type { CompiledConfig } from "@ce/config";
import { Keys } from "@ce/store";
import { OpsError } from "./ops.js";

/**
 * `ceadm cache stats|list|clean`: the JEM's input cache (apps/jem/src/staging/cache). Counters and
 * the cleaner's last measurements come from Redis; `list` reads the cache dirs, which only root
 * (the JEM's account) can read.
 */

export interface CacheStats {
  hits: number;
  misses: number;
  refused: number;
  bytesSaved: number;
  /** Per cache dir, as the cleaner last measured it. */
  dirs: Array<{ dir: string; files?: number; bytes?: number; used?: number; high?: number; low?: number; inUse?: number; at?: number }>;
}

export async function cacheStats(redis: Redis, config: CompiledConfig): Promise<CacheStats> {
  const k = new Keys(config.redis.prefix);
  const [st, usage] = await Promise.all([redis.hgetall(k.cacheStats()), redis.hgetall(k.cacheUsage())]);
  const n = (v: string | undefined) => Number(v ?? 0);
  return {
    hits: n(st.hits),
    misses: n(st.misses),
    refused: n(st.refused),
    bytesSaved: n(st.bytesSaved),
    dirs: config.staging.cache.dirs.map((d) => ({ dir: d.path, ...(usage[d.path] ? (JSON.parse(usage[d.path]!) as object) : {}) })),
  };
}

/** Asks the JEMs for a cleaner pass now (one of them takes the request within seconds). */
export async function requestCacheClean(redis: Redis, config: CompiledConfig): Promise<void> {
  if (config.staging.cache.dirs.length === 0) throw new OpsError("BAD_REQUEST", "no cache directories are configured (staging.cache.dirs)");
  await redis.set(new Keys(config.redis.prefix).cacheCleanRequest(), String(Date.now()), "EX", 3_600);
}

export interface CachedFile {
  dir: string;
  hash: string;
  url: string;
  size: number;
  lastUse: number;
  /** Jobs not yet finished that link the file. */
  links: number;
}

/** The cached files, at most `limit` (the cache dirs are read as a stream). */
export async function listCache(config: CompiledConfig, limit = 1_000): Promise<CachedFile[]> {
  const out: CachedFile[] = [];
  for (const { path } of config.staging.cache.dirs) {
    const top = await opendir(`${path}/data`).catch((e: NodeJS.ErrnoException) => {
      if (e.code === "EACCES")
        throw new OpsError("BAD_REQUEST", `cannot read ${path}/data: run ceadm cache list as root (the JEM's account)`);
      return undefined;
    });
    if (!top) continue;
    for await (const sub of top) {
      if (!sub.isDirectory()) continue;
      for await (const e of await opendir(`${path}/data/${sub.name}`)) {
        if (!e.name.endsWith(".meta")) continue;
        const hash = e.name.slice(0, -5);
        const [st, meta, m] = await Promise.all([
          stat(`${path}/data/${sub.name}/${hash}`).catch(() => undefined),
          readFile(`${path}/data/${sub.name}/${e.name}`, "utf8")
            .then((t) => JSON.parse(t) as { url?: string })
            .catch(() => ({ url: undefined })),
          stat(`${path}/data/${sub.name}/${e.name}`).catch(() => undefined),
        ]);
        if (!st) continue;
        out.push({ dir: path, hash, url: meta.url ?? "?", size: st.size, lastUse: m?.mtimeMs ?? st.mtimeMs, links: st.nlink - 1 });
        if (out.length >= limit) return out;
      }
    }
  }
  return out;
}
