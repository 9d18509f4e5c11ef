import { accessSync, constants, lstatSync, type Stats, statfsSync } from "node:fs";
import { dirname, join, resolve, sep } from "node:path";
import type { CompiledConfig } from "@ce/config";
import type { Account } from "@ce/mapping";
import { fatal, octal, type Problem, warning } from "./problem.js";

/** What an account may do to an inode by its mode bits (owner, then group, then other; root is not asked). */
function may(a: Pick<Account, "uid" | "groups">, st: Stats, bit: 4 | 2 | 1): boolean {
  const shift = a.uid === st.uid ? 6 : a.groups.includes(st.gid) ? 3 : 0;
  return ((st.mode >> shift) & bit) !== 0;
}

const statOrUndefined = (p: string) => {
  try {
    return lstatSync(p);
  } catch {
    return undefined;
  }
};

/** `/`, `/var`, `/var/lib`, … `p` (the existing ones). */
function chain(p: string): { path: string; st: Stats }[] {
  const parts = resolve(p).split(sep).filter(Boolean);
  const out: { path: string; st: Stats }[] = [];
  for (let i = 0; i <= parts.length; i++) {
    const path = `/${parts.slice(0, i).join("/")}`;
    const st = statOrUndefined(path);
    if (!st) break;
    out.push({ path, st });
  }
  return out;
}

const names = (accounts: Account[]) => {
  const n = accounts.map((a) => a.account);
  return n.length > 4 ? `${n.slice(0, 4).join(", ")} and ${n.length - 4} more` : n.join(", ");
};

/** One representative per distinct (uid, groups): a pool of 5,000 accounts in one group is a few checks. */
function distinct(accounts: Account[]): Account[] {
  const seen = new Map<string, Account>();
  for (const a of accounts) {
    const k = `${a.uid}:${[...a.groups].sort().join(",")}`;
    if (!seen.has(k)) seen.set(k, a);
  }
  return [...seen.values()];
}

interface Dir {
  path: string;
  key: string;
  /** Mapped accounts must traverse it (their jobs reach files under it by name). */
  traverse: boolean;
  /** What it is for, in the message of a blocked traversal. */
  consequence?: string;
}

/**
 * Control, session and cache directories: none world-writable (nor under a world-writable parent
 * without the sticky bit, where any account could rename it away); the mapped accounts can traverse
 * what their jobs must reach (session root, caches) and can neither write nor list any of them;
 * the control directory is the CE's and no mapped account's.
 */
