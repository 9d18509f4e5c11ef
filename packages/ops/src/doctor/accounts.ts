import { execFile } from "node:child_process";
import { readFileSync, statSync } from "node:fs";
import { promisify } from "node:util";
import type { CompiledConfig } from "@ce/config";
import { type Account, accountProblem, lookupAccounts, ownGids, ownUids, parseGridMap, poolAccounts } from "@ce/mapping";
import { fatal, type Problem, warning } from "./problem.js";

const run = promisify(execFile);

/** Where each mapped account is named (`mapping.rules[2] "atlas"`), for messages. */
function namedAccounts(c: CompiledConfig, problems: Problem[]): Map<string, string> {
  const where = new Map<string, string>();
  const m = c.mapping;
  if (!m) return where;
  const add = (name: string, at: string) => void (where.has(name) || where.set(name, at));
  m.rules.forEach((r, i) => {
    const at = `mapping.rules[${i}]${r.name ? ` "${r.name}"` : ""}`;
    if (r.user) add(r.user, at);
    if (r.pool) for (const a of poolAccounts(r.pool)) add(a, `${at} pool`);
    if (r.gridmap) {
      try {
        for (const e of parseGridMap(readFileSync(r.gridmap, "utf8")).entries.values())
          for (const a of e.accounts) add(a, `${at} grid-mapfile ${r.gridmap}`);
      } catch (e) {
        problems.push(
          fatal(
            "accounts",
            `${at}: cannot read the grid-mapfile ${r.gridmap}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`,
            `install ${r.gridmap} or remove the rule`,
          ),
        );
      }
    }
  });
  if (typeof m.onNoMatch === "object") add(m.onNoMatch.user, "mapping.onNoMatch");
  return where;
}

/** Account names listed more than once with different uids by the name service (files and LDAP disagreeing, say). */
async function ambiguousNames(names: Set<string>): Promise<Map<string, number[]>> {
  const uids = new Map<string, Set<number>>();
  try {
    const { stdout } = await run("getent", ["passwd"], { timeout: 30_000, maxBuffer: 256 * 1024 * 1024 });
    for (const line of stdout.split("\n")) {
      const [name, , uid] = line.split(":");
      if (!name || !names.has(name)) continue;
      const s = uids.get(name) ?? new Set<number>();
      s.add(Number(uid));
      uids.set(name, s);
    }
  } catch {
    // An NSS source that refuses enumeration: the per-name lookups above are all there is.
  }
  return new Map([...uids].filter(([, s]) => s.size > 1).map(([n, s]) => [n, [...s]]));
}

/**
 * Every account the mapping names (fixed, pools, `onNoMatch`, grid-mapfiles) exists, with one uid,
 * and is a permitted target (not root, not the CE's own, not below minUid). Returns the accounts
 * found, for the directory checks.
 */
export async function accountProblems(c: CompiledConfig, role?: "gateway" | "jem"): Promise<{ problems: Problem[]; accounts: Account[] }> {
  const problems: Problem[] = [];
  // Mapping off means jobs run as the JEM's own account: for a JEM as root (the package's unit),
  // as root. The developer mode (`./ce start` not as root) runs them as the developer.
  // CE_DEV_MAPPING=off is the explicit developer opt-in for exactly that (docs/security.md).
  if (!c.mapping && role !== "gateway" && process.getuid?.() === 0 && process.env.CE_DEV_MAPPING !== "off")
    problems.push(
      fatal(
        "accounts",
        "mapping is not configured and this runs as root: every job would run as root",
        'configure mapping (rules to the local accounts jobs run as; docs/operations.md "Accounts and VOs")',
      ),
    );
  const where = namedAccounts(c, problems);
  if (where.size === 0) return { problems, accounts: [] };
  const found = await lookupAccounts([...where.keys()]);
  const missing = [...where.keys()].filter((n) => !found.has(n));
  // Grouped by where they are named: a pool of 500 missing accounts is one line, not 500.
  const byPlace = new Map<string, string[]>();
  for (const n of missing) byPlace.set(where.get(n)!, [...(byPlace.get(where.get(n)!) ?? []), n]);
  for (const [at, names] of byPlace) {
    const list = names.length > 5 ? `${names.slice(0, 5).join(", ")} and ${names.length - 5} more` : names.join(", ");
    problems.push(
      fatal(
        "accounts",
        `${at}: account${names.length > 1 ? "s" : ""} ${list} ${names.length > 1 ? "do" : "does"} not exist on this host`,
        `create ${names.length > 1 ? "them" : "it"} (useradd -M -s /usr/sbin/nologin ${names[0]}) here and on the worker nodes with the same uid, or change the rule`,
      ),
    );
  }
  // The CE's own ids: this process's, and the owner of the control directory (the gateways' account).
  const ceUids = ownUids();
  const ceGids = ownGids();
  try {
    const st = statSync(c.paths.controlDir);
    ceUids.push(st.uid);
    if (st.gid !== 0) ceGids.push(st.gid);
  } catch {
    // No control dir yet: the directory check reports it.
  }
  const policy = { minUid: c.mapping!.minUid, ceUids, ceGids };
  for (const a of found.values()) {
    const why = accountProblem(a, policy);
    if (why)
      problems.push(
        fatal("accounts", `${where.get(a.account)}: ${why}`, `map to an ordinary account of its own (uid >= ${policy.minUid}) instead`),
      );
  }
  for (const [name, uids] of await ambiguousNames(new Set(found.keys())))
    problems.push(
      fatal(
        "accounts",
        `account ${name} has more than one uid (${uids.join(", ")}) in the name service`,
        `remove the duplicate entry (local /etc/passwd vs LDAP/sssd) so ${name} has one uid`,
      ),
    );
  const byUid = new Map<number, string[]>();
  for (const a of found.values()) byUid.set(a.uid, [...(byUid.get(a.uid) ?? []), a.account]);
  for (const [uid, names] of byUid)
    if (names.length > 1)
      problems.push(
        warning(
          "accounts",
          `mapped accounts ${names.join(", ")} share uid ${uid}: their jobs can read and change each other's files`,
          "give each mapped account a uid of its own",
        ),
      );
  return { problems, accounts: [...found.values()] };
}
