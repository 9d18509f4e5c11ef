import { readFile, statfs } from "node:fs/promises";
import { execa } from "execa";
import { Dir, removeEntry } from "@ce/sessionfs";
import type { Logger } from "pino";

/**
 * What a pool account's last holder can leave for the next one besides processes, schedules and
 * temp files (scrub.ts): its home directory (a `.bashrc`, `.ssh/authorized_keys`, a planted link),
 * SysV IPC objects (a shared memory segment with data, a message queue) and POSIX message queues.
 * The next holder runs as the same uid and would find them all. Each is removed as root only once
 * every process of the account has ended (scrub.ts), so nothing of the account changes meanwhile.
 */

const errno = (e: unknown) => (e as NodeJS.ErrnoException).code;

/** The home directory passwd names for the account (NSS included), undefined when it has none. */
export async function homeOf(account: string): Promise<string | undefined> {
  const r = await execa("getent", ["passwd", "--", account], { reject: false, timeout: 30_000 });
  const f = String(r.stdout).split("\n")[0]?.split(":");
  if (r.exitCode !== 0 || !f || f.length < 7 || f[0] !== account) return undefined;
  return f[5] || undefined;
}

/**
 * Empties the account's home directory, when it is one: a real directory (the last component is
 * not followed) owned by the uid. Root removes every entry descriptor-relative (@ce/sessionfs,
 * never following a link, a directory moved mid-walk stops the walk), not by path, since the tree
 * is the previous holder's; whatever their owner, since another account may have written into a
 * home left world-writable. The directory itself stays, reset to 0700. A home that is missing,
 * root's, a link or someone else's is left alone: it is not the account's to clean.
 */
export async function emptyHome(home: string | undefined, uid: number, log: Logger): Promise<string[]> {
  if (!home?.startsWith("/") || home === "/") return [];
  let dir: Dir;
  try {
    dir = await Dir.open(home);
  } catch (e) {
    if (["ENOENT", "ENOTDIR", "ELOOP"].includes(errno(e) ?? "")) return [];
    return [`${home}: ${(e as Error).message}`];
  }
  const left: string[] = [];
  try {
    const st = await dir.stat();
    if (!st.isDirectory() || st.uid !== uid) {
      log.info({ home, owner: st.uid, uid }, "pool account's home is not its own directory: not emptied");
      return [];
    }
    for (const name of await dir.entries())
      await removeEntry(dir, name, `${home}/${name}`).catch((e: unknown) => left.push(`${home}/${name}: ${(e as Error).message}`));
    await dir.handle.chmod(0o700);
  } finally {
    await dir.close();
  }
  return left;
}

/** /proc/sysvipc tables: the id column and the ipcrm option of each kind. */
const SYSV = [
  { table: "msg", id: "msqid", opt: "-q", what: "message queue" },
  { table: "sem", id: "semid", opt: "-s", what: "semaphore set" },
  { table: "shm", id: "shmid", opt: "-m", what: "shared memory segment" },
] as const;

/**
 * Removes the SysV IPC objects the account owns or created (an owner may hand an object's `uid`
 * to another account and keep it through `cuid`), read from /proc/sysvipc, with `ipcrm` by id.
 * An id stays the account's until it is removed: only its owner, creator or CAP_SYS_ADMIN may
 * remove it, and no process of the account runs any more.
 */
export async function removeSysvIpc(uid: number, procDir = "/proc/sysvipc"): Promise<string[]> {
  const left: string[] = [];
  for (const k of SYSV) {
    const text = await readFile(`${procDir}/${k.table}`, "utf8").catch(() => "");
    const [head, ...rows] = text.split("\n").filter((l) => l.trim() !== "");
    if (!head) continue;
    const cols = head.trim().split(/\s+/);
    const [iId, iUid, iCuid] = [cols.indexOf(k.id), cols.indexOf("uid"), cols.indexOf("cuid")];
    if (iId < 0 || iUid < 0 || iCuid < 0) {
      left.push(`${procDir}/${k.table}: unexpected columns`);
      continue;
    }
    for (const row of rows) {
      const f = row.trim().split(/\s+/);
      if (Number(f[iUid]) !== uid && Number(f[iCuid]) !== uid) continue;
      const id = f[iId]!;
      if (!/^\d+$/.test(id)) continue;
      const r = await execa("ipcrm", [k.opt, id], { reject: false, timeout: 30_000 });
      // Gone meanwhile (EINVAL/EIDRM) is what we wanted.
      if (r.exitCode !== 0 && !/invalid|removed|not exist/i.test(String(r.stderr)))
        left.push(`${k.what} ${id}: ${String(r.stderr).trim().slice(0, 200)}`);
    }
  }
  return left;
}

/** The mqueue file system's magic (linux/magic.h). */
const MQUEUE_MAGIC = 0x19800202;
let mqueueWarned = false;

/**
 * Removes the account's POSIX message queues: the entries it owns in the mqueue file system
 * (unlinking one is mq_unlink). Queues can only be listed there; where it is not mounted (systemd
 * mounts it at /dev/mqueue) they cannot be seen, which is said once in the log.
 */
export async function removeMqueues(
  mqueueDir: string,
  uid: number,
  log: Logger,
  removeOwned: (path: string, uid: number, depth: number) => Promise<string[]>,
): Promise<string[]> {
  const fs = await statfs(mqueueDir).catch(() => undefined);
  if (fs?.type !== MQUEUE_MAGIC) {
    if (!mqueueWarned)
      log.warn({ mqueueDir }, "no mqueue file system mounted here: a pool account's POSIX message queues cannot be found and removed");
    mqueueWarned = true;
    return [];
  }
  return removeOwned(mqueueDir, uid, 0);
}
