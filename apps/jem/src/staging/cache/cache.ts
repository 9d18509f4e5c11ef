import { randomBytes } from "node:crypto";
import { readFile } from "node:fs/promises";
import { setTimeout as sleep } from "node:timers/promises";
import { Keys, type JobRecord } from "@ce/store";
import type { JemContext } from "../../context.js";
import {
  commitEntry,
  copyInto,
  findEntry,
  linkForJob,
  openTemp,
  prepareCacheDir,
  removeTemps,
  symlinkInto,
  touchEntry,
  type CacheEntry,
  type SessionPlace,
} from "../../priv/rootfs-cache.js";
import { redact, TransferError, type TransferClient } from "../http.js";
import { askAccess, changed, validators, type OriginAnswer } from "./origin.js";
import { credentialKey, type CacheMode, type CacheTarget } from "./policy.js";

export interface CacheDir {
  path: string;
  drain: boolean;
  readonly: boolean;
}

/** One cached input of a job. */
export interface FetchRequest {
  job: JobRecord;
  url: string;
  /** The cache's name of the input and where its access is checked (policy.ts). */
  target: CacheTarget;
  mode: Exclude<CacheMode, "no">;
  /** The job's transfer client (the user's credential): downloads and access checks use it. */
  client: TransferClient;
  dest: SessionPlace;
  signal: AbortSignal;
  executable: boolean;
  /** A private copy is needed (the input is also an output, or `cache=copy`). */
  copy: boolean;
  /** Downloads the URL into `place` (the worker's protocol code, with its checks); bytes. */
  download(place: SessionPlace, onHeaders: (h: Record<string, string | string[] | undefined>) => void): Promise<number>;
}

export interface FetchResult {
  bytes: number;
  fromCache: boolean;
}

const http = (t: CacheTarget) => ["http", "https", "dav", "davs"].includes(t.scheme);

/** How often a job waiting for another's download of the same URL looks again. */
const WAIT_MS = 200;

/** The origin refuses this user the URL: the cached copy is not given out (never retried). */
export class CacheRefused extends TransferError {
  constructor(url: string, status: number, reason?: string) {
    super(
      `the origin refuses ${redact(url)} to this user (HTTP ${status}${reason ? `: ${reason.slice(0, 300)}` : ""}); the cached copy is not given out`,
      false,
      status,
      "CACHE_REFUSED",
    );
  }
}

/**
 * The site's input cache (docs/cache.md): one download per URL whatever the number of jobs and
 * JEMs (a Redis lease per URL, `lock("cache:<hash>")`, that a crashed JEM loses), a file the job
 * cannot change (a link to a root-owned file, or a copy), and only for users the origin serves.
 */
export class InputCache {
  private readonly keys: Keys;

  private constructor(
    private readonly ctx: JemContext,
    readonly dirs: CacheDir[],
    private readonly linksSafe: boolean,
  ) {
    this.keys = new Keys(ctx.config.redis.prefix);
  }

  /** The usable cache dirs of the configuration; undefined when none is (the cache is off). */
  static async open(ctx: JemContext): Promise<InputCache | undefined> {
    const usable: CacheDir[] = [];
    for (const d of ctx.config.staging.cache.dirs) {
      try {
        await prepareCacheDir(d.path, d.readonly);
        usable.push(d);
      } catch (e) {
        ctx.log.error({ err: e, dir: d.path, reason: (e as Error).message }, "cache directory unusable; it is left out");
      }
    }
    // Without protected hard links a job could hard-link the cached file it reads through its
    // joblink into its session, and a later hand-over of that session would change the file's owner.
    const protectedLinks = (await readFile("/proc/sys/fs/protected_hardlinks", "utf8").catch(() => "0")).trim() === "1";
    if (!protectedLinks && ctx.priv) ctx.log.warn("fs.protected_hardlinks is not 1: cached inputs are copied into sessions, never linked");
    return usable.length > 0 ? new InputCache(ctx, usable, protectedLinks) : undefined;
  }

