import { constants, existsSync, type Stats } from "node:fs";
import { lstat, mkdir, open, readdir, rmdir, unlink, type FileHandle } from "node:fs/promises";

/**
 * Symlink-safe access to a job's session directory. The job owns the directory and can plant
 * symlinks, FIFOs, or swap a directory for a symlink while we work (CVE-2023-41914 class of races).
 * So nothing here resolves a user path in one go: every component is opened relative to the
 * already-opened parent directory (an `openat` emulation through `/proc/self/fd/<fd>/<name>`,
 * a magic link that always resolves to the directory we hold, not to whatever the path names
 * now), with O_NOFOLLOW on each component. A symlink anywhere in the path is therefore refused,
 * never followed — for reading, writing, listing and deleting alike.
 */

const { O_RDONLY, O_WRONLY, O_CREAT, O_NOFOLLOW, O_DIRECTORY, O_NONBLOCK } = constants;
// O_NONBLOCK: opening a FIFO the job planted must fail fast, not park a libuv thread forever.
const DIR_FLAGS = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK;

// Without /proc (non-Linux) we fall back to plain paths: still O_NOFOLLOW per component, but racy.
const HAVE_PROC_FD = process.platform === "linux" && existsSync("/proc/self/fd");

export type FsErrorKind = "missing" | "not-dir" | "symlink" | "special" | "is-dir" | "too-long";

/** A refusal with a kind the routes map to 404/409; carries the offending relative path. */
export class SessionFsError extends Error {
  constructor(readonly kind: FsErrorKind, readonly at: string) {
    super(`${kind}: ${at}`);
    this.name = "SessionFsError";
  }
}

/** An open directory handle plus its (informational) path. */
export class Dir {
  private constructor(readonly handle: FileHandle, readonly path: string) {}

  /** Opens a directory by absolute path; the last component must not be a symlink. */
  static async open(path: string): Promise<Dir> {
    return new Dir(await open(path, DIR_FLAGS), path);
  }

  /** Path through which `name` resolves relative to this open directory. */
  at(name: string): string {
    return HAVE_PROC_FD ? `/proc/self/fd/${this.handle.fd}/${name}` : `${this.path}/${name}`;
  }

  /** Opens child directory `name` (never through a symlink). */
  async child(name: string): Promise<Dir> {
    return new Dir(await open(this.at(name), DIR_FLAGS), `${this.path}/${name}`);
  }

  lstat(name: string): Promise<Stats> {
    return lstat(this.at(name));
  }

  async entries(): Promise<string[]> {
    return readdir(HAVE_PROC_FD ? `/proc/self/fd/${this.handle.fd}` : this.path);
  }

  close(): Promise<void> {
    return this.handle.close().catch(() => undefined);
  }
}

function errno(e: unknown): string | undefined {
  return (e as NodeJS.ErrnoException | undefined)?.code;
}

/** Maps an open/lstat failure on component `at` to a SessionFsError (or rethrows). */
function classify(e: unknown, at: string): never {
  switch (errno(e)) {
    case "ENOENT":
      throw new SessionFsError("missing", at);
    case "ELOOP":
      throw new SessionFsError("symlink", at);
    case "ENOTDIR":
      throw new SessionFsError("not-dir", at);
    case "ENXIO":
      throw new SessionFsError("special", at);
    case "EISDIR":
      throw new SessionFsError("is-dir", at);
    case "ENAMETOOLONG":
      throw new SessionFsError("too-long", at);
    default:
      throw e;
  }
}

/**
 * Opens the directory holding the last segment (or the root itself when `segments` is empty,
 * returned as `{ dir: root, name: undefined }`). With `create`, missing intermediate directories
 * are made (PUT creates parents, decisions #14). The caller must close `dir`.
 */
export async function openParent(root: string, segments: readonly string[], create = false): Promise<{ dir: Dir; name: string | undefined }> {
  let dir: Dir;
  try {
    dir = await Dir.open(root);
  } catch (e) {
    if (create && errno(e) === "ENOENT") {
      await mkdir(root, { mode: 0o755 }).catch((err: unknown) => { if (errno(err) !== "EEXIST") throw err; });
      dir = await Dir.open(root).catch((err: unknown) => classify(err, "/"));
    } else classify(e, "/");
  }
  const parents = segments.slice(0, -1);
  try {
    for (let i = 0; i < parents.length; i++) {
      const seg = parents[i]!;
      const at = `/${segments.slice(0, i + 1).join("/")}`;
      let next: Dir;
      try {
        next = await dir.child(seg);
      } catch (e) {
        if (!create || errno(e) !== "ENOENT") await refine(dir, seg, e, at);
        await mkdir(dir.at(seg), { mode: 0o755 }).catch((err: unknown) => { if (errno(err) !== "EEXIST") throw err; });
        next = await dir.child(seg).catch((err: unknown) => classify(err, at));
      }
      await dir.close();
      dir = next;
    }
  } catch (e) {
    await dir.close();
    throw e;
  }
  return { dir, name: segments[segments.length - 1] };
}