export function directoryProblems(c: CompiledConfig, accounts: Account[], role?: "gateway" | "jem"): Problem[] {
  const out: Problem[] = [];
  // Nothing shared (lrms.sharedSession false): jobs reach their files over HTTPS from the node, never
  // by path, so the session root and caches may be closed to the accounts (0700 root).
  const byPath = c.lrms.sharedSession !== false;
  const dirs: Dir[] = [
    { path: c.paths.controlDir, key: "paths.controlDir", traverse: false },
    { path: join(c.paths.controlDir, "jobs"), key: "paths.controlDir/jobs", traverse: false },
    { path: c.paths.sessionRoot, key: "paths.sessionRoot", traverse: byPath, consequence: "no job can reach its session directory" },
    ...c.staging.cache.dirs.map((d, i) => ({
      path: d.path,
      key: `staging.cache.dirs[${i}]`,
      traverse: byPath,
      consequence: "every job with a cached input fails (the executable exits with code 1)",
    })),
  ];
  const mapped = distinct(accounts);
  const reported = new Set<string>();
  for (const d of dirs) {
    const links = chain(d.path);
    const own = links.at(-1);
    if (!own || own.path !== resolve(d.path)) continue; // made at first start (ensureRoots, the cache)
    if (!own.st.isDirectory()) {
      out.push(fatal("directories", `${d.path} (${d.key}) is not a directory`, `remove it; the CE creates the directory`));
      continue;
    }
    // World-writable: any local account (every job) could plant or replace files in it.
    if (own.st.mode & 0o002)
      out.push(
        fatal(
          "directories",
          `${d.path} (${d.key}) is world-writable (mode ${octal(own.st.mode)}): every job can create and replace files in it`,
          `chmod o-w ${d.path}${d.key === "paths.controlDir" ? ` (the CE sets 0700)` : d.key === "paths.sessionRoot" ? ` (the CE sets 0711)` : ""}`,
        ),
      );
    for (const l of links.slice(0, -1))
      if (l.st.mode & 0o002 && !(l.st.mode & 0o1000) && !reported.has(l.path)) {
        reported.add(l.path);
        out.push(
          fatal(
            "directories",
            `${l.path}, a parent of ${d.path} (${d.key}), is world-writable without the sticky bit: any account can rename the CE's directory away`,
            `chmod o-w ${l.path} (or chmod +t ${l.path})`,
          ),
        );
      }
    if (d.traverse && mapped.length > 0) {
      // The first component that stops some mapped account, and whom it stops.
      for (const l of links) {
        const stopped = mapped.filter((a) => !may(a, l.st, 1));
        if (stopped.length === 0) continue;
        out.push(
          fatal(
            "directories",
            `${l.path}${l.path === own.path ? "" : `, a parent of ${d.path},`} (${d.key}, mode ${octal(l.st.mode)}, uid ${l.st.uid}) cannot be traversed by the mapped account${stopped.length > 1 ? "s" : ""} ${names(stopped)}: ${d.consequence}`,
            `chmod o+x ${l.path}${l.path === own.path ? ` (0755 for a cache, 0711 for the session root)` : ""}`,
          ),
        );
        break;
      }
    }
    const writers = mapped.filter((a) => a.uid === own.st.uid || may(a, own.st, 2));
    if (writers.length > 0 && !(own.st.mode & 0o002))
      out.push(
        fatal(
          "directories",
          `${d.path} (${d.key}, mode ${octal(own.st.mode)}, uid ${own.st.uid} gid ${own.st.gid}) can be changed by the mapped account${writers.length > 1 ? "s" : ""} ${names(writers)}`,
          `chown it to the CE's account and chmod g-w,o-w ${d.path}`,
        ),
      );
    const listers = mapped.filter((a) => a.uid !== own.st.uid && may(a, own.st, 4) && !writers.includes(a));
    if (listers.length > 0 && !d.key.startsWith("staging"))
      out.push(
        warning(
          "directories",
          `${d.path} (${d.key}, mode ${octal(own.st.mode)}) can be listed by the mapped account${listers.length > 1 ? "s" : ""} ${names(listers)}: a job sees every other job's id`,
          `chmod ${d.key.startsWith("paths.controlDir") ? "0700" : "0711"} ${d.path}`,
        ),
      );
  }
  // The gateway makes every job's directories under control/jobs: it must write there (a
  // directory the root JEM made first is root's).
  if (role === "gateway") {
    for (const dir of [c.paths.controlDir, join(c.paths.controlDir, "jobs")]) {
      try {
        accessSync(dir, constants.W_OK | constants.X_OK);
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== "EACCES") continue;
        out.push(
          fatal(
            "directories",
            `${dir} (paths.controlDir) is not writable by the gateway's account (uid ${process.getuid?.()}): no job can be created`,
            `chown the gateway's account (ce) ${dir}`,
          ),
        );
        break;
      }
    }
  }
  return out;
}

/** Free space on the file systems of the control, session and cache directories against the cache watermarks. */
export function diskProblems(c: CompiledConfig): Problem[] {
  const out: Problem[] = [];
  const high = c.staging.cache.highWatermarkPercent;
  const seen = new Set<string>();
  for (const [path, key] of [
    [c.paths.controlDir, "paths.controlDir"],
    [c.paths.sessionRoot, "paths.sessionRoot"],
    ...c.staging.cache.dirs.map((d, i) => [d.path, `staging.cache.dirs[${i}]`] as const),
  ] as const) {
    // The nearest existing directory: a directory made at first start is on its parent's file system.
    let at = resolve(path);
    while (!statOrUndefined(at) && at !== "/") at = dirname(at);
    let fs;
    try {
      fs = statfsSync(at);
    } catch {
      continue;
    }
    const id = `${fs.type}:${fs.blocks}:${fs.bfree}`;
    if (seen.has(id)) continue;
    seen.add(id);
    const used = fs.blocks > 0 ? (100 * (fs.blocks - fs.bavail)) / fs.blocks : 0;
    const free = Math.floor((fs.bavail * fs.bsize) / 1024 ** 2);
    if (used >= high)
      out.push(
        warning(
          "disk",
          `the file system of ${path} (${key}) is ${used.toFixed(0)}% full (${free} MiB free), above staging.cache.highWatermarkPercent ${high}%`,
          `free space there (ceadm cache clean, a shorter jobs.sessionLifetimeSeconds) or grow the file system`,
        ),
      );
  }
  return out;
}
