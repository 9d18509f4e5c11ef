import { createHash } from "node:crypto";
import type { Redis } from "ioredis";
import type { MappingConfig, MappingRule } from "@ce/config";
import type { LocalUser } from "@ce/model";
import { type Account, type AccountPolicy, accountProblem, lookupAccounts, ownGids, ownUids } from "./accounts.js";
import { MappingConfigError, MappingRefused } from "./errors.js";
import { type GridMap, GridMapFile } from "./gridmap.js";
import { PoolLeases } from "@ce/store";
import { type MatchIdentity, allMatch, invalidRules } from "./rules.js";

export interface MapperOptions {
  redis: Redis;
  /** Redis key prefix (config.redis.prefix). */
  prefix: string;
  /** uids that are never targets; default: this process's own. */
  ceUids?: readonly number[];
  /** gids that no target may belong to; default: this process's own (and CE_GID). */
  ceGids?: readonly number[];
  onWarning?: (msg: string) => void;
  /** Account lookup (tests may count calls); default getent. */
  lookup?: (names: readonly string[]) => Promise<Map<string, Account>>;
}

type Target =
  { kind: "user"; account: Account } | { kind: "pool"; name: string; accounts: string[] } | { kind: "gridmap"; file: GridMapFile };

interface CompiledRule {
  label: string;
  match: string[];
  target: Target;
}

/** Account names of a pool rule, in lease order. */
export function poolAccounts(p: NonNullable<MappingRule["pool"]>): string[] {
  if (p.accounts) return [...p.accounts];
  return Array.from({ length: p.to! - p.from! + 1 }, (_, i) => `${p.prefix}${String(p.from! + i).padStart(p.width ?? 0, "0")}`);
}

/** Lease namespace: configured, or derived from the account list (same list → same leases). */
export function poolName(p: NonNullable<MappingRule["pool"]>): string {
  return p.name ?? createHash("sha256").update(poolAccounts(p).join("\n")).digest("base64url").slice(0, 16);
}

const ruleLabel = (r: MappingRule, i: number) => `mapping.rules[${i}]${r.name ? ` "${r.name}"` : ""}`;

/**
 * Grid identity → local account, decided once per submission. `Mapper.create` checks everything
 * it can at boot (rule syntax, every fixed and pool account, grid-mapfiles and their accounts) and
 * throws `MappingConfigError` naming each problem; `map` then answers or throws `MappingRefused`.
 */
export class Mapper {
  private constructor(
    private readonly cfg: MappingConfig,
    private readonly rules: CompiledRule[],
    private readonly accounts: Map<string, Account>,
    private readonly policy: AccountPolicy,
    private readonly lookup: (names: readonly string[]) => Promise<Map<string, Account>>,
    readonly leases: PoolLeases,
    private readonly fallback: Account | undefined,
  ) {}

