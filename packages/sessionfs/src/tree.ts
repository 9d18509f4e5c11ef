import { constants, fstatSync, lstatSync, opendirSync, readdirSync, rmdirSync, unlinkSync, type Stats } from "node:fs";
import { classify, Dir, DIR_FLAGS, errno, HAVE_PROC_FD, openParent, SessionFsError } from "./dir.js";
import { OwnedFd } from "./fd.js";
import { openTarget } from "./open.js";

/**
 * Walks and deletion are iterative and hold one directory descriptor at a time, so a job's
 * 100,000-deep tree neither overflows a stack nor runs out of descriptors. Going back up is an
 * open of `..` relative to the held directory, checked against the device/inode recorded on the
 * way down: if the job moved a directory while we were inside it, `..` is somewhere else and the
 * walk stops with a `race` error instead of acting outside the tree. Per level only a name and
 * an identity are kept (nothing per file for deletion).
 *
 * The per-entry system calls are synchronous (a few µs each on a local disk, where an async
 * round trip through the thread pool costs ~60 µs) and the loop yields to the event loop every
 * PACE calls, so a huge tree costs seconds, not minutes, and never stalls other requests long.
 */

const PACE = 64;
/** Rounds of "directory not empty" (the job still writing) before we give up with `race`. */
const MAX_REFILLS = 1_000;

export const idOf = (st: Stats) => `${st.dev}:${st.ino}`;
export const swapped = (e: unknown) => errno(e) === "ELOOP" || errno(e) === "ENOTDIR";

/**
 * A directory held by an owned descriptor; names resolve relative to it. Closed once: the loops
 * below let go of a level before moving on and close whatever is held in a `finally`, which after
 * an early close must not close the number again (another thread may hold it by then).
 */
export class Held {
  private constructor(
    private readonly fd: OwnedFd,
    readonly path: string,
  ) {}
  static open(path: string, display: string): Held {
    return new Held(OwnedFd.openSync(path, DIR_FLAGS, undefined, display), display);
  }
  /** A second descriptor on a directory already held (its /proc magic link needs no O_NOFOLLOW). */
  static of(dir: Dir): Held {
    return new Held(OwnedFd.openSync(dir.self, constants.O_RDONLY | constants.O_DIRECTORY, undefined, dir.path), dir.path);
  }
  at(name: string): string {
    return HAVE_PROC_FD ? `${this.fd.proc}/${name}` : `${this.path}/${name}`;
  }
  get self(): string {
    return HAVE_PROC_FD ? this.fd.proc : this.path;
  }
  child(name: string): Held {
    // The display path only matters without /proc; building it per level would be O(depth²).
    const path = HAVE_PROC_FD ? "" : name === ".." ? this.path.replace(/\/[^/]*$/, "") : `${this.path}/${name}`;
    return Held.open(this.at(name), path);
  }
  id(): string {
    return idOf(fstatSync(this.fd.num));
  }
  /** The descriptor's number, for the system call at hand (fstat, fchown, fchmod). */
  get num(): number {
    return this.fd.num;
  }
  close(): void {
    this.fd.closeSync();
  }
}

let ops = 0;
export const pace = async () => {
  if (++ops % PACE === 0) await new Promise((r) => setImmediate(r));
};

function unlinkIgnoringGone(path: string, at: string): void {
  try {
    unlinkSync(path);
  } catch (e) {
    if (errno(e) !== "ENOENT") classify(e, at);
  }
}

/**
 * Removes every non-directory entry of `dir` (unlink never follows a link) and returns the name
 * of one subdirectory left, if any. Entries are streamed, not collected.
 */
