import type { Stats } from "node:fs";
import { opendir, rmdir, unlink } from "node:fs/promises";
import { classify, Dir, errno, openParent, SessionFsError } from "./dir.js";
import { openTarget } from "./open.js";

/**
 * Walks and deletion are iterative and hold one directory descriptor at a time, so a job's
 * 100,000-deep tree neither overflows a stack nor runs out of descriptors. Going back up is an
 * open of `..` relative to the held directory, checked against the device/inode recorded on the
 * way down: if the job moved a directory while we were inside it, `..` is somewhere else and the
 * walk stops with a `race` error instead of acting outside the tree. Per level only a name and
 * an identity are kept (bounded, small memory per level; nothing per file for deletion).
 */

const idOf = (st: Stats) => `${st.dev}:${st.ino}`;
const join = (at: string, name: string) => `${at === "/" ? "" : at}/${name}`;
const swapped = (e: unknown) => errno(e) === "ELOOP" || errno(e) === "ENOTDIR";

async function unlinkIgnoringGone(dir: Dir, name: string, at: string): Promise<void> {
  await unlink(dir.at(name)).catch((e: unknown) => {
    if (errno(e) !== "ENOENT") classify(e, at);
  });
}

/**
 * Removes every non-directory entry of `dir` (unlink never follows a link) and returns the name
 * of one subdirectory left, if any. Entries are streamed, not collected.
 */
async function clearFiles(dir: Dir, at: string): Promise<string | undefined> {
  let sub: string | undefined;
  const it = await opendir(dir.self, { bufferSize: 64 });
  for await (const e of it) {
    if (e.isDirectory()) {
      sub ??= e.name;
      continue;
    }
    try {
      await unlink(dir.at(e.name));
    } catch (err) {
      // EISDIR/EPERM: swapped for a directory since readdir; ENOENT: gone already.
      if (errno(err) === "EISDIR" || errno(err) === "EPERM") sub ??= e.name;
      else if (errno(err) !== "ENOENT") classify(err, join(at, e.name));
    }
  }
  return sub;
}

/** Removes directory `name` of `parent` and everything below it, never following a link. */
async function removeTree(parent: Dir, name: string, at: string): Promise<void> {
  let cur: Dir;
  try {
    cur = await parent.child(name);
  } catch (e) {
    if (swapped(e)) return unlinkIgnoringGone(parent, name, at); // now a link or file: remove that entry
    if (errno(e) === "ENOENT") return;
    return classify(e, at);
  }
  const names: string[] = [name];
  const ids: string[] = [idOf(await cur.stat())];
  try {
    for (;;) {
      const sub = await clearFiles(cur, at);
      if (sub !== undefined) {
        let next: Dir;
        try {
          next = await cur.child(sub);
        } catch (e) {
          if (swapped(e)) await unlinkIgnoringGone(cur, sub, at);
          else if (errno(e) !== "ENOENT") classify(e, at);
          continue;
        }
        const st = await next.stat();
        await cur.close();
        cur = next;
        names.push(sub);
        ids.push(idOf(st));
        continue;
      }
      const done = names.pop()!;
      ids.pop();
      if (names.length === 0) {
        await cur.close();
        await rmdir(parent.at(done)).catch((e: unknown) => {
          if (errno(e) !== "ENOENT") classify(e, at);
        });
        return;
      }
      const up = await cur.child("..");
      const upId = idOf(await up.stat());
      await cur.close();
      cur = up;
      if (upId !== ids[ids.length - 1]) throw new SessionFsError("race", at);
      await rmdir(cur.at(done)).catch((e: unknown) => {
        // ENOTEMPTY: something was added meanwhile; the next round clears it.
        if (errno(e) !== "ENOENT" && errno(e) !== "ENOTEMPTY") classify(e, at);
      });
    }
  } finally {
    await cur.close();
  }
}

/** Deletes entry `name` of an open directory: a file or link is unlinked, a directory removed whole. */
export async function removeEntry(parent: Dir, name: string, at: string): Promise<void> {
  const st = await parent.lstat(name).catch((e: unknown) => classify(e, at));
  if (!st.isDirectory()) return unlinkIgnoringGone(parent, name, at);
  return removeTree(parent, name, at);
}

/**
 * Deletes what the path names: a file or symlink is unlinked (a symlink itself, never its
 * target), a directory is removed without following any symlink inside it. An empty
 * `segments` removes the whole session directory (`root` itself must not be a link).
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
  let cur = t.dir;
  const out: WalkResult = { files: [], refused: [] };
  let seen = 0;
  const read = async (rel: string, id: string): Promise<Level> => {
    const level: Level = { rel, id, pending: [] };
    for (const name of (await cur.entries()).sort().reverse()) {
      if (++seen > maxEntries) throw new SessionFsError("too-large", `/${base}`);
      const r = `${rel}/${name}`;
      const st = await cur.lstat(name).catch(() => undefined);
      if (!st) continue;
      if (st.isDirectory()) level.pending.push(name);
      else if (st.isSymbolicLink()) out.refused.push(new SessionFsError("symlink", `/${r}`));
      else if (!st.isFile()) out.refused.push(new SessionFsError("special", `/${r}`));
      else if (st.nlink > 1) out.refused.push(new SessionFsError("hard-link", `/${r}`));
      else out.files.push(r);
    }
    return level;
  };
  try {
    const stack: Level[] = [await read(base, idOf(t.stat))];
    while (stack.length > 0) {
      const top = stack[stack.length - 1]!;
      const name = top.pending.pop();
      if (name !== undefined) {
        const at = `/${top.rel}/${name}`;
        let next: Dir;
        try {
          next = await cur.child(name);
        } catch (e) {
          if (swapped(e)) out.refused.push(new SessionFsError("symlink", at));
          else if (errno(e) !== "ENOENT") classify(e, at);
          continue;
        }
        await cur.close();
        cur = next;
        stack.push(await read(`${top.rel}/${name}`, idOf(await cur.stat())));
        continue;
      }
      stack.pop();
      const parent = stack[stack.length - 1];
      if (!parent) break;
      const up = await cur.child("..");
      await cur.close();
      cur = up;
      if (idOf(await cur.stat()) !== parent.id) throw new SessionFsError("race", `/${top.rel}`);
    }
  } finally {
    await cur.close();
  }
  out.files.sort();
  return out;
}
