import {
  appendFileSync,
  constants as C,
  existsSync,
  fchmodSync,
  fchownSync,
  fstatSync,
  lstatSync,
  mkdirSync,
  opendirSync,
  readFileSync,
  readSync,
  renameSync,
  statSync,
  unlinkSync,
  writeFileSync,
} from "node:fs";
import { OwnedFd } from "@ce/sessionfs/fd";

/**
 * The file operations of the control directory, run as plain synchronous calls on the file
 * threads (files.ts, file-worker.ts). In the JEM they run as root, and some act inside trees a
 * job's account can write (its batch dir `lrms/`, the `events/` doorbells), so each follows one
 * rule: **the path is split into a directory and a last name; the directory is opened with
 * O_DIRECTORY|O_NOFOLLOW and the name is acted on relative to that descriptor
 * (`/proc/self/fd/<fd>/<name>`, Node having no `openat`), never following a link in the name**.
 * A path handed to an operation may therefore end in one job-writable directory
 * (`<jobdir>/lrms/job.sh`, `events/<id>`), and every directory above that is the CE's (control
 * root, `jobs/`, the fan-out levels, the job dir), which no job can change. Trees of a job (a
 * session, `lrms/` as a whole) are removed by the JEM's priv/rootfs.ts, never here.
 *
 * Each descriptor is opened and closed in the same operation (try/finally), never leaves the
 * thread and is closed once.
 */
export type FsOp =
  /** Whole file as UTF-8 (no link followed); null when missing (ENOENT). */
  | readonly ["read", string]
  /**
   * A regular file with one link, never through a link or a FIFO: its first `max` bytes (or last,
   * `tail`); null when missing, a link, not a regular file, or hard-linked (a job could link a
   * file it may not read into its batch dir, and root would copy it where diagnose serves it).
   */
  | readonly ["readSmall", string, number, boolean]
  /** Whole-file replace: a fresh temporary name (O_EXCL|O_NOFOLLOW), then rename (readers never see half a file). */
  | readonly ["write", string, string, number]
  /** A new file (O_EXCL|O_NOFOLLOW: EEXIST when there is any entry by that name). */
  | readonly ["create", string, string, number]
  /** Appends (O_APPEND: concurrent small appends do not interleave; O_NOFOLLOW). */
  | readonly ["append", string, string, number]
  /** Removes one entry (a link itself, never its target); a missing one is fine. */
  | readonly ["unlink", string]
  /** true when the name resolves to something (stat; an answer only, nothing is acted on). */
  | readonly ["exists", string]
  /** true when there is an entry by that name (lstat: a dangling link counts). */
  | readonly ["lexists", string]
  /**
   * A file owned by uid:gid with `mode`, written under a fresh temporary name (O_EXCL|O_NOFOLLOW:
   * never through a planted link), then renamed over the name.
   */
  | readonly ["writeOwned", string, string, number, number, number]
  /** Mode of a directory (opened without following a link). */
  | readonly ["chmodDir", string, number]
  /** A new directory (EEXIST when there is one) owned by uid:gid with `mode` (setgid bits too). */
  | readonly ["mkdirOwned", string, number, number, number]
  /**
   * An empty directory owned by one of `uids` with no group/other bits, opened without following a
   * link, handed to uid:gid with `mode`: true; anything else is left alone: false.
   */
  | readonly ["ownEmptyDir", string, readonly number[], number, number, number]
  /** true when the path is a directory (not a link) with no entries. */
  | readonly ["isEmptyDir", string]
  /**
   * A new job's directories and files (createJobs, protocol.ts): `dirs` made (recursive, 0700),
   * then under `base` each `files` pair (name, content) created 0600 with O_EXCL, in order. By
   * plain path: every directory is the CE's, made by this call under the CE's roots, and O_EXCL
   * never follows a link. Flat string arrays: a bulk submission's batch is copied to the thread.
   */
  | readonly ["createJob", readonly string[], string, readonly string[]];

export type FsResult = string | boolean | null;

const DIR = C.O_RDONLY | C.O_DIRECTORY | C.O_NOFOLLOW | C.O_NONBLOCK;
const HAVE_PROC_FD = process.platform === "linux" && existsSync("/proc/self/fd");