  static async create(cfg: MappingConfig, opts: MapperOptions): Promise<Mapper> {
    const problems: string[] = [];
    const policy: AccountPolicy = { minUid: cfg.minUid, ceUids: opts.ceUids ?? ownUids(), ceGids: opts.ceGids ?? ownGids() };
    const lookup = opts.lookup ?? lookupAccounts;
    // Every account named in the configuration, resolved in one go.
    const named = cfg.rules.flatMap((r) => (r.user ? [r.user] : r.pool ? poolAccounts(r.pool) : []));
    if (typeof cfg.onNoMatch === "object") named.push(cfg.onNoMatch.user);
    const accounts = await lookup(named);
    const check = (where: string, name: string): Account | undefined => {
      const a = accounts.get(name);
      const why = a ? accountProblem(a, policy) : `account ${name} does not exist`;
      if (why) problems.push(`${where}: ${why}`);
      return why ? undefined : a;
    };

    const rules: CompiledRule[] = [];
    const files = new Map<string, GridMapFile>();
    const ref: { mapper?: Mapper } = {}; // the grid-mapfile loader needs the mapper built below
    cfg.rules.forEach((r, i) => {
      const label = ruleLabel(r, i);
      const match = Array.isArray(r.match) ? r.match : [r.match];
      for (const bad of invalidRules(match)) problems.push(`${label}: match ${JSON.stringify(bad)} does not parse`);
      if (r.user) {
        const a = check(label, r.user);
        if (a) rules.push({ label, match, target: { kind: "user", account: a } });
      } else if (r.pool) {
        const list = poolAccounts(r.pool);
        const ok = list.filter((n) => check(`${label} pool`, n));
        if (ok.length === list.length) rules.push({ label, match, target: { kind: "pool", name: poolName(r.pool), accounts: list } });
      } else if (r.gridmap) {
        const path = r.gridmap;
        const file =
          files.get(path) ??
          new GridMapFile(path, {
            checkMs: cfg.gridmapCheckMs,
            onWarning: opts.onWarning,
            // Accounts of a (re)loaded file are resolved before it replaces the previous one.
            onLoad: (m) => ref.mapper?.resolveGridMap(m),
          });
        files.set(path, file);
        rules.push({ label, match, target: { kind: "gridmap", file } });
      }
    });
    const fallback = typeof cfg.onNoMatch === "object" ? check("mapping.onNoMatch", cfg.onNoMatch.user) : undefined;
    const self = (ref.mapper = new Mapper(cfg, rules, accounts, policy, lookup, new PoolLeases(opts.redis, opts.prefix), fallback));
    for (const [path, file] of files) {
      try {
        const m = await file.load();
        for (const e of m.entries.values()) {
          const a = accounts.get(e.accounts[0]!);
          const why = a ? accountProblem(a, policy) : `account ${e.accounts[0]} does not exist`;
          if (why) problems.push(`grid-mapfile ${path} line ${e.line}: ${why}`);
        }
      } catch (e) {
        problems.push((e as Error).message);
      }
    }
    if (problems.length > 0) throw new MappingConfigError(problems);
    return self;
  }

  /** Looks up accounts a grid-mapfile names that are not known yet (boot and every reload). */
  private async resolveGridMap(m: GridMap): Promise<void> {
    const missing = [...new Set([...m.entries.values()].map((e) => e.accounts[0]!))].filter((n) => !this.accounts.has(n));
    if (missing.length === 0) return;
    for (const [n, a] of await this.lookup(missing)) this.accounts.set(n, a);
  }

  /**
   * The mapping for one submission; throws `MappingRefused` with the reason. `dryRun` (`ceadm
   * explain`): the same rules in the same order, but a pool rule only looks which account it would
   * lease (PoolLeases.peek) and takes none.
   */
  async map(id: MatchIdentity, opts: { dryRun?: boolean } = {}): Promise<LocalUser> {
    for (const r of this.rules) {
      if (!allMatch(r.match, id)) continue;
      const t = r.target;
      if (t.kind === "user") return result(t.account, r.label);
      if (t.kind === "pool") {
        const name = opts.dryRun
          ? await this.leases.peek(id.subject, t.name, t.accounts)
          : await this.leases.lease(id.subject, t.name, t.accounts);
        if (!name)
          throw new MappingRefused(
            503,
            "POOL_EXHAUSTED",
            `${r.label}: every account of pool ${t.name} is leased to another identity; try again later`,
          );
        return { ...result(this.accounts.get(name)!, `${r.label} pool ${t.name}`), pool: t.name };
      }
      const entry = await t.file.lookup(id.subject);
      if (!entry) continue; // not in the file: the next rule decides (arc.conf map_with_file)
      const name = entry.accounts[0]!;
      const a = this.accounts.get(name);
      const why = a ? accountProblem(a, this.policy) : `account ${name} does not exist`;
      if (why)
        throw new MappingRefused(
          403,
          "BAD_MAPPING_TARGET",
          `${r.label}: grid-mapfile ${t.file.path} line ${entry.line} maps ${id.subject} to an account that may not run jobs: ${why}`,
        );
      return result(a!, `${r.label} gridmap ${t.file.path}`);
    }
    if (this.fallback) return result(this.fallback, "mapping.onNoMatch");
    throw new MappingRefused(
      403,
      "NO_MAPPING",
      `identity ${id.subject} matches no mapping rule (mapping.onNoMatch is refuse): no local account to run its jobs`,
    );
  }

  /** After a job of `identity` was wiped or removed: frees its pool leases when it was the last. */
  async onJobWiped(identity: string): Promise<void> {
    await this.leases.release(identity, this.cfg.leaseGraceSeconds * 1000);
  }
}

function result(a: Account, rule: string): LocalUser {
  return { account: a.account, uid: a.uid, gid: a.gid, groups: [...a.groups], rule };
}
