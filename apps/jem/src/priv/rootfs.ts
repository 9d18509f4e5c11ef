import { constants, type Stats } from "node:fs";
import { lstat, open, readdir } from "node:fs/promises";
import { join } from "node:path";
import { Dir, removeEntry, removePath, SessionFsError } from "@ce/sessionfs";
import type { ControlDir } from "@ce/controldir";

/**
 * The JEM's root file operations on whole trees a job's account can write: its session dir and
 * its batch dir (`<session>.lrms`, beside it). Every deletion starts from a directory
 * of the CE (the session root, a fan-out level, the job dir) opened with O_DIRECTORY|O_NOFOLLOW
 * and goes down by descriptor (@ce/sessionfs `removePath`/`removeEntry`): a link is unlinked,
 * never followed, and a directory the job moves while the deletion is inside it stops the walk
 * (`race`/`not-dir`) instead of sending it elsewhere. A recursive `rm` by path would follow a
 * directory swapped for a link mid-way and delete what the link names, as root.
 *
 * Small single-file operations (control files, batch files, doorbells) run on the file thread:
 * @ce/controldir ops.ts. SECURITY.md "The JEM's root file operations" lists both.
 */

/**
 * Deletion attempts on a tree whose owner moves things under it. A refusal means nothing outside
 * the tree was touched; a fresh walk from the top then removes what the job moved (a link is just
 * unlinked). A job still racing after that keeps its files until the next sweep.
 */
const ATTEMPTS = 3;
const RETRY: ReadonlySet<string> = new Set(["race", "not-dir", "symlink", "missing", "is-dir"]);

const gone = async (path: string) =>
  (await lstat(path).catch((e: unknown) => ((e as NodeJS.ErrnoException).code === "ENOENT" ? undefined : e))) === undefined;

/** `remove` until it succeeds or `path` is gone; refusals from a moving tree are retried from the top. */
async function untilGone(path: string, remove: () => Promise<void>): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await remove();
      return;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === "ENOENT" || (await gone(path))) return;
      if (!(e instanceof SessionFsError && RETRY.has(e.kind)) || attempt >= ATTEMPTS) throw e;
    }
  }
}

/** Removes the tree at `path` (whose parent is the CE's) without following a link; missing is fine. */
export function removeTree(path: string): Promise<void> {
  return untilGone(path, async () => {
    await removePath(path, []);
  });
}

/** The session dir of a job and its batch dir beside it, removed without following any link the job left in them. */
export async function removeSession(control: ControlDir, id: string): Promise<void> {
  await removeTree(control.sessionDir(id));
  await removeTree(control.batchDir(id));
}

/** Every file of a job: its session and batch dir, then its job dir. */
export async function removeJobFiles(control: ControlDir, id: string): Promise<void> {
  await removeSession(control, id);
  await removeTree(control.jobDir(id));
}

/**
 * The job dir reduced to the names in `keep` (expiry's WIPED state): every other entry removed
 * relative to the job dir's descriptor, never through a link (a job dir of an older version held
 * the batch dir `lrms/`, the account's).
 */
export async function reduceJobDir(control: ControlDir, id: string, keep: ReadonlySet<string>): Promise<void> {
  const path = control.jobDir(id);
  let dir: Dir;
  try {
    dir = await Dir.open(path);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return;
    throw e;
  }
  try {
    for (const name of await dir.entries()) {
      if (keep.has(name)) continue;
      await untilGone(`${path}/${name}`, () => removeEntry(dir, name, `/${name}`));
    }
  } finally {
    await dir.close();
  }
}

/**
 * A session dir still private to the CE (the CE's, 0700: never handed to an account, so nothing
 * in it can change under us, and paths in it are safe) handed to `to` with the modes that
 * `chmod -R u+rwX,g+rwX,o-rwx` then setgid give, without starting processes: only when it holds
 * nothing but directories and regular files with one link, all the CE's, at most `max` entries.
 * Anything else returns false (the caller uses the external commands). Deepest entries first, the
 * session dir last: the account can enter only once everything below it is done; each entry is
 * opened without following a link and changed through its descriptor.
 */
export async function handOverPrivateTree(
  dir: string,
  top: Stats,
  to: { uid: number; gid: number },
  ceUids: readonly number[],
  max: number,
): Promise<boolean> {
  if (!ceUids.includes(top.uid) || (top.mode & 0o077) !== 0) return false;
  const entries: Array<{ path: string; dir: boolean }> = [];
  const todo = [dir];
  while (todo.length > 0) {
    const d = todo.pop()!;
    for (const name of await readdir(d)) {
      const path = join(d, name);
      const st = await lstat(path);
      if (!ceUids.includes(st.uid) || entries.length >= max) return false;
      if (st.isDirectory()) todo.push(path);
      else if (!st.isFile() || st.nlink !== 1) return false;
      entries.push({ path, dir: st.isDirectory() });
    }
  }
  for (const e of [...entries.reverse(), { path: dir, dir: true }]) {
    const h = await open(e.path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK | (e.dir ? constants.O_DIRECTORY : 0));
    try {
      const st = await h.stat();
      if (st.isDirectory() !== e.dir || !ceUids.includes(st.uid)) throw new Error(`session ${dir} changed while it was handed over`);
      await h.chown(to.uid, to.gid);
      const perm = st.mode & 0o777;
      await h.chmod(e.dir ? 0o2770 : (perm | 0o660 | (perm & 0o111 ? 0o110 : 0)) & 0o770);
    } finally {
      await h.close();
    }
  }
  return true;
}

/** Directories deeper than this keep their mode (their new files get the account's group). */
const SETGID_DEPTH = 64;
const SETGID_MAX = 100_000;

/**
 * setgid on every directory of a session the account owns (files the job creates get the CE's
 * group). As root, since the kernel drops setgid for an owner outside the group. The tree is the
 * account's and may change while we walk: each directory is opened relative to its parent's
 * descriptor without following a link, and only directories owned by `uid` are changed, never a
 * file (a setgid executable of the CE's group would hand that group to the account).
 */
export async function setgidOwnDirs(root: string, uid: number): Promise<void> {
  let top: Dir;
  try {
    top = await Dir.open(root);
  } catch {
    return;
  }
  // One descriptor per level (bounded by SETGID_DEPTH) and the names still to visit at each.
  const stack: Array<{ dir: Dir; todo: string[] }> = [];
  let seen = 0;
  // Takes `dir`: kept on the stack (closed when its level is done) or closed here.
  const enter = async (dir: Dir): Promise<void> => {
    let kept = false;
    try {
      const st = await dir.stat();
      if (!st.isDirectory() || st.uid !== uid) return;
      await dir.handle.chmod((st.mode & 0o770) | 0o2000);
      const todo = stack.length + 1 < SETGID_DEPTH ? await dir.entries().catch(() => [] as string[]) : [];
      stack.push({ dir, todo });
      kept = true;
    } finally {
      if (!kept) await dir.close();
    }
  };
  try {
    await enter(top);
    while (stack.length > 0 && seen < SETGID_MAX) {
      const level = stack[stack.length - 1]!;
      const name = level.todo.pop();
      if (name === undefined) {
        stack.pop();
        await level.dir.close();
        continue;
      }
      seen++;
      const child = await level.dir.child(name).catch(() => undefined); // a file, a link, or gone
      if (child) await enter(child);
    }
  } finally {
    for (const l of stack) await l.dir.close();
  }
}