const errnoOf = (e: unknown) => (e as NodeJS.ErrnoException | undefined)?.code;
const fail = (code: string, message: string) => Object.assign(new Error(message), { code });
const tmpName = (name: string) => `${name}.tmp-${process.pid}-${Math.random().toString(36).slice(2)}`;

/**
 * Runs `fn` with the directory of `path` held open (O_NOFOLLOW) and `at(name)` resolving names in
 * it. Without /proc (not Linux) names fall back to plain paths: still no link followed in the last
 * name, but the directory could be swapped in between (the JEM runs as root on Linux only).
 */
function inDir<T>(path: string, fn: (at: (name: string) => string, name: string) => T): T {
  const slash = path.lastIndexOf("/");
  const dir = slash <= 0 ? "/" : path.slice(0, slash);
  const name = path.slice(slash + 1);
  if (slash < 0 || name === "" || name === "." || name === "..") throw fail("EINVAL", `not a path ending in a file name: ${path}`);
  const fd = OwnedFd.openSync(dir, DIR);
  try {
    return fn((n) => (HAVE_PROC_FD ? `${fd.proc}/${n}` : `${dir}/${n}`), name);
  } finally {
    fd.closeSync();
  }
}

/**
 * `fn` with a descriptor of `path` opened with `flags`, closed once whatever happens. The number
 * is read at each call and never outlives `fn` (packages/sessionfs/src/fd.ts: one owner per descriptor).
 */
function withFd<T>(path: string, flags: number, mode: number | undefined, fn: (fd: number) => T): T {
  const fd = OwnedFd.openSync(path, flags, mode);
  try {
    return fn(fd.num);
  } finally {
    fd.closeSync();
  }
}

/** withFd, but a path that cannot be opened gives `missing` instead of an error. */
function withFdIf<T>(path: string, flags: number, missing: T, fn: (fd: OwnedFd) => T): T {
  let fd: OwnedFd;
  try {
    fd = OwnedFd.openSync(path, flags);
  } catch {
    return missing;
  }
  try {
    return fn(fd);
  } finally {
    fd.closeSync();
  }
}

function readSmall(path: string, max: number, tail: boolean): string | null {
  return inDir(path, (at, name) =>
    withFdIf(at(name), C.O_RDONLY | C.O_NOFOLLOW | C.O_NONBLOCK, null, (fd) => {
      const st = fstatSync(fd.num);
      if (!st.isFile() || st.nlink !== 1) return null;
      const len = Math.min(st.size, max);
      const buf = Buffer.alloc(len);
      const n = len === 0 ? 0 : readSync(fd.num, buf, 0, len, tail ? Math.max(0, st.size - len) : 0);
      return buf.toString("utf8", 0, n);
    }),
  );
}

/** Renames `tmp` over `name`; a failed rename leaves no temporary file behind. */
function replace(at: (n: string) => string, tmp: string, name: string): void {
  try {
    renameSync(at(tmp), at(name));
  } catch (e) {
    try {
      unlinkSync(at(tmp));
    } catch {
      // already gone: nothing to tidy
    }
    throw e;
  }
}

function firstEntry(path: string): boolean {
  const d = opendirSync(path, { bufferSize: 1 });
  try {
    return d.readSync() !== null;
  } finally {
    d.closeSync();
  }
}

const NEW_FILE = C.O_WRONLY | C.O_CREAT | C.O_EXCL | C.O_NOFOLLOW;
// Node's file calls take numeric open flags (its own `stringToFlags` passes numbers through);
// @types/node declares only the string forms. "wx" (O_CREAT|O_EXCL) never follows a link either.
const READ_NOFOLLOW = (C.O_RDONLY | C.O_NOFOLLOW) as unknown as string;
const APPEND_NOFOLLOW = (C.O_WRONLY | C.O_APPEND | C.O_CREAT | C.O_NOFOLLOW) as unknown as string;

