import { constants, fchmodSync, fchownSync, fstatSync, lstatSync, readdirSync, type Stats } from "node:fs";
import { classify, errno, SessionFsError } from "./dir.js";
import { OwnedFd } from "./fd.js";
import { Held, idOf, pace, swapped } from "./tree.js";

/**
 * Hands a session tree to a job's account as root, in process, instead of `chown -R` (issue 33):
 * a recursive chown by root over a tree the job wrote changes whatever the tree's names lead to,
 * and a job can put there a name for a file that is not its own (a hard link to a cached input,
 * or, without fs.protected_hardlinks, to any file of the file system). Here:
 *
 * - every entry is reached relative to a held directory descriptor, never through a link; a
 *   directory is entered with O_DIRECTORY|O_NOFOLLOW and going back up is checked by identity
 *   (the `..` check of tree.ts), so a job moving directories stops the walk (`race`);
 * - only entries owned by the account or by one of `from` (the CE's) are changed; a regular file
 *   owned by someone else than the account with more than one link (a hard link of a file that
 *   lives elsewhere: a cached input, a system file) is skipped, as is anything owned by others;
 * - a file is changed through a descriptor opened with O_NOFOLLOW and checked to be the inode the
 *   listing saw: a name swapped in between is skipped, never acted on;
 * - symbolic links and special files are left as they are (changing a link's owner needs a path
 *   root would resolve at the moment of the call, and nothing needs them to be the account's:
 *   the account owns the directory that holds them);
 * - the session directory itself is changed last, so on a first hand-over the account enters a
 *   tree that is complete.
 *
 * Modes are what `chmod -R u+rwX,g+rwX,o-rwx` and a setgid on every directory give: files ug+rw
 * (ug+x where anyone had x), nothing for others, no setuid/setgid/sticky; directories 2770.
 */

const { O_RDONLY, O_NOFOLLOW, O_NONBLOCK, O_NOCTTY } = constants;
const FILE_FLAGS = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY;
/** Skipped entries named in the report (the count is complete). */
const EXAMPLES = 10;

export interface HandOverOptions {
  uid: number;
  gid: number;
  /** Owners (the CE's accounts, root) whose entries become the account's. */
  from: readonly number[];
  /** Entries walked before the hand-over is refused (`too-large`): a job can create millions. */
  maxEntries: number;
  /** Progress of a long walk (entries so far), for the log: every `progressEvery` (50,000) entries. */
  onProgress?: (walked: number) => void;
  progressEvery?: number;
}

export interface HandOverReport {
  /** Entries looked at. */
  walked: number;
  /** Entries whose owner or mode changed. */
  changed: number;
  /** Files and directories left alone: owned by others, hard links of another's file, swapped meanwhile. */
  skipped: number;
  /** The first few skipped entries (session-relative) with why. */
  examples: string[];
}

const fileMode = (mode: number) => {
  const perm = mode & 0o777;
  return (perm | 0o660 | (perm & 0o111 ? 0o110 : 0)) & 0o770;
};
const DIR_MODE = 0o2770;

interface Level {
  rel: string;
  id: string;
  pending: string[];
}

