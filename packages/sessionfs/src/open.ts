import { randomBytes } from "node:crypto";
import { constants, type Stats } from "node:fs";
import { open, rename, unlink, type FileHandle } from "node:fs/promises";
import { classify, Dir, openParent, SessionFsError } from "./dir.js";
import { closeHandle } from "./fd.js";

const { O_RDONLY, O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW, O_NONBLOCK } = constants;

export interface OpenOptions {
  /**
   * Refuse regular files whose link count is above 1. A job can hard-link any file it can reach
   * on the same file system (the host key, another user's output) into its session; the link is
   * indistinguishable from the original, and where the other names live cannot be found cheaply.
   * Jobs have no legitimate need for hard links in what the CE reads on their behalf, so any
   * link count > 1 is refused (fail closed) rather than compared against the rest of the tree.
   */
  refuseHardLinks?: boolean;
}

export type Target = { kind: "dir"; dir: Dir; stat: Stats } | { kind: "file"; handle: FileHandle; stat: Stats };

/** Checks what an open descriptor is (the entry may have been swapped between lstat and open). */
async function checkFile(handle: FileHandle, at: string, o: OpenOptions): Promise<Stats> {
  const st = await handle.stat();
  const bad = !st.isFile()
    ? new SessionFsError(st.isDirectory() ? "is-dir" : "special", at)
    : o.refuseHardLinks && st.nlink > 1
      ? new SessionFsError("hard-link", at)
      : undefined;
  if (bad) {
    await closeHandle(handle, at);
    throw bad;
  }
  return st;
}

/** Opens regular file `name` of an open directory for reading (no symlink, no FIFO/device). */
export async function openFileIn(dir: Dir, name: string, at: string, o: OpenOptions = {}): Promise<{ handle: FileHandle; stat: Stats }> {
  const st = await dir.lstat(name).catch((e: unknown) => classify(e, at));
  if (st.isSymbolicLink()) throw new SessionFsError("symlink", at);
  if (st.isDirectory()) throw new SessionFsError("is-dir", at);
  if (!st.isFile()) throw new SessionFsError("special", at);
  const handle = await open(dir.at(name), O_RDONLY | O_NOFOLLOW | O_NONBLOCK).catch((e: unknown) => classify(e, at));
  return { handle, stat: await checkFile(handle, at, o) };
}

/**
 * Opens what the path names for reading: a directory (for listings) or a regular file. Symlinks
 * and special files are reported as `symlink`/`special`, never opened through. Caller closes.
 */
export async function openTarget(root: string, segments: readonly string[], o: OpenOptions = {}): Promise<Target> {
  const { dir, name } = await openParent(root, segments);
  if (name === undefined) return { kind: "dir", dir, stat: await dir.stat() };
  const at = `/${segments.join("/")}`;
  try {
    const st = await dir.lstat(name).catch((e: unknown) => classify(e, at));
    if (st.isDirectory()) {
      const child = await dir.child(name).catch((e: unknown) => classify(e, at));
      return { kind: "dir", dir: child, stat: await child.stat() };
    }
    return { kind: "file", ...(await openFileIn(dir, name, at, o)) };
  } finally {
    await dir.close();
  }
}

/** Opens a regular file (never a directory) for reading; the stat is from the descriptor. */
export async function openRegular(
  root: string,
  segments: readonly string[],
  o: OpenOptions = {},
): Promise<{ handle: FileHandle; stat: Stats }> {
  const t = await openTarget(root, segments, o);
  if (t.kind === "file") return t;
  await t.dir.close();
  throw new SessionFsError("is-dir", `/${segments.join("/")}`);
}

/** Reads a small regular file whole (e.g. an `@list` output list); larger than `maxBytes` is refused. */
export async function readSmallFile(root: string, segments: readonly string[], maxBytes: number, o: OpenOptions = {}): Promise<Buffer> {
  const { handle, stat } = await openRegular(root, segments, o);
  try {
    if (stat.size > maxBytes) throw new SessionFsError("too-large", `/${segments.join("/")}`);
    const buf = Buffer.alloc(stat.size);
    let off = 0;
    while (off < buf.length) {
      const { bytesRead } = await handle.read(buf, off, buf.length - off, off);
      if (bytesRead === 0) break;
      off += bytesRead;
    }
    return buf.subarray(0, off);
  } finally {
    await closeHandle(handle, `/${segments.join("/")}`);
  }
}

/** Opens (creating parents and the file) a regular file with one link for writing, without truncating. */
export async function openForWrite(root: string, segments: readonly string[]): Promise<FileHandle> {
  const at = `/${segments.join("/")}`;
  const { dir, name } = await openParent(root, segments, true);
  try {
    if (name === undefined) throw new SessionFsError("is-dir", "/");
    const handle = await open(dir.at(name), O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK, 0o644).catch((e: unknown) => classify(e, at));
    // Writing into a hard link would change the file's other names (maybe outside the session).
    await checkFile(handle, at, { refuseHardLinks: true });
    return handle;
  } finally {
    await dir.close();
  }
}

/** Creates a new file `name` in an open directory (O_EXCL: never an existing entry or link). */
export async function createFileIn(dir: Dir, name: string, at: string, mode = 0o644): Promise<FileHandle> {
  return open(dir.at(name), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK, mode).catch((e: unknown) => classify(e, at));
}

/**
 * Replaces file `name` at the top of a session directory atomically: the content goes into a new
 * file of a random name (O_EXCL|O_NOFOLLOW, so never an entry the job planted), which gets its
 * owner and mode through the descriptor and is then renamed over `name`, all relative to the
 * directory held open. A reader sees the old file or the new one, never a part of either; a link
 * or file the job put at `name` is replaced, not followed. For root's writes into a job's session
 * (credential files): `owner` is the job's account.
 */
export async function replaceFileIn(
  root: string,
  name: string,
  content: string | Buffer,
  o: { mode: number; owner?: { uid: number; gid: number } | undefined },
): Promise<void> {
  if (name === "" || name === "." || name === ".." || /[/\0]/.test(name)) throw new SessionFsError("invalid", `/${name}`);
  let dir: Dir;
  try {
    dir = await Dir.open(root);
  } catch (e) {
    return classify(e, "/");
  }
  const tmp = `.${name}.new-${randomBytes(6).toString("hex")}`;
  try {
    const handle = await createFileIn(dir, tmp, `/${tmp}`, 0o600);
    try {
      if (o.owner) await handle.chown(o.owner.uid, o.owner.gid);
      await handle.chmod(o.mode);
      await handle.writeFile(content);
    } catch (e) {
      await closeHandle(handle, `/${tmp}`);
      await unlink(dir.at(tmp)).catch(() => undefined);
      throw e;
    }
    await closeHandle(handle, `/${tmp}`);
    try {
      await rename(dir.at(tmp), dir.at(name));
    } catch (e) {
      await unlink(dir.at(tmp)).catch(() => undefined);
      classify(e, `/${name}`);
    }
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
