import { Failure } from "@ce/model";
import { constants, existsSync, type Stats } from "node:fs";
import { lstat, mkdir, open, readdir, type FileHandle } from "node:fs/promises";
import { closeHandle, numOf } from "./fd.js";

/**
 * Symlink-safe access to a job's session directory. The job owns the directory and can plant
 * symlinks, FIFOs, hard links, or swap a directory for a symlink while we work (CVE-2023-41914
 * class of races). So nothing here resolves a user path in one go: every component is opened
 * relative to the already-opened parent directory (an `openat` emulation through
 * `/proc/self/fd/<fd>/<name>`, a magic link that always resolves to the directory we hold, not
 * to whatever the path names now), with O_NOFOLLOW on each component.
 */

const { O_RDONLY, O_DIRECTORY, O_NOFOLLOW, O_NONBLOCK } = constants;
// O_NONBLOCK: opening a FIFO the job planted must fail fast, not park a libuv thread forever.
export const DIR_FLAGS = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK;

// Without /proc (non-Linux) we fall back to plain paths: still O_NOFOLLOW per component, but racy.
export const HAVE_PROC_FD = process.platform === "linux" && existsSync("/proc/self/fd");

export type FsErrorKind =
  | "missing"
  | "not-dir"
  | "symlink"
  | "special"
  | "is-dir"
  | "too-long"
  /** A regular file with more than one link: it may be a link to a file outside the session. */
  | "hard-link"
  /** The tree changed under a walk (a directory moved or swapped); we stopped instead of guessing. */
  | "race"
  | "too-large"
  /** Not a usable session-relative name (empty, `.`, `..`, NUL). */
  | "invalid"
  /** The job (its owner) took the CE's access away (chmod): refused, named, never a crash. */
  | "denied";

const REASONS: Record<FsErrorKind, string> = {
  missing: "no such file or directory",
  "not-dir": "a path component is not a directory",
  symlink: "it is or passes through a symbolic link, which is never followed",
  special: "not a regular file",
  "is-dir": "it is a directory",
  "too-long": "path too long",
  "hard-link": "it is a hard link (link count > 1), which may name a file outside the session",
  race: "the directory changed while it was being walked",
  "too-large": "too large",
  invalid: "not a valid name inside the session directory",
  denied: "permission denied (the job's files are not accessible to the CE group)",
};

/** A refusal with a kind callers map to a status or an error line; `at` is the relative path. */
export class SessionFsError extends Failure<"SESSION_FS"> {
  constructor(
    readonly kind: FsErrorKind,
    readonly at: string,
  ) {
    super("SESSION_FS", `${kind}: ${at}`);
  }

  /** Human reason for an error file, e.g. "/out: it is or passes through a symbolic link, …". */
  get reason(): string {
    return `${this.at}: ${REASONS[this.kind]}`;
  }
}

/** An open directory handle plus its (informational) path; `at`/`self` throw once it is closed. */
export class Dir {
  private constructor(
    readonly handle: FileHandle,
    readonly path: string,
  ) {}

  /** Opens a directory by absolute path; the last component must not be a symlink. */
  static async open(path: string): Promise<Dir> {
    return new Dir(await open(path, DIR_FLAGS), path);
  }

  /** Path through which `name` resolves relative to this open directory. */
  at(name: string): string {
    return HAVE_PROC_FD ? `/proc/self/fd/${numOf(this.handle, this.path)}/${name}` : `${this.path}/${name}`;
  }

  /** The directory itself, as a path that names what we hold. */
  get self(): string {
    return HAVE_PROC_FD ? `/proc/self/fd/${numOf(this.handle, this.path)}` : this.path;
  }

  /** Opens child directory `name` (never through a symlink). */
  async child(name: string): Promise<Dir> {
    return new Dir(await open(this.at(name), DIR_FLAGS), name === ".." ? this.path.replace(/\/[^/]*$/, "") : `${this.path}/${name}`);
  }

  lstat(name: string): Promise<Stats> {
    return lstat(this.at(name));
  }

  stat(): Promise<Stats> {
    return this.handle.stat();
  }

  async entries(): Promise<string[]> {
    return readdir(this.self);
  }

  /** Closes the directory (once; a second call does nothing). EBADF throws `FdStolenError`. */
  close(): Promise<void> {
    return closeHandle(this.handle, this.path);
  }
}

export function errno(e: unknown): string | undefined {
  return (e as NodeJS.ErrnoException | undefined)?.code;
}

/** Maps an open/lstat failure on component `at` to a SessionFsError (or rethrows). */
export function classify(e: unknown, at: string): never {
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
    case "ENOTEMPTY":
      throw new SessionFsError("race", at);
    case "EACCES":
    case "EPERM":
      throw new SessionFsError("denied", at);
    default:
      throw e;
  }
}

/** O_DIRECTORY|O_NOFOLLOW on a symlink says ENOTDIR on Linux; name the symlink for the reason. */
export async function refine(dir: Dir, name: string, e: unknown, at: string): Promise<never> {
  if (errno(e) === "ENOTDIR" && (await dir.lstat(name).catch(() => undefined))?.isSymbolicLink()) {
    throw new SessionFsError("symlink", at);
  }
  return classify(e, at);
}

const ignoreExists = (err: unknown) => {
  if (errno(err) !== "EEXIST") throw err;
};

/**
 * Opens the directory holding the last segment (or the root itself when `segments` is empty,
 * returned as `{ dir: root, name: undefined }`). With `create`, missing intermediate directories
 * are made (PUT creates parents, decisions #14). The session root itself is never made: a deleted
 * one would come back with the creator's owner and mode (root's, world-readable), not the mapped
 * account's, so it stays missing ("missing" at "/"). The caller must close `dir`.
 */
export async function openParent(
  root: string,
  segments: readonly string[],
  create = false,
): Promise<{ dir: Dir; name: string | undefined }> {
  let dir: Dir;
  try {
    dir = await Dir.open(root);
  } catch (e) {
    return classify(e, "/");
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
        await mkdir(dir.at(seg), { mode: 0o755 }).catch(ignoreExists);
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

/** Splits a session-relative name into segments; refuses `.`, `..`, empty and NUL components. */
export function segmentsOf(name: string): string[] {
  const segs = name.split("/").filter((s) => s !== "");
  if (segs.length === 0 || segs.some((s) => s === "." || s === ".." || s.includes("\0")))
    throw new SessionFsError("invalid", `/${name.replace(/^\/+/, "")}`);
  return segs;
}
