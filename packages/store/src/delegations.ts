import { Failure } from "@ce/model";
import { randomBytes } from "node:crypto";
import type { Redis } from "ioredis";
import { Keys, ownerKey } from "./keys.js";
import { runScript } from "./scripts.js";
import type { SecretBox } from "./secretbox.js";

export type DelegationType = "x509" | "jwt";

/** The owner already holds `limit` delegations. */
export class DelegationQuotaReached extends Failure<"DELEGATION_QUOTA_REACHED"> {
  constructor(readonly limit: number) {
    super("DELEGATION_QUOTA_REACHED", `delegation quota of ${limit} per owner reached`);
  }
}

export interface DelegationRecord {
  id: string;
  owner: string;
  type: DelegationType;
  created: number;
  updated: number;
  /** Credential end time (ms): proxy notAfter or token exp. */
  expires?: number | undefined;
  /** x509: a CSR was issued and no signed chain has been stored for it yet. */
  awaitingCertificate: boolean;
}

/** The credential a job's staging or batch job uses, resolved through one function. */
/**
 * `storedAt`: when the secret was stored (ms), as `credential` reads it; a job's credential files
 * record it (`credWritten`) to know whether a renewal came after them.
 */
export type JobCredential =
  | { type: "x509"; delegationId: string; proxyPem: string; expires?: number | undefined; storedAt?: number | undefined }
  | { type: "jwt"; delegationId: string; token: string; expires?: number | undefined; storedAt?: number | undefined };

/** The authenticated data of a sealed delegation secret (`key`, `proxy`, `token`): it cannot be moved to another id or owner. */
export const delegationAad = (id: string, owner: string, what: string) => `${id}\n${owner}\n${what}`;

/** The sealed fields of a delegation hash. */
export const SEALED_DELEGATION_FIELDS = ["key", "proxy", "token"] as const;

/**
 * Delegations in Redis: metadata in clear, private keys / proxies / tokens sealed with AES-256-GCM
 * (the delegation id and owner are the authenticated data, so a sealed value cannot be moved).
 */
export class DelegationStore {
  readonly keys: Keys;

  constructor(
    readonly redis: Redis,
    prefix: string,
    private readonly box: SecretBox,
  ) {
    this.keys = new Keys(prefix);
  }

  static newId(): string {
    return randomBytes(8).toString("hex");
  }

  /** ZSET id → time a CSR was issued and not yet answered by a PUT (Keys.delegPending). */
  pendingIndex() {
    return this.keys.delegPending();
  }

  /** ZSET id → credential end time (Keys.delegExpiry). */
  expiryIndex() {
    return this.keys.delegExpiry();
  }

  private aad(id: string, owner: string, what: string) {
    return delegationAad(id, owner, what);
  }

  /**
   * Creates a delegation slot. Ids are unique; a clash is retried. With `maxPerOwner` the owner's
   * count is checked and the slot added in one script, so concurrent requests cannot overshoot.
   */
  async create(
    owner: string,
    type: DelegationType,
    secret: { privateKeyPem: string } | { token: string; expires?: number | undefined },
    id?: string,
    maxPerOwner = 0,
  ): Promise<string> {
    for (let attempt = 0; attempt < 5; attempt++) {
      const did = id ?? DelegationStore.newId();
      const now = Date.now();
      const fields: Record<string, string> = {
        id: did,
        owner,
        ownerKey: ownerKey(owner),
        type,
        created: String(now),
        updated: String(now),
      };
      let index = "";
      let score = "";
      if ("privateKeyPem" in secret) {
        fields.key = this.box.seal(secret.privateKeyPem, this.aad(did, owner, "key"));
        fields.awaiting = "1";
        [index, score] = [this.pendingIndex(), String(now)];
      } else {
        fields.token = this.box.seal(secret.token, this.aad(did, owner, "token"));
        fields.stored = String(now);
        if (secret.expires) {
          fields.expires = String(secret.expires);
          [index, score] = [this.expiryIndex(), String(secret.expires)];
        }
      }
      const keys = [this.keys.deleg(did), this.keys.ownerDelegs(ownerKey(owner)), index || this.pendingIndex()];
      const res = Number(await runScript(this.redis, "ceDelegCreate", keys, [did, maxPerOwner, score, ...Object.entries(fields).flat()]));
      if (res === -1) throw new DelegationQuotaReached(maxPerOwner);
      if (res === 1) return did;
      if (id) throw new Error("delegation id already exists");
    }
    throw new Error("could not allocate a delegation id");
  }