  /** Where a new download of `hash` is stored: a writable, not draining dir chosen by the hash. */
  private home(hash: string): CacheDir | undefined {
    const w = this.dirs.filter((d) => !d.drain && !d.readonly);
    return w.length === 0 ? undefined : w[Number.parseInt(hash.slice(0, 8), 16) % w.length];
  }

  private async find(hash: string): Promise<{ entry: CacheEntry; dir: CacheDir } | undefined> {
    const home = this.home(hash);
    for (const dir of home ? [home, ...this.dirs.filter((d) => d !== home)] : this.dirs) {
      const entry = await findEntry(dir.path, hash);
      if (entry) return { entry, dir };
    }
    return undefined;
  }

  async fetch(r: FetchRequest): Promise<FetchResult> {
    const hash = r.target.hash;
    const started = Date.now();
    // renew: only a copy stored after this request will do; check: one revalidated now.
    let fresh = r.mode === "renew";
    for (let vanished = 0; ;) {
      r.signal.throwIfAborted();
      if (vanished > 3) throw new TransferError(`cached ${redact(r.url)} keeps vanishing (cache cleaned meanwhile)`, true);
      const found = await this.find(hash);
      const newEnough = found && (!fresh || (found.entry.meta?.stored ?? 0) >= started);
      if (found && newEnough) {
        const verdict = await this.mayUse(r, found.entry, hash, started);
        if (verdict === "stale") fresh = true;
        else {
          const bytes = await this.deliver(r, found, hash);
          if (bytes !== undefined) {
            await this.count("hit", bytes);
            return { bytes, fromCache: true };
          }
          vanished++;
          continue; // removed by the cleaner meanwhile: look again
        }
      }
      const home = this.home(hash);
      if (!home) {
        // Every dir drains or is read-only: no new entries, a plain download.
        return { bytes: await r.download(r.dest, () => undefined), fromCache: false };
      }
      const lease = await this.ctx.locks.tryAcquire(`cache:${hash}`, this.ctx.jobLockMs);
      if (!lease) {
        await sleep(WAIT_MS, undefined, { signal: r.signal });
        continue;
      }
      try {
        const again = await this.find(hash);
        if (again && (!fresh || (again.entry.meta?.stored ?? 0) >= started)) continue; // another JEM's download finished
        const bytes = await this.store(r, home, hash);
        await this.remember(r, hash);
        const out = await this.deliver(r, { entry: (await findEntry(home.path, hash))!, dir: home }, hash);
        await this.count("miss");
        if (out === undefined) throw new TransferError(`cached ${redact(r.url)} vanished right after its download`, true);
        return { bytes, fromCache: false };
      } finally {
        await lease.release();
      }
    }
  }

  /** The download into `tmp/`, then into `data/` (temporaries of a crashed holder removed first). */
  private async store(r: FetchRequest, dir: CacheDir, hash: string): Promise<number> {
    await removeTemps(dir.path, hash);
    const tmpName = `${hash}.${randomBytes(6).toString("hex")}`;
    const tmp = await openTemp(dir.path);
    let h: Record<string, string | string[] | undefined> = {};
    try {
      // xrootd and Rucio downloads carry no validators: the origin is asked for them first.
      const pre = http(r.target) ? undefined : await this.ask(r);
      const bytes = await r.download({ dir: tmp, name: tmpName, at: `/${r.dest.at.replace(/^\/+/, "")}` }, (headers) => (h = headers));
      const v = pre ?? validators(h);
      await commitEntry(dir.path, hash, tmpName, {
        url: redact(r.target.key),
        size: bytes,
        etag: v.etag,
        lastModified: v.lastModified,
        stored: Date.now(),
      });
      return bytes;
    } finally {
      await tmp.close();
      await removeTemps(dir.path, tmpName).catch(() => undefined);
    }
  }

