import { statfs } from "node:fs/promises";
import { Keys } from "@ce/store";
import { JOB_ID_RE } from "@ce/controldir";
import type { JemContext } from "../../context.js";
import { every } from "../../periodic.js";
import {
  jobLinkDirs,
  jobLinkHashes,
  removeEntryIfUnused,
  removeJobLinks,
  removeTemps,
  walkEntries,
  type CacheEntry,
} from "../../priv/rootfs-cache.js";
import type { CacheDir } from "./cache.js";

/** Oldest unused entries kept in memory per pass; a pass needing more frees the rest next time. */
const CANDIDATES = 20_000;
/** How often a JEM looks for a due pass or an operator's request. */
const TICK_MS = 5_000;

export interface CleanReport {
  dir: string;
  files: number;
  bytes: number;
  /** What the watermarks are measured against: the cache's bytes (byte marks) or the file system's used bytes (percent marks). */
  used: number;
  high: number;
  low: number;
  removed: number;
  freed: number;
  /** Entries kept although above the watermark or old: a job not yet finished links them. */
  inUse: number;
  jobLinksRemoved: number;
  at: number;
}

const FINISHED = new Set(["FINISHED", "DELETED"]);

/**
 * One pass over one cache dir: the links of finished (or vanished) jobs go, temporaries of dead
 * downloads go, files unused for `lifetimeSeconds` go, and while usage is above the high
 * watermark the least recently used files go until it is below the low one. A file linked from
 * the joblinks dir of a job not yet finished is never removed. The data tree is
 * read as a stream (opendir), and only the oldest CANDIDATES entries are kept in memory.
 */
export async function cleanDir(ctx: JemContext, dir: CacheDir): Promise<CleanReport> {
  const c = ctx.config.staging.cache;
  const now = Date.now();
  let jobLinksRemoved = 0;
  // What jobs not yet finished link: only these entries are in use. The link count alone would
  // let any other name of a cached file (one an older JEM let a job move into its session) pin
  // the entry for as long as that name lives.
  const inUseHashes = new Set<string>();
  for await (const id of jobLinkDirs(dir.path)) {
    const job = JOB_ID_RE.test(id) ? await ctx.jobs.get(id) : undefined;
    if (!JOB_ID_RE.test(id) || (job && !FINISHED.has(job.state))) {
      for (const h of await jobLinkHashes(dir.path, id)) inUseHashes.add(h);
      continue;
    }
    await removeJobLinks(dir.path, id).then(
      () => jobLinksRemoved++,
      (e: unknown) => ctx.log.warn({ err: e, dir: dir.path, jobId: id, reason: (e as Error).message }, "cache: job links not removed"),
    );
  }
  // A download attempt is bounded by staging.timeoutMs: an older temporary has no writer left.
  await removeTemps(dir.path, "", ctx.config.staging.timeoutMs + 60_000).catch(() => 0);

  let files = 0;
  let bytes = 0;
  let removed = 0;
  let freed = 0;
  let inUse = 0;
  let candidates: CacheEntry[] = [];
  const drop = async (e: CacheEntry) => {
    const n = await removeEntryIfUnused(e.root, e.hash, inUseHashes);
    if (n > 0) {
      removed++;
      freed += n;
    }
    return n;
  };
  for await (const e of walkEntries(dir.path)) {
    if (e.nlink > 1 && inUseHashes.has(e.hash)) {
      inUse++;
      files++;
      bytes += e.size;
      continue;
    }
    if (c.lifetimeSeconds > 0 && now - e.lastUse > c.lifetimeSeconds * 1000) {
      await drop(e);
      continue;
    }
    files++;
    bytes += e.size;
    candidates.push(e);
    if (candidates.length >= 2 * CANDIDATES) candidates = candidates.sort((a, b) => a.lastUse - b.lastUse).slice(0, CANDIDATES);
  }
  const fs = await statfs(dir.path);
  const fsBytes = fs.blocks * fs.bsize;
  const byBytes = c.highWatermarkBytes !== undefined;
  const high = c.highWatermarkBytes ?? Math.floor((fsBytes * c.highWatermarkPercent) / 100);
  const low = Math.min(high, c.lowWatermarkBytes ?? Math.floor((fsBytes * c.lowWatermarkPercent) / 100));
  const fsUsed = (fs.blocks - fs.bfree) * fs.bsize;
  let used = byBytes ? bytes : fsUsed;
  if (used > high) {
    candidates.sort((a, b) => a.lastUse - b.lastUse);
    for (const e of candidates) {
      if (used <= low) break;
      const n = await drop(e);
      used -= n;
      bytes -= n;
      files -= n > 0 ? 1 : 0;
    }
    if (used > high)
      ctx.log.warn(
        { dir: dir.path, used, high, inUse },
        "cache: still above the high watermark (files in use by jobs, or more to remove next pass)",
      );
  }
  return { dir: dir.path, files, bytes, used, high, low, removed, freed, inUse, jobLinksRemoved, at: now };
}

/** Every writable dir once; the reports go to Redis for `ceadm cache stats`. */
export async function cleanPass(ctx: JemContext, dirs: readonly CacheDir[]): Promise<CleanReport[]> {
  const keys = new Keys(ctx.config.redis.prefix);
  const out: CleanReport[] = [];
  for (const d of dirs) {
    if (d.readonly) continue;
    const r = await cleanDir(ctx, d).catch((e: unknown) => {
      ctx.log.warn({ err: e, dir: d.path, reason: (e as Error).message }, "cache dir not cleaned");
      return undefined;
    });
    if (!r) continue;
    out.push(r);
    await ctx.redis.hset(keys.cacheUsage(), d.path, JSON.stringify(r));
    if (r.removed > 0 || r.jobLinksRemoved > 0) ctx.log.info(r, "cache cleaned");
  }
  return out;
}

/**
 * The cleaner of this JEM: a pass every `cleanIntervalSeconds`, or at once on `ceadm cache clean`;
 * one JEM at a time cleans (lease `lock("cache-cleaner")`).
 */
export function startCacheCleaner(ctx: JemContext, dirs: readonly CacheDir[]): { stop(): Promise<void> } {
  const keys = new Keys(ctx.config.redis.prefix);
  let last = 0;
  const tick = async () => {
    const requested = (await ctx.redis.getdel(keys.cacheCleanRequest())) !== null;
    if (!requested && Date.now() - last < ctx.config.staging.cache.cleanIntervalSeconds * 1000) return;
    const lease = await ctx.locks.tryAcquire("cache-cleaner", Math.max(60_000, ctx.jobLockMs));
    if (!lease) return;
    try {
      last = Date.now();
      await cleanPass(ctx, dirs);
    } finally {
      await lease.release();
    }
  };
  // Skipped during a Redis outage and while a pass still runs (periodic.ts).
  return every(Math.min(TICK_MS, ctx.config.staging.cache.cleanIntervalSeconds * 1000), "cache cleaner pass", tick, ctx);
}