async function clearFiles(dir: Held, at: string, freed?: Freed): Promise<string | undefined> {
  let sub: string | undefined;
  const it = opendirSync(dir.self, { bufferSize: 64 });
  try {
    for (let e = it.readSync(); e !== null; e = it.readSync()) {
      await pace();
      if (e.isDirectory()) {
        sub ??= e.name;
        continue;
      }
      try {
        if (freed && e.isFile()) freed.bytes += lstatSync(dir.at(e.name)).size;
        unlinkSync(dir.at(e.name));
      } catch (err) {
        // EISDIR/EPERM: swapped for a directory since readdir; ENOENT: gone already.
        if (errno(err) === "EISDIR" || errno(err) === "EPERM") sub ??= e.name;
        else if (errno(err) !== "ENOENT") classify(err, at);
      }
    }
  } finally {
    it.closeSync();
  }
  return sub;
}

/** Removes directory `name` of `parent` and everything below it, never following a link. */
async function removeTree(parent: Dir, name: string, at: string, freed?: Freed): Promise<void> {
  let cur: Held;
  try {
    cur = Held.open(parent.at(name), `${parent.path}/${name}`);
  } catch (e) {
    if (swapped(e)) return unlinkIgnoringGone(parent.at(name), at); // now a link or file: remove that entry
    if (errno(e) === "ENOENT") return;
    return classify(e, at);
  }
  const names: string[] = [name];
  const ids: string[] = [cur.id()];
  let refills = 0;
  const rmdirIn = (path: string) => {
    try {
      rmdirSync(path);
    } catch (e) {
      if (errno(e) === "ENOENT") return true;
      // Something was added meanwhile: clear again, a bounded number of times.
      if (errno(e) === "ENOTEMPTY" && ++refills <= MAX_REFILLS) return false;
      classify(e, at);
    }
    return true;
  };
  try {
    for (;;) {
      await pace();
      const sub = await clearFiles(cur, at, freed);
      if (sub !== undefined) {
        let next: Held;
        try {
          next = cur.child(sub);
        } catch (e) {
          if (swapped(e)) unlinkIgnoringGone(cur.at(sub), at);
          else if (errno(e) !== "ENOENT") classify(e, at);
          continue;
        }
        cur.close();
        cur = next;
        names.push(sub);
        ids.push(cur.id());
        continue;
      }
      if (names.length === 1) {
        cur.close();
        if (rmdirIn(parent.at(name))) return;
        cur = Held.open(parent.at(name), `${parent.path}/${name}`);
        if (cur.id() !== ids[0]) throw new SessionFsError("race", at);
        continue;
      }
      const done = names.pop()!;
      ids.pop();
      const up = cur.child("..");
      cur.close();
      cur = up;
      if (cur.id() !== ids[ids.length - 1]) throw new SessionFsError("race", at);
      rmdirIn(cur.at(done));
    }
  } catch (e) {
    if (e instanceof SessionFsError) throw e;
    return classify(e, at);
  } finally {
    cur.close();
  }
}

/**
 * Unlinks entry `name` of an open directory that is not a directory (a file, a link itself, a
 * FIFO), synchronously: for a purge of many files, where an async lstat + unlink per entry costs
 * several times the CPU. "is-dir" when it is (or became) a directory: the caller removes it with
 * `removeEntry`; "gone" when it is not there.
 */
export function unlinkNonDir(dir: Dir, name: string, at: string): "removed" | "gone" | "is-dir" {
  try {
    unlinkSync(dir.at(name));
    return "removed";
  } catch (e) {
    if (errno(e) === "ENOENT") return "gone";
    // EISDIR on Linux, EPERM by POSIX.
    if (errno(e) === "EISDIR" || errno(e) === "EPERM") return "is-dir";
    return classify(e, at);
  }
}

/** Deletes entry `name` of an open directory: a file or link is unlinked, a directory removed whole. */
/** Bytes of the regular files a deletion removed (quota bookkeeping). */
interface Freed {
  bytes: number;
}

export async function removeEntry(parent: Dir, name: string, at: string, freed?: Freed): Promise<void> {
  const st = await parent.lstat(name).catch((e: unknown) => classify(e, at));
  if (!st.isDirectory()) {
    if (freed && st.isFile()) freed.bytes += st.size;
    return unlinkIgnoringGone(parent.at(name), at);
  }
  return removeTree(parent, name, at, freed);
}

