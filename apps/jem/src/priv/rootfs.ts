import { lstat } from "node:fs/promises";
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