  async get(id: string, owner: string): Promise<DelegationRecord | undefined> {
    const h = await this.redis.hmget(this.keys.deleg(id), "owner", "type", "created", "updated", "expires", "awaiting");
    if (h[0] !== owner) return undefined;
    return {
      id,
      owner,
      type: h[1] === "jwt" ? "jwt" : "x509",
      created: Number(h[2]),
      updated: Number(h[3]),
      expires: h[4] ? Number(h[4]) : undefined,
      awaitingCertificate: h[5] === "1",
    };
  }

  async list(owner: string, type?: DelegationType): Promise<DelegationRecord[]> {
    const ids = await this.redis.smembers(this.keys.ownerDelegs(ownerKey(owner)));
    const recs = await Promise.all(ids.sort().map((id) => this.get(id, owner)));
    return recs.filter((r): r is DelegationRecord => !!r && (!type || r.type === type));
  }

  /** Number of delegations the owner holds (quota). */
  async count(owner: string): Promise<number> {
    return this.redis.scard(this.keys.ownerDelegs(ownerKey(owner)));
  }

  async privateKey(id: string, owner: string): Promise<string | undefined> {
    const sealed = await this.redis.hget(this.keys.deleg(id), "key");
    return sealed ? this.box.open(sealed, this.aad(id, owner, "key")) : undefined;
  }

  /** Renewal of an x509 delegation: a fresh key, awaiting a new signed chain; the old proxy stays usable until then. */
  async replaceKey(id: string, owner: string, privateKeyPem: string): Promise<void> {
    const now = Date.now();
    await this.redis
      .multi()
      .hset(this.keys.deleg(id), { key: this.box.seal(privateKeyPem, this.aad(id, owner, "key")), awaiting: "1", updated: String(now) })
      .zadd(this.pendingIndex(), now, id)
      .exec();
  }

  /** Stores the complete proxy (cert + key + chain) after a verified PUT. */
  async storeProxy(id: string, owner: string, proxyPem: string, expires: number, publicChainPem: string): Promise<void> {
    const now = Date.now();
    await this.redis
      .multi()
      .hset(this.keys.deleg(id), {
        proxy: this.box.seal(proxyPem, this.aad(id, owner, "proxy")),
        public: publicChainPem,
        expires: String(expires),
        awaiting: "0",
        updated: String(now),
        stored: String(now),
      })
      .zrem(this.pendingIndex(), id)
      .zadd(this.expiryIndex(), expires, id)
      .exec();
    await this.propagateRenewal(id, now, expires);
  }

  /** Replaces a jwt delegation's token (renewal); `expires` undefined = unknown (not a JWT). */
  async storeToken(id: string, owner: string, token: string, expires?: number): Promise<void> {
    const now = Date.now();
    const fields: Record<string, string> = {
      token: this.box.seal(token, this.aad(id, owner, "token")),
      updated: String(now),
      stored: String(now),
    };
    const m = this.redis.multi();
    if (expires) {
      fields.expires = String(expires);
      m.zadd(this.expiryIndex(), expires, id);
    } else {
      m.hdel(this.keys.deleg(id), "expires").zrem(this.expiryIndex(), id);
    }
    await m.hset(this.keys.deleg(id), fields).exec();
    await this.propagateRenewal(id, now, expires);
  }

  /**
   * A renewal reaches the jobs whose main delegation this is: their GLUE2 ProxyExpirationTime,
   * and `credRenewed`, with the ones that may be running rung on the JEM's work list so that
   * their credential files are replaced. Only existing job records are touched (a removed job is
   * not re-created as a stub).
   */
  private async propagateRenewal(id: string, storedAt: number, expires: number | undefined): Promise<void> {
    const jobs = await this.jobsOf(id);
    if (jobs.length === 0) return;
    await runScript(
      this.redis,
      "ceDelegExpiry",
      jobs.map((j) => this.keys.job(j)),
      [id, expires ? String(expires) : "", String(storedAt), this.keys.prefix],
    );
  }

  /** x509: the public chain (no key). A jwt delegation has no public part: its token is a secret. */
  async publicPart(id: string, owner: string): Promise<string | undefined> {
    const rec = await this.get(id, owner);
    if (!rec || rec.type !== "x509") return undefined;
    return (await this.redis.hget(this.keys.deleg(id), "public")) ?? "";
  }

  /** Removes the delegation and every secret of it. Jobs bound to it find no credential afterwards. */
  async delete(id: string, owner: string): Promise<boolean> {
    const rec = await this.get(id, owner);
    if (!rec) return false;
    await this.redis
      .multi()
      .del(this.keys.deleg(id), this.keys.delegJobs(id))
      .srem(this.keys.ownerDelegs(ownerKey(owner)), id)
      .zrem(this.pendingIndex(), id)
      .zrem(this.expiryIndex(), id)
      .exec();
    return true;
  }

