import { Failure } from "@ce/model";
import { randomBytes } from "node:crypto";
import { constants, type Stats } from "node:fs";
import { chmod, link, lstat, mkdir, open, opendir, readFile, rename, symlink, unlink, utimes, writeFile } from "node:fs/promises";
import { dirname } from "node:path";
import { pipeline } from "node:stream/promises";
import { createFileIn, Dir } from "@ce/sessionfs";
import { removeTree } from "./rootfs.js";

/**
 * The JEM's root file operations on the input cache (docs/cache.md, SECURITY.md "The input
 * cache"). A cache directory is the CE's: `<dir>` (0711), `data/<2 hex>/` and `tmp/` (0700, root
 * only), `joblinks/` (0711). No job can write any of them, so names in them are safe to use as
 * paths, and each level is still checked at start (a directory, not a link, owned by the JEM, no
 * group/other write), `joblinks/<job id>/` included (root's, 0711: the job reads its inputs
 * through it and changes nothing in it, see linkForJob). It is still removed with the descriptor
 * walk of rootfs.ts: an older JEM made it the account's.
 *
 * Cached files are the JEM's (root's), 0644, written under a temporary name in `tmp/`, fsynced,
 * then renamed into `data/`: a reader never sees half a file, a crash leaves only a temporary.
 */

const DIR_MODE = 0o711;
const PRIVATE = 0o700;
const NOFOLLOW_READ = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;

export class CacheDirError extends Failure<"CACHE_DIR_UNUSABLE"> {
  constructor(
    readonly path: string,
    reason: string,
  ) {
    super("CACHE_DIR_UNUSABLE", `cache directory ${path}: ${reason}`);
  }
}

const errnoOf = (e: unknown) => (e as NodeJS.ErrnoException | undefined)?.code;

/** A directory of the CE: no link, ours, nobody else may write it. */
function checkOwn(path: string, st: Stats, uid: number): void {
  if (st.isSymbolicLink()) throw new CacheDirError(path, "is a symbolic link");
  if (!st.isDirectory()) throw new CacheDirError(path, "is not a directory");
  if (st.uid !== uid) throw new CacheDirError(path, `is owned by uid ${st.uid}, not the JEM's ${uid}`);
  if ((st.mode & 0o022) !== 0) throw new CacheDirError(path, `is writable by group or others (mode ${(st.mode & 0o7777).toString(8)})`);
}

async function ensureDir(path: string, mode: number, uid: number): Promise<void> {
  await mkdir(path, { mode }).catch((e: unknown) => {
    if (errnoOf(e) !== "EEXIST") throw e;
  });
  const st = await lstat(path);
  checkOwn(path, st, uid);
  if ((st.mode & 0o777) !== mode) await chmod(path, mode);
}

/**
 * Makes (writable) or checks (readonly) a cache directory's layout. Every ancestor must be a
 * directory nobody but root (or the JEM) can change, or a sticky one: a swapped ancestor would
 * send root's writes elsewhere.
 */
export async function prepareCacheDir(path: string, readonly: boolean): Promise<void> {
  const uid = process.geteuid?.() ?? 0;
  for (let d = dirname(path); ; d = dirname(d)) {
    const st = await lstat(d);
    if (st.isSymbolicLink() || (st.uid !== 0 && st.uid !== uid) || ((st.mode & 0o022) !== 0 && (st.mode & 0o1000) === 0)) {
      throw new CacheDirError(path, `its parent ${d} can be changed by others`);
    }
    if (d === dirname(d)) break;
  }
  if (readonly) {
    const st = await lstat(`${path}/data`).catch(() => undefined);
    if (!st?.isDirectory()) throw new CacheDirError(path, "has no data directory");
    return;
  }
  await mkdir(path, { recursive: true, mode: DIR_MODE }).catch(() => undefined);
  checkOwn(path, await lstat(path), uid);
  await ensureDir(`${path}/data`, PRIVATE, uid);
  await ensureDir(`${path}/tmp`, PRIVATE, uid);
  await ensureDir(`${path}/joblinks`, DIR_MODE, uid);
}

export const dataPath = (root: string, hash: string) => `${root}/data/${hash.slice(0, 2)}/${hash}`;
const metaPath = (root: string, hash: string) => `${dataPath(root, hash)}.meta`;

/** What the cache knows of a stored URL, kept beside the data. */
export interface CacheMeta {
  /** The URL without credentials or options (for listings). */
  url: string;
  size: number;
  etag?: string | undefined;
  lastModified?: string | undefined;
  stored: number;
}

export interface CacheEntry {
  root: string;
  hash: string;
  size: number;
  /** Links to the data file: 1 = no unfinished job uses it. */
  nlink: number;
  /** Time of the last use (the meta file's mtime). */
  lastUse: number;
  meta: CacheMeta | undefined;
}