export async function handOverTree(root: string, o: HandOverOptions): Promise<HandOverReport> {
  const report: HandOverReport = { walked: 0, changed: 0, skipped: 0, examples: [] };
  const ours = (uid: number) => uid === o.uid || o.from.includes(uid);
  const skip = (rel: string, why: string) => {
    report.skipped++;
    if (report.examples.length < EXAMPLES) report.examples.push(`/${rel}: ${why}`);
  };
  /** Owner, group and mode of an open entry made the account's; true when something changed. */
  const give = (fd: number, st: Stats, mode: number) => {
    let changed = false;
    if (st.uid !== o.uid || st.gid !== o.gid) {
      fchownSync(fd, o.uid, o.gid);
      changed = true;
    }
    // After a chown the kernel has dropped setuid/setgid: set the mode whenever the owner changed.
    if (changed || (st.mode & 0o7777) !== mode) {
      fchmodSync(fd, mode);
      changed = true;
    }
    if (changed) report.changed++;
  };

  let cur: Held;
  try {
    cur = Held.open(root, root);
  } catch (e) {
    return classify(e, "/");
  }
  const top = fstatSync(cur.num);
  if (!top.isDirectory() || !ours(top.uid)) {
    cur.close();
    throw new SessionFsError("denied", "/");
  }

  const handFile = (dir: Held, name: string, rel: string, seen: Stats) => {
    if (!ours(seen.uid)) return skip(rel, `owned by uid ${seen.uid}`);
    if (seen.uid !== o.uid && seen.nlink > 1) return skip(rel, `a hard link (${seen.nlink} links) of a file owned by uid ${seen.uid}`);
    let fd: OwnedFd;
    try {
      fd = OwnedFd.openSync(dir.at(name), FILE_FLAGS, undefined, `/${rel}`);
    } catch (e) {
      if (errno(e) === "ENOENT") return; // gone meanwhile
      if (swapped(e) || errno(e) === "ENXIO") return skip(rel, "replaced meanwhile");
      return classify(e, `/${rel}`);
    }
    try {
      const st = fstatSync(fd.num);
      // The inode the listing saw, still a plain file of ours: else the name was swapped, left alone.
      if (idOf(st) !== idOf(seen) || !st.isFile() || !ours(st.uid) || (st.uid !== o.uid && st.nlink > 1))
        return skip(rel, "replaced meanwhile");
      give(fd.num, st, fileMode(st.mode));
    } finally {
      fd.closeSync();
    }
  };

  const read = async (rel: string): Promise<Level> => {
    const level: Level = { rel, id: cur.id(), pending: [] };
    for (const name of readdirSync(cur.self)) {
      await pace();
      if (++report.walked > o.maxEntries) throw new SessionFsError("too-large", `/${rel}`);
      if (o.onProgress && report.walked % (o.progressEvery ?? 50_000) === 0) o.onProgress(report.walked);
      const r = rel ? `${rel}/${name}` : name;
      let st: Stats;
      try {
        st = lstatSync(cur.at(name));
      } catch {
        continue; // gone meanwhile
      }
      if (st.isDirectory()) {
        if (ours(st.uid)) level.pending.push(name);
        else skip(r, `a directory owned by uid ${st.uid}`);
      } else if (st.isFile()) handFile(cur, name, r, st);
    }
    return level;
  };

  try {
    const stack: Level[] = [await read("")];
    while (stack.length > 0) {
      const level = stack[stack.length - 1]!;
      const name = level.pending.pop();
      if (name !== undefined) {
        const rel = level.rel ? `${level.rel}/${name}` : name;
        let next: Held;
        try {
          next = cur.child(name);
        } catch (e) {
          if (errno(e) === "ENOENT") continue;
          if (swapped(e)) {
            skip(rel, "replaced meanwhile");
            continue;
          }
          return classify(e, `/${rel}`);
        }
        const st = fstatSync(next.num);
        if (!ours(st.uid)) {
          next.close();
          skip(rel, `a directory owned by uid ${st.uid}`);
          continue;
        }
        // Pre-order: changed on the way in (the session directory itself comes last).
        give(next.num, st, DIR_MODE);
        cur.close();
        cur = next;
        stack.push(await read(rel));
        continue;
      }
      stack.pop();
      const parent = stack[stack.length - 1];
      if (!parent) break;
      const up = cur.child("..");
      cur.close();
      cur = up;
      if (cur.id() !== parent.id) throw new SessionFsError("race", `/${level.rel}`);
    }
    const st = fstatSync(cur.num);
    if (idOf(st) !== idOf(top)) throw new SessionFsError("race", "/");
    give(cur.num, st, DIR_MODE);
  } catch (e) {
    if (e instanceof SessionFsError) throw e;
    return classify(e, "/");
  } finally {
    cur.close();
  }
  return report;
}