/**
 * Deletes what the path names: a file or symlink is unlinked (a symlink itself, never its
 * target), a directory is removed without following any symlink inside it. An empty
 * `segments` removes the whole session directory (`root` itself must not be a link).
 * Returns the bytes of the regular files removed (for the session quota).
 */
export async function removePath(root: string, segments: readonly string[]): Promise<number> {
  const freed: Freed = { bytes: 0 };
  if (segments.length === 0) {
    const slash = root.lastIndexOf("/");
    const parent = await Dir.open(root.slice(0, slash) || "/");
    try {
      await removeEntry(parent, root.slice(slash + 1), "/", freed);
    } finally {
      await parent.close();
    }
    return freed.bytes;
  }
  const { dir, name } = await openParent(root, segments);
  try {
    await removeEntry(dir, name!, `/${segments.join("/")}`, freed);
  } finally {
    await dir.close();
  }
  return freed.bytes;
}

export interface WalkResult {
  /** Regular files with one link, as session-relative paths (`dir/a/b`). */
  files: string[];
  /** Entries that are not delivered: symlinks, special files, hard links. */
  refused: SessionFsError[];
}

interface Level {
  rel: string;
  id: string;
  pending: string[];
}

/**
 * Every regular file under directory `segments`, without following links. Symlinks, special
 * files and hard links are reported in `refused`. More than `maxEntries` entries is refused
 * (a job can create millions of files).
 */
export async function walkFiles(root: string, segments: readonly string[], maxEntries = 100_000): Promise<WalkResult> {
  const base = segments.join("/");
  const t = await openTarget(root, segments);
  if (t.kind === "file") {
    await t.handle.close();
    throw new SessionFsError("not-dir", `/${base}`);
  }
  let cur: Held;
  try {
    cur = Held.of(t.dir);
  } finally {
    await t.dir.close();
  }
  const out: WalkResult = { files: [], refused: [] };
  let seen = 0;
  const read = async (rel: string): Promise<Level> => {
    const level: Level = { rel, id: cur.id(), pending: [] };
    for (const name of readdirSync(cur.self).sort().reverse()) {
      await pace();
      if (++seen > maxEntries) throw new SessionFsError("too-large", `/${base}`);
      const r = `${rel}/${name}`;
      let st: Stats;
      try {
        st = lstatSync(cur.at(name));
      } catch {
        continue; // vanished meanwhile
      }
      if (st.isDirectory()) level.pending.push(name);
      else if (st.isSymbolicLink()) out.refused.push(new SessionFsError("symlink", `/${r}`));
      else if (!st.isFile()) out.refused.push(new SessionFsError("special", `/${r}`));
      else if (st.nlink > 1) out.refused.push(new SessionFsError("hard-link", `/${r}`));
      else out.files.push(r);
    }
    return level;
  };
  try {
    const stack: Level[] = [await read(base)];
    while (stack.length > 0) {
      const top = stack[stack.length - 1]!;
      const name = top.pending.pop();
      if (name !== undefined) {
        const at = `/${top.rel}/${name}`;
        let next: Held;
        try {
          next = cur.child(name);
        } catch (e) {
          if (swapped(e)) out.refused.push(new SessionFsError("symlink", at));
          else if (errno(e) !== "ENOENT") classify(e, at);
          continue;
        }
        cur.close();
        cur = next;
        stack.push(await read(`${top.rel}/${name}`));
        continue;
      }
      stack.pop();
      const parent = stack[stack.length - 1];
      if (!parent) break;
      const up = cur.child("..");
      cur.close();
      cur = up;
      if (cur.id() !== parent.id) throw new SessionFsError("race", `/${top.rel}`);
    }
  } catch (e) {
    if (e instanceof SessionFsError) throw e;
    return classify(e, `/${base}`);
  } finally {
    cur.close();
  }
  out.files.sort();
  return out;
}
