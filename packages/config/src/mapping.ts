import { z } from "zod";

/**
 * `mapping`: grid identity → local Unix account (arc.conf `[mapping]`). Ordered rules, the first
 * whose every `match` condition holds decides. The runtime (lookups, pool leases, grid-mapfiles,
 * account checks) is @ce/mapping; this is only the shape, so a bad rule stops the boot with its
 * index in the message (`mapping.rules.2.match.0: ...`).
 */

/** Match conditions (same syntax as auth.allow); `vo:`/`fqan:` apply once VOMS attributes exist. */
export const MAPPING_MATCH = /^(\*|kind:(x509|token)|(dn|ca|iss|sub|group|vo|fqan):[^\s].*)$/s;
/** POSIX-portable user names; never numeric (getent would take a number as a uid). */
export const ACCOUNT_NAME = /^[A-Za-z_][A-Za-z0-9_.-]{0,31}$/;

const account = z.string().regex(ACCOUNT_NAME, "not a valid account name (letters, digits, _ . -, at most 32, not starting with a digit)");
const match = z.string().refine(
  (s) => MAPPING_MATCH.test(s),
  (s) => ({
    message: `match ${JSON.stringify(s.slice(0, 100))} is not \`*\`, \`kind:x509|token\` or one of dn: ca: iss: sub: group: vo: fqan: followed by a pattern`,
  }),
);

/** Pools larger than this are a configuration mistake (and slow to check at boot). */
export const MAX_POOL_ACCOUNTS = 10_000;

const poolSchema = z
  .object({
    /** Lease namespace; default derived from the account list. */
    name: z
      .string()
      .regex(/^[A-Za-z0-9_.-]{1,64}$/)
      .optional(),
    accounts: z.array(account).min(1).max(MAX_POOL_ACCOUNTS).optional(),
    /** `prefix` + `from`..`to` (zero-padded to `width`): grid001..grid050. */
    prefix: z
      .string()
      .regex(/^[A-Za-z_][A-Za-z0-9_.-]{0,24}$/)
      .optional(),
    from: z.number().int().nonnegative().optional(),
    to: z.number().int().nonnegative().optional(),
    width: z.number().int().min(1).max(6).optional(),
  })
  .strict()
  .superRefine((p, ctx) => {
    const range = p.prefix !== undefined || p.from !== undefined || p.to !== undefined;
    if (p.accounts && range) ctx.addIssue({ code: "custom", message: "a pool has either `accounts` or `prefix`+`from`+`to`, not both" });
    else if (!p.accounts && (p.prefix === undefined || p.from === undefined || p.to === undefined)) {
      ctx.addIssue({ code: "custom", message: "a pool needs `accounts` or all of `prefix`, `from`, `to`" });
    } else if (range && p.to! < p.from!) ctx.addIssue({ code: "custom", message: "pool `to` is below `from`" });
    else if (range && p.to! - p.from! + 1 > MAX_POOL_ACCOUNTS)
      ctx.addIssue({ code: "custom", message: `a pool has at most ${MAX_POOL_ACCOUNTS} accounts` });
    else if (p.accounts && new Set(p.accounts).size !== p.accounts.length)
      ctx.addIssue({ code: "custom", message: "a pool lists an account twice" });
  });

const ruleSchema = z
  .object({
    /** Shown in diagnostics next to the rule index. */
    name: z.string().max(64).optional(),
    /** One condition or a list that must all hold. */
    match: z.union([match, z.array(match).min(1).max(32)]),
    /** Fixed account. */
    user: account.optional(),
    /** Pool of accounts leased one per grid identity. */
    pool: poolSchema.optional(),
    /** Grid-mapfile (`"DN" account[,account]`), reloaded when it changes. */
    gridmap: z.string().startsWith("/", "gridmap must be an absolute path").optional(),
  })
  .strict()
  .superRefine((r, ctx) => {
    const targets = [r.user, r.pool, r.gridmap].filter((t) => t !== undefined).length;
    if (targets !== 1)
      ctx.addIssue({ code: "custom", message: `a rule needs exactly one target of user, pool, gridmap (found ${targets})` });
  });

export const mappingSchema = z
  .object({
    rules: z.array(ruleSchema).max(1_000).default([]),
    /** No rule matched: `refuse` (403 naming the reason) or `{user: <account>}`. */
    onNoMatch: z.union([z.literal("refuse"), z.object({ user: account }).strict()]).default("refuse"),
    /** Accounts below this uid are never mapping targets (system accounts). */
    minUid: z.number().int().min(1).default(1000),
    /** How often a grid-mapfile's mtime is checked on use (ms). */
    gridmapCheckMs: z.number().int().nonnegative().default(5_000),
    /**
     * A pool lease is not released within this time of its last use, so an identity that comes back
     * soon gets its account (and its files) again. Safety does not depend on it: a commit checks that
     * the lease is still the identity's, and a submission whose lease was released creates nothing.
     */
    leaseGraceSeconds: z.number().int().nonnegative().default(600),
  })
  .strict();

export type MappingConfig = z.infer<typeof mappingSchema>;
export type MappingRule = MappingConfig["rules"][number];
export type PoolConfig = NonNullable<MappingRule["pool"]>;