/** The stored file of `hash` in `root`, undefined when there is none. */
export async function findEntry(root: string, hash: string): Promise<CacheEntry | undefined> {
  const st = await lstat(dataPath(root, hash)).catch(() => undefined);
  if (!st?.isFile()) return undefined;
  const m = await lstat(metaPath(root, hash)).catch(() => undefined);
  const meta = m?.isFile()
    ? await readFile(metaPath(root, hash), "utf8")
        .then((t) => JSON.parse(t) as CacheMeta)
        .catch(() => undefined)
    : undefined;
  return { root, hash, size: st.size, nlink: st.nlink, lastUse: m?.mtimeMs ?? st.mtimeMs, meta };
}

/** Marks a use (the cleaner removes the least recently used first). */
export async function touchEntry(root: string, hash: string): Promise<void> {
  const now = new Date();
  await utimes(metaPath(root, hash), now, now).catch(() => undefined);
}

/** The held `tmp/` of a writable cache dir: downloads land there first. */
export function openTemp(root: string): Promise<Dir> {
  return Dir.open(`${root}/tmp`);
}

/** Removes what a crashed download of `hash` left in `tmp/` (only the lease holder calls this). */
export async function removeTemps(root: string, hash: string, olderThanMs = 0): Promise<number> {
  let n = 0;
  const d = await opendir(`${root}/tmp`);
  for await (const e of d) {
    // A `.ce-part-*` name does not say whose download it is: with a hash given it may be another
    // URL's download running now, so only the cleaner (no hash, by age) removes those.
    if (hash && e.name !== hash && !e.name.startsWith(`${hash}.`)) continue;
    const p = `${root}/tmp/${e.name}`;
    const st = await lstat(p).catch(() => undefined);
    if (!st || Date.now() - st.mtimeMs < olderThanMs) continue;
    if (
      await unlink(p).then(
        () => true,
        () => false,
      )
    )
      n++;
  }
  return n;
}

/**
 * A finished download becomes the cached file: data and meta fsynced, meta renamed first, then the
 * data (its presence is what makes the entry), then the directory fsynced.
 */