  /** Forgets a pending renewal key (abandoned renew); the stored proxy stays in use. */
  async dropPendingKey(id: string): Promise<void> {
    await this.redis
      .multi()
      .hdel(this.keys.deleg(id), "key")
      .hset(this.keys.deleg(id), "awaiting", "0")
      .zrem(this.pendingIndex(), id)
      .exec();
  }

  /** Records that jobs use these delegations (listed by the bulk `delegations` action). */
  async bind(delegationIds: readonly string[], jobIds: readonly string[]): Promise<void> {
    if (delegationIds.length === 0 || jobIds.length === 0) return;
    const m = this.redis.multi();
    for (const d of delegationIds) m.sadd(this.keys.delegJobs(d), ...jobIds);
    await m.exec();
  }

  async jobsOf(id: string): Promise<string[]> {
    return this.redis.smembers(this.keys.delegJobs(id));
  }

  /**
   * The one way the JEM obtains a job's credential: the given delegation (per-file), else the main
   * one. Always read fresh, so a renewal reaches every job bound to the delegation.
   */
  async credential(owner: string, delegationId: string | undefined): Promise<JobCredential | undefined> {
    if (!delegationId) return undefined;
    const rec = await this.get(delegationId, owner);
    if (!rec) return undefined;
    // `stored`: when the secret itself was last stored (a pending x509 renewal changes `updated` only).
    const [sealed, stored] = await this.redis.hmget(this.keys.deleg(delegationId), rec.type === "jwt" ? "token" : "proxy", "stored");
    const storedAt = Number(stored) || rec.updated;
    if (rec.type === "jwt") {
      const token = sealed ? this.box.open(sealed, this.aad(delegationId, owner, "token")) : "";
      return token ? { type: "jwt", delegationId, token, expires: rec.expires, storedAt } : undefined;
    }
    if (!sealed) return undefined;
    return {
      type: "x509",
      delegationId,
      proxyPem: this.box.open(sealed, this.aad(delegationId, owner, "proxy")),
      expires: rec.expires,
      storedAt,
    };
  }
}

export interface SweepOptions {
  /** CSR slots never answered by a PUT are removed after this (config.delegations.pendingLifetimeSeconds). */
  pendingLifetimeSeconds: number;
  /**
   * Expired delegations are kept this long so `arcrenew` can still revive the jobs bound to them
   * (default: the pending lifetime).
   */
  expiredGraceSeconds?: number;
}

export interface SweepResult {
  /** Removed: expired delegations and never-completed slots. */
  removed: string[];
  /** Renewals abandoned after the CSR: the pending key is dropped, the delegation stays. */
  abandonedRenewals: string[];
}

/**
 * Expiry of delegations (called from the JEM's expiry loop): removes delegations whose credential
 * ended more than the grace period ago, and CSR slots that never received their certificate.
 */
export async function sweepDelegations(store: DelegationStore, now: number, opts: SweepOptions): Promise<SweepResult> {
  const out: SweepResult = { removed: [], abandonedRenewals: [] };
  const grace = (opts.expiredGraceSeconds ?? opts.pendingLifetimeSeconds) * 1000;
  const owners = async (ids: string[]) =>
    (ids.length ? await store.redis.pipeline(ids.map((id) => ["hmget", store.keys.deleg(id), "owner", "proxy", "token"])).exec() : []) ??
    [];

  const expired = await store.redis.zrangebyscore(store.expiryIndex(), "-inf", now - grace, "LIMIT", 0, 1000);
  const expiredInfo = await owners(expired);
  for (const [i, id] of expired.entries()) {
    const [owner] = (expiredInfo[i]?.[1] as (string | null)[] | undefined) ?? [];
    // Re-check the score: a renewal between the range query and now moves it into the future.
    const score = await store.redis.zscore(store.expiryIndex(), id);
    if (score !== null && Number(score) > now - grace) continue;
    if (owner && (await store.delete(id, owner))) out.removed.push(id);
    else await store.redis.zrem(store.expiryIndex(), id);
  }

  const pending = await store.redis.zrangebyscore(store.pendingIndex(), "-inf", now - opts.pendingLifetimeSeconds * 1000, "LIMIT", 0, 1000);
  const pendingInfo = await owners(pending);
  for (const [i, id] of pending.entries()) {
    const [owner, proxy, token] = (pendingInfo[i]?.[1] as (string | null)[] | undefined) ?? [];
    if (!owner) {
      await store.redis.zrem(store.pendingIndex(), id);
    } else if (proxy || token) {
      await store.dropPendingKey(id);
      out.abandonedRenewals.push(id);
    } else if (await store.delete(id, owner)) {
      out.removed.push(id);
    }
  }
  return out;
}