/** O_DIRECTORY|O_NOFOLLOW on a symlink says ENOTDIR on Linux; name the symlink for the reason. */
async function refine(dir: Dir, name: string, e: unknown, at: string): Promise<never> {
  if (errno(e) === "ENOTDIR" && (await dir.lstat(name).catch(() => undefined))?.isSymbolicLink()) {
    throw new SessionFsError("symlink", at);
  }
  return classify(e, at);
}

export type Target =
  | { kind: "dir"; dir: Dir; stat: Stats }
  | { kind: "file"; handle: FileHandle; stat: Stats };

/**
 * Opens what the path names for reading: a directory (for listings) or a regular file. Symlinks
 * and special files are reported as `symlink`/`special`, never opened through. Caller closes.
 */
export async function openTarget(root: string, segments: readonly string[]): Promise<Target> {
  const { dir, name } = await openParent(root, segments);
  if (name === undefined) return { kind: "dir", dir, stat: await dir.handle.stat() };
  const at = `/${segments.join("/")}`;
  try {
    const st = await dir.lstat(name).catch((e: unknown) => classify(e, at));
    if (st.isSymbolicLink()) throw new SessionFsError("symlink", at);
    if (st.isDirectory()) {
      const child = await dir.child(name).catch((e: unknown) => classify(e, at));
      return { kind: "dir", dir: child, stat: await child.handle.stat() };
    }
    if (!st.isFile()) throw new SessionFsError("special", at);
    const handle = await open(dir.at(name), O_RDONLY | O_NOFOLLOW | O_NONBLOCK).catch((e: unknown) => classify(e, at));
    const fst = await handle.stat();
    // Re-check on the descriptor: the entry may have been swapped between lstat and open.
    if (!fst.isFile()) {
      await handle.close();
      throw new SessionFsError("special", at);
    }
    return { kind: "file", handle, stat: fst };
  } finally {
    await dir.close();
  }
}

/** Opens (creating parents and the file) a regular file for writing, without truncating. */
export async function openForWrite(root: string, segments: readonly string[]): Promise<FileHandle> {
  const at = `/${segments.join("/")}`;
  const { dir, name } = await openParent(root, segments, true);
  try {
    if (name === undefined) throw new SessionFsError("is-dir", "/");
    const handle = await open(dir.at(name), O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK, 0o644).catch((e: unknown) => classify(e, at));
    const st = await handle.stat();
    if (!st.isFile()) {
      await handle.close();
      throw new SessionFsError(st.isDirectory() ? "is-dir" : "special", at);
    }
    return handle;
  } finally {
    await dir.close();
  }
}

export interface Entry {
  name: string;
  stat: Stats;
}

/**
 * Entries of an open directory, examined with lstat: only regular files and directories,
 * symlinks and special files omitted (as A-REX). Sorted by name for stable output.
 */
export async function listEntries(dir: Dir): Promise<{ files: Entry[]; dirs: Entry[] }> {
  const files: Entry[] = [];
  const dirs: Entry[] = [];
  for (const name of (await dir.entries()).sort()) {
    const stat = await dir.lstat(name).catch(() => undefined); // vanished meanwhile
    if (stat?.isFile()) files.push({ name, stat });
    else if (stat?.isDirectory()) dirs.push({ name, stat });
  }
  return { files, dirs };
}

/**
 * Deletes what the path names: a file or symlink is unlinked (a symlink itself, never its
 * target), a directory is removed recursively without following any symlink inside it.
 * An empty `segments` removes the whole session directory.
 */
export async function removePath(root: string, segments: readonly string[]): Promise<void> {
  if (segments.length === 0) {
    const slash = root.lastIndexOf("/");
    const parent = await Dir.open(root.slice(0, slash) || "/");
    try {
      await removeEntry(parent, root.slice(slash + 1), "/");
    } finally {
      await parent.close();
    }
    return;
  }
  const { dir, name } = await openParent(root, segments);
  try {
    await removeEntry(dir, name!, `/${segments.join("/")}`);
  } finally {
    await dir.close();
  }
}

async function removeEntry(parent: Dir, name: string, at: string): Promise<void> {
  const st = await parent.lstat(name).catch((e: unknown) => classify(e, at));
  if (!st.isDirectory()) {
    await unlink(parent.at(name)).catch((e: unknown) => classify(e, at));
    return;
  }
  let child: Dir;
  try {
    child = await parent.child(name);
  } catch (e) {
    // Swapped for a symlink or file since the lstat: remove that entry itself.
    if (errno(e) === "ELOOP" || errno(e) === "ENOTDIR") return unlink(parent.at(name));
    return classify(e, at);
  }
  try {
    for (const entry of await child.entries()) {
      await removeEntry(child, entry, `${at === "/" ? "" : at}/${entry}`).catch((e: unknown) => {
        if (!(e instanceof SessionFsError && e.kind === "missing")) throw e;
      });
    }
  } finally {
    await child.close();
  }
  await rmdir(parent.at(name)).catch((e: unknown) => classify(e, at));
}
