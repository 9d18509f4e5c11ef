import { execFile } from "node:child_process";
import { promisify } from "node:util";

const run = promisify(execFile);

/** A local account as the system's name service (NSS: files, LDAP, sssd) reports it. */
export interface Account {
  account: string;
  uid: number;
  gid: number;
  /** Primary gid first, then the supplementary groups. */
  groups: number[];
}

export interface AccountPolicy {
  /** Accounts below this uid are system accounts. */
  minUid: number;
  /** uids the CE itself runs as (never a mapping target). */
  ceUids: readonly number[];
  /**
   * The CE's own groups: session and batch dirs are shared with it (2770, files g+rw), so a
   * member could read and change every job's files. Never a group of a mapping target.
   */
  ceGids?: readonly number[];
}

/** The CE's own uids: real and effective uid of this process. */
export function ownUids(): number[] {
  return process.getuid && process.geteuid ? [...new Set([process.getuid(), process.geteuid()])] : [];
}

/** The CE's own groups: real and effective gid of this process, and CE_GID when set (the JEM's). */
export function ownGids(): number[] {
  const env = Number(process.env.CE_GID ?? Number.NaN);
  const ids = process.getgid && process.getegid ? [process.getgid(), process.getegid()] : [];
  return [...new Set(Number.isInteger(env) ? [...ids, env] : ids)];
}

/** Why an account may not be a mapping target, or undefined when it may. */
export function accountProblem(a: Account, p: AccountPolicy): string | undefined {
  if (a.uid === 0) return `account ${a.account} is root (uid 0)`;
  if (p.ceUids.includes(a.uid)) return `account ${a.account} (uid ${a.uid}) is the CE's own account`;
  if (a.uid < p.minUid) return `account ${a.account} has uid ${a.uid}, below mapping.minUid ${p.minUid}`;
  if (a.groups.includes(0)) return `account ${a.account} is in the root group (gid 0)`;
  const shared = a.groups.find((g) => p.ceGids?.includes(g));
  if (shared !== undefined)
    return `account ${a.account} is in the CE's own group (gid ${shared}), which shares every job's session and batch directories`;
  return undefined;
}

const CHUNK = 500;

/**
 * Looks accounts up through `getent` (so NSS sources such as LDAP count, not only /etc/passwd):
 * one `getent passwd` and one `getent initgroups` call per 500 names. Names that do not exist are
 * missing from the result.
 */
export async function lookupAccounts(names: readonly string[]): Promise<Map<string, Account>> {
  const out = new Map<string, Account>();
  const unique = [...new Set(names)];
  for (let i = 0; i < unique.length; i += CHUNK) {
    const chunk = unique.slice(i, i + CHUNK);
    // `--` : a name can never be taken as an option.
    for (const line of (await getent(["passwd", "--", ...chunk])).split("\n")) {
      const f = line.split(":");
      if (f.length < 7) continue;
      const uid = Number(f[2]);
      const gid = Number(f[3]);
      if (!chunk.includes(f[0]!) || !Number.isInteger(uid) || !Number.isInteger(gid)) continue;
      out.set(f[0]!, { account: f[0]!, uid, gid, groups: [gid] });
    }
    const found = chunk.filter((n) => out.has(n));
    if (found.length === 0) continue;
    for (const line of (await getent(["initgroups", "--", ...found])).split("\n")) {
      const [name, ...gids] = line.trim().split(/\s+/);
      const a = name ? out.get(name) : undefined;
      if (!a) continue;
      for (const g of gids.map(Number)) if (Number.isInteger(g) && !a.groups.includes(g)) a.groups.push(g);
    }
  }
  return out;
}

async function getent(args: string[]): Promise<string> {
  try {
    return (await run("getent", args, { timeout: 30_000, maxBuffer: 64 * 1024 * 1024 })).stdout;
  } catch (e) {
    // Exit 2: some key was not found; what was found is still on stdout.
    const err = e as { code?: unknown; stdout?: string };
    if (err.code === 2) return err.stdout ?? "";
    throw new Error(`getent ${args[0]} failed: ${(e as Error).message}`);
  }
}