/** One operation; throws the system call's error (its `code` kept). */
export function runOp(o: FsOp): FsResult {
  switch (o[0]) {
    case "read":
      try {
        return inDir(o[1], (at, name) => readFileSync(at(name), { encoding: "utf8", flag: READ_NOFOLLOW }));
      } catch (e) {
        if (errnoOf(e) === "ENOENT") return null;
        throw e;
      }
    case "readSmall":
      try {
        return readSmall(o[1], o[2], o[3]);
      } catch (e) {
        if (errnoOf(e) === "ENOENT" || errnoOf(e) === "ENOTDIR") return null;
        throw e;
      }
    case "write":
      return inDir(o[1], (at, name) => {
        const tmp = tmpName(name);
        // `encoding: "utf8"` takes writeFileSync's native path (no descriptor in JavaScript).
        writeFileSync(at(tmp), o[2], { encoding: "utf8", mode: o[3], flag: "wx" });
        replace(at, tmp, name);
        return true;
      });
    case "create":
      return inDir(o[1], (at, name) => {
        writeFileSync(at(name), o[2], { encoding: "utf8", mode: o[3], flag: "wx" });
        return true;
      });
    case "append":
      return inDir(o[1], (at, name) => {
        appendFileSync(at(name), o[2], { encoding: "utf8", mode: o[3], flag: APPEND_NOFOLLOW });
        return true;
      });
    case "unlink":
      try {
        inDir(o[1], (at, name) => unlinkSync(at(name)));
      } catch (e) {
        if (errnoOf(e) !== "ENOENT") throw e;
      }
      return true;
    case "exists":
      try {
        return inDir(o[1], (at, name) => (statSync(at(name)), true));
      } catch {
        return false;
      }
    case "lexists":
      try {
        return inDir(o[1], (at, name) => (lstatSync(at(name)), true));
      } catch {
        return false;
      }
    case "writeOwned":
      return inDir(o[1], (at, name) => {
        const tmp = tmpName(name);
        try {
          withFd(at(tmp), NEW_FILE, 0o600, (fd) => {
            writeFileSync(fd, o[2], "utf8");
            fchownSync(fd, o[3], o[4]);
            fchmodSync(fd, o[5]);
          });
        } catch (e) {
          try {
            unlinkSync(at(tmp));
          } catch {
            // not created
          }
          throw e;
        }
        replace(at, tmp, name);
        return true;
      });
    case "chmodDir":
      return withFd(o[1], DIR, undefined, (fd) => (fchmodSync(fd, o[2]), true));
    case "mkdirOwned":
      return inDir(o[1], (at, name) => {
        // 0700 until handed over: nobody else can enter before the owner and mode are final.
        mkdirSync(at(name), { mode: 0o700 });
        return withFd(at(name), DIR, undefined, (fd) => {
          fchownSync(fd, o[2], o[3]);
          fchmodSync(fd, o[4]);
          return true;
        });
      });
    case "ownEmptyDir":
      return withFdIf(o[1], DIR, false, (fd) => {
        const st = fstatSync(fd.num);
        if (!st.isDirectory() || !o[2].includes(st.uid) || (st.mode & 0o077) !== 0) return false;
        if (firstEntry(HAVE_PROC_FD ? fd.proc : o[1])) return false;
        fchownSync(fd.num, o[3], o[4]);
        fchmodSync(fd.num, o[5]);
        return true;
      });
    case "isEmptyDir":
      return withFdIf(o[1], DIR, false, (fd) => !firstEntry(HAVE_PROC_FD ? fd.proc : o[1]));
    case "createJob":
      for (const dir of o[1]) mkdirSync(dir, { recursive: true, mode: 0o700 });
      // `encoding: "utf8"` takes writeFileSync's native path (open, write, close in one call).
      for (let i = 0; i + 1 < o[3].length; i += 2)
        writeFileSync(`${o[2]}/${o[3][i]!}`, o[3][i + 1]!, { encoding: "utf8", mode: 0o600, flag: "wx" });
      return true;
  }
}

export interface GroupOut {
  res: FsResult[];
  error?: { message: string; code?: string | undefined };
}

/** A group's operations in order, stopping at the first failure (reported with the results so far). */
export function runGroup(ops: readonly FsOp[]): GroupOut {
  const res: FsResult[] = [];
  for (const o of ops) {
    try {
      res.push(runOp(o));
    } catch (e) {
      const err = e as NodeJS.ErrnoException;
      return { res, error: { message: String(err?.message), code: err?.code } };
    }
  }
  return { res };
}