export async function commitEntry(root: string, hash: string, tmpName: string, meta: CacheMeta): Promise<void> {
  const tmp = `${root}/tmp/${tmpName}`;
  const fh = await open(tmp, NOFOLLOW_READ);
  try {
    const st = await fh.stat();
    if (!st.isFile() || st.nlink !== 1) throw new CacheDirError(root, `temporary ${tmpName} is not a plain file`);
    // Every cached file is the JEM's, 0644, whoever wrote the download: no account may change it.
    if (process.geteuid?.() === 0 && (st.uid !== 0 || st.gid !== 0)) await fh.chown(0, 0);
    if ((st.mode & 0o7777) !== 0o644) await fh.chmod(0o644);
    await fh.sync();
  } finally {
    await fh.close();
  }
  const dir = dirname(dataPath(root, hash));
  await mkdir(dir, { mode: PRIVATE }).catch((e: unknown) => {
    if (errnoOf(e) !== "EEXIST") throw e;
  });
  const metaTmp = `${root}/tmp/${tmpName}.meta`;
  await writeFile(metaTmp, JSON.stringify(meta), { mode: 0o600, flag: "wx" });
  const mh = await open(metaTmp, NOFOLLOW_READ);
  await mh.sync().finally(() => mh.close());
  await rename(metaTmp, metaPath(root, hash));
  await rename(tmp, dataPath(root, hash));
  const dh = await open(dir, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
  await dh
    .sync()
    .catch(() => undefined)
    .finally(() => dh.close());
}

/**
 * A hard link of the cached file in `joblinks/<job id>/<hash>.<random>`; returns its path (what
 * the session's symbolic link names). `joblinks/<job id>` is root's, 0711: the account reaches the
 * link through it but can neither list the directory nor rename, remove or add a name in it, so no
 * name of the cached file ever moves into a tree the job owns (where a later hand-over of that
 * tree would act on it), and a job's link cannot pin the entry beyond the job's life. Other
 * accounts could traverse the directory too: the random part of the name (128 bits, known only to
 * whoever can read the job's session) keeps them from reading a file the origin did not serve
 * them. A directory left by an older JEM (the account's, 0700) is taken over by descriptor.
 * ENOENT: the cached file went meanwhile (the cleaner); the caller looks again.
 */
export async function linkForJob(root: string, hash: string, jobId: string): Promise<string> {
  const links = await Dir.open(`${root}/joblinks`);
  let jd: Dir;
  try {
    await mkdir(links.at(jobId), { mode: DIR_MODE }).catch((e: unknown) => {
      if (errnoOf(e) !== "EEXIST") throw e;
    });
    jd = await links.child(jobId);
  } finally {
    await links.close();
  }
  try {
    const uid = process.geteuid?.() ?? 0;
    const st = await jd.stat();
    if (st.uid !== uid || (uid === 0 && st.gid !== 0)) await jd.handle.chown(uid, uid === 0 ? 0 : st.gid);
    if ((st.mode & 0o7777) !== DIR_MODE) await jd.handle.chmod(DIR_MODE);
    const name = `${hash}.${randomBytes(16).toString("hex")}`;
    await link(dataPath(root, hash), jd.at(name));
    return `${root}/joblinks/${jobId}/${name}`;
  } finally {
    await jd.close();
  }
}

/** The cache's name (hash) of a link in `joblinks/<job id>/` (`<hash>.<random>`, or `<hash>` of an older JEM). */
export const hashOfLink = (name: string): string => name.split(".", 1)[0]!;

/** Where a session file lands: an entry of a held session directory (as staging/http.ts). */
export interface SessionPlace {
  dir: Dir;
  name: string;
  at: string;
}

const partName = () => `.ce-part-${process.pid}-${Math.random().toString(36).slice(2, 10)}`;

/** A symbolic link `name -> target` in the held session directory, replacing any entry atomically. */
export async function symlinkInto(place: SessionPlace, target: string): Promise<void> {
  const part = partName();
  await symlink(target, place.dir.at(part));
  try {
    await rename(place.dir.at(part), place.dir.at(place.name));
  } catch (e) {
    await unlink(place.dir.at(part)).catch(() => undefined);
    throw e;
  }
}

/** A private copy of the cached file in the held session directory (O_EXCL temporary, then rename). */
export async function copyInto(place: SessionPlace, root: string, hash: string, mode: number): Promise<number> {
  const src = await open(dataPath(root, hash), NOFOLLOW_READ).catch((e: unknown) => {
    throw errnoOf(e) === "ENOENT" ? Object.assign(new Error("cached file removed"), { code: "ENOENT" }) : e;
  });
  const part = partName();
  try {
    const st = await src.stat();
    if (!st.isFile()) throw new CacheDirError(root, `${hash} is not a regular file`);
    const out = await createFileIn(place.dir, part, place.at, mode);
    await pipeline(src.createReadStream({ start: 0, autoClose: false }), out.createWriteStream());
    await rename(place.dir.at(part), place.dir.at(place.name));
    return st.size;
  } catch (e) {
    await unlink(place.dir.at(part)).catch(() => undefined);
    throw e;
  } finally {
    await src.close();
  }
}

/** Every stored entry, one at a time (streamed directory reads: no list of all in memory). */
export async function* walkEntries(root: string): AsyncGenerator<CacheEntry> {
  const top = await opendir(`${root}/data`).catch(() => undefined);
  if (!top) return;
  for await (const sub of top) {
    if (!sub.isDirectory() || !/^[0-9a-f]{2}$/.test(sub.name)) continue;
    const d = await opendir(`${root}/data/${sub.name}`).catch(() => undefined);
    if (!d) continue;
    for await (const e of d) {
      if (!e.isFile() || e.name.endsWith(".meta")) continue;
      const st = await lstat(`${root}/data/${sub.name}/${e.name}`).catch(() => undefined);
      if (!st?.isFile()) continue;
      const m = await lstat(`${root}/data/${sub.name}/${e.name}.meta`).catch(() => undefined);
      yield { root, hash: e.name, size: st.size, nlink: st.nlink, lastUse: m?.mtimeMs ?? st.mtimeMs, meta: undefined };
    }
  }
}

/**
 * Removes a stored entry unless a job not yet finished links it (`inUse`, from the jobs' link
 * directories, checked together with the link count right before the unlink). Another name of
 * the file elsewhere (an older JEM let a job move its link into its session) does not keep it:
 * removing the name in `data/` never takes a file from anyone, it only stops handing it out.
 * Returns the bytes it no longer holds (0 when kept).
 */
export async function removeEntryIfUnused(root: string, hash: string, inUse: ReadonlySet<string>): Promise<number> {
  const st = await lstat(dataPath(root, hash)).catch(() => undefined);
  if (!st?.isFile() || (st.nlink > 1 && inUse.has(hash))) return 0;
  await unlink(dataPath(root, hash)).catch(() => undefined);
  await unlink(metaPath(root, hash)).catch(() => undefined);
  return st.size;
}

/** The cache names (hashes) a job's link directory holds links of. */
export async function jobLinkHashes(root: string, jobId: string): Promise<string[]> {
  const d = await opendir(`${root}/joblinks/${jobId}`).catch(() => undefined);
  if (!d) return [];
  const out: string[] = [];
  for await (const e of d) out.push(hashOfLink(e.name));
  return out;
}

/** Names in `joblinks/`, streamed. */
export async function* jobLinkDirs(root: string): AsyncGenerator<string> {
  const d = await opendir(`${root}/joblinks`).catch(() => undefined);
  if (!d) return;
  for await (const e of d) yield e.name;
}

/** A finished job's links (a tree its account could write: removed by the descriptor walk). */
export function removeJobLinks(root: string, jobId: string): Promise<void> {
  return removeTree(`${root}/joblinks/${jobId}`);
}