  /**
   * May this job's user have the stored copy? `check` asks the origin every time (a changed file
   * is "stale"); the others ask once per `permissionSeconds` and credential (credentialKey: a
   * changed VOMS role or token scope is asked about again); `invariant` never asks a credential
   * the origin served once. A copy stored after this request began is this download.
   */
  private async mayUse(r: FetchRequest, entry: CacheEntry, hash: string, started: number): Promise<"ok" | "stale"> {
    const id = this.credentialOf(r);
    const stored = entry.meta?.stored ?? 0;
    if (r.mode === "check" && stored < started) {
      const a = await this.ask(r);
      await this.remember(r, hash);
      return changed({ etag: entry.meta?.etag, lastModified: entry.meta?.lastModified, size: entry.size }, a) ? "stale" : "ok";
    }
    if (r.mode === "invariant" && (await this.ctx.redis.exists(this.keys.cacheEver(id, hash))) === 1) return "ok";
    if ((await this.ctx.redis.exists(this.keys.cachePerm(id, hash))) === 1) return "ok";
    await this.ask(r);
    await this.remember(r, hash);
    return "ok";
  }

  private credentialOf(r: FetchRequest): string {
    return credentialKey(r.client.credential, r.job.fqans, r.job.owner);
  }

  /** The origin's answer for this job's credential; a refusal is counted and thrown (CacheRefused). */
  private async ask(r: FetchRequest): Promise<OriginAnswer> {
    const a = await askAccess(r.client, r.target, r.signal, this.ctx.config.staging.rucio);
    if (a.allowed) return a;
    await this.count("refused");
    throw new CacheRefused(r.url, a.status, a.reason);
  }

  /** The origin served this URL to the job's credential (a download or an access check said so). */
  private async remember(r: FetchRequest, hash: string): Promise<void> {
    const id = this.credentialOf(r);
    const c = this.ctx.config.staging.cache;
    const m = this.ctx.redis.multi();
    if (c.permissionSeconds > 0) m.set(this.keys.cachePerm(id, hash), "1", "EX", c.permissionSeconds);
    m.set(this.keys.cacheEver(id, hash), "1", "EX", Math.max(c.lifetimeSeconds, 86_400));
    await m.exec();
  }

  /**
   * Into the session: a symbolic link to the job's hard link of the root-owned 0644 file in the
   * root-owned `joblinks/<job id>/` (the job, running as its account, can read it and change
   * nothing, not even where that name lives: rootfs-cache.ts linkForJob), or a private copy (mapping off:
   * jobs run as the CE; executables; inputs also outputs; `cache=copy`; read-only dirs).
   * Undefined when the entry went meanwhile.
   */
  private async deliver(r: FetchRequest, found: { entry: CacheEntry; dir: CacheDir }, hash: string): Promise<number | undefined> {
    const { dir, entry } = found;
    const priv = this.ctx.priv;
    const link = priv && this.linksSafe && !dir.readonly && !r.copy && !r.executable && r.mode !== "copy";
    try {
      if (link) {
        const target = await linkForJob(dir.path, hash, r.job.id);
        await symlinkInto(r.dest, target);
      } else {
        await copyInto(r.dest, dir.path, hash, r.executable ? 0o755 : 0o644);
      }
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === "ENOENT") return undefined;
      throw e;
    }
    if (!dir.readonly) await touchEntry(dir.path, hash);
    return entry.size;
  }

  private async count(result: "hit" | "miss" | "refused", bytes = 0): Promise<void> {
    this.ctx.metrics?.countCache(result, bytes);
    const m = this.ctx.redis
      .multi()
      .hincrby(this.keys.cacheStats(), result === "hit" ? "hits" : result === "miss" ? "misses" : "refused", 1);
    if (bytes > 0) m.hincrby(this.keys.cacheStats(), "bytesSaved", bytes);
    await m.exec().catch(() => undefined);
  }
}
