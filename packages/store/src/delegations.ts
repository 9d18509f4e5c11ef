import { randomBytes } from "node:crypto";
import type { Redis } from "ioredis";
import { Keys, ownerKey } from "./keys.js";
import type { SecretBox } from "./secretbox.js";

export type DelegationType = "x509" | "jwt";

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
export type JobCredential = { type: "x509"; delegationId: string; proxyPem: string; expires?: number | undefined } | { type: "jwt"; delegationId: string; token: string; expires?: number | undefined };

/**
 * Delegations in Redis: metadata in clear, private keys / proxies / tokens sealed with AES-256-GCM
 * (the delegation id and owner are the authenticated data, so a sealed value cannot be moved).
 */
export class DelegationStore {
  readonly keys: Keys;

  constructor(readonly redis: Redis, prefix: string, private readonly box: SecretBox) {
    this.keys = new Keys(prefix);
  }

  static newId(): string {
    return randomBytes(8).toString("hex");
  }

  private aad(id: string, owner: string, what: string) {
    return `${id}\n${owner}\n${what}`;
  }

  /** Creates a delegation slot. Ids are unique; a clash is retried. */
  async create(owner: string, type: DelegationType, secret: { privateKeyPem: string } | { token: string; expires?: number | undefined }, id?: string): Promise<string> {
    for (let attempt = 0; attempt < 5; attempt++) {
      const did = id ?? DelegationStore.newId();
      const now = Date.now();
      const fields: Record<string, string> = { id: did, owner, ownerKey: ownerKey(owner), type, created: String(now), updated: String(now) };
      if ("privateKeyPem" in secret) {
        fields.key = this.box.seal(secret.privateKeyPem, this.aad(did, owner, "key"));
        fields.awaiting = "1";
      } else {
        fields.token = this.box.seal(secret.token, this.aad(did, owner, "token"));
        if (secret.expires) fields.expires = String(secret.expires);
      }
      const ok = await this.redis.hsetnx(this.keys.deleg(did), "id", did);
      if (!ok) {
        if (id) throw new Error("delegation id already exists");
        continue;
      }
      await this.redis.multi().hset(this.keys.deleg(did), fields).sadd(this.keys.ownerDelegs(ownerKey(owner)), did).exec();
      return did;
    }
    throw new Error("could not allocate a delegation id");
  }

  async get(id: string, owner: string): Promise<DelegationRecord | undefined> {
    const h = await this.redis.hmget(this.keys.deleg(id), "owner", "type", "created", "updated", "expires", "awaiting");
    if (h[0] !== owner) return undefined;
    return { id, owner, type: h[1] === "jwt" ? "jwt" : "x509", created: Number(h[2]), updated: Number(h[3]), expires: h[4] ? Number(h[4]) : undefined, awaitingCertificate: h[5] === "1" };
  }

  async list(owner: string, type?: DelegationType): Promise<DelegationRecord[]> {
    const ids = await this.redis.smembers(this.keys.ownerDelegs(ownerKey(owner)));
    const recs = await Promise.all(ids.sort().map((id) => this.get(id, owner)));
    return recs.filter((r): r is DelegationRecord => !!r && (!type || r.type === type));
  }

  async privateKey(id: string, owner: string): Promise<string | undefined> {
    const sealed = await this.redis.hget(this.keys.deleg(id), "key");
    return sealed ? this.box.open(sealed, this.aad(id, owner, "key")) : undefined;
  }

  /** Renewal of an x509 delegation: a fresh key, awaiting a new signed chain; the old proxy stays usable until then. */
  async replaceKey(id: string, owner: string, privateKeyPem: string): Promise<void> {
    await this.redis.hset(this.keys.deleg(id), { key: this.box.seal(privateKeyPem, this.aad(id, owner, "key")), awaiting: "1", updated: String(Date.now()) });
  }

  /** Stores the complete proxy (cert + key + chain) after a verified PUT. */
  async storeProxy(id: string, owner: string, proxyPem: string, expires: number, publicChainPem: string): Promise<void> {
    await this.redis.hset(this.keys.deleg(id), {
      proxy: this.box.seal(proxyPem, this.aad(id, owner, "proxy")),
      public: publicChainPem,
      expires: String(expires),
      awaiting: "0",
      updated: String(Date.now()),
    });
  }

  async storeToken(id: string, owner: string, token: string, expires?: number): Promise<void> {
    const fields: Record<string, string> = { token: this.box.seal(token, this.aad(id, owner, "token")), updated: String(Date.now()) };
    if (expires) fields.expires = String(expires);
    await this.redis.hset(this.keys.deleg(id), fields);
  }

  /** x509: the public chain (no key); jwt: the token. */
  async publicPart(id: string, owner: string): Promise<string | undefined> {
    const rec = await this.get(id, owner);
    if (!rec) return undefined;
    if (rec.type === "jwt") {
      const sealed = await this.redis.hget(this.keys.deleg(id), "token");
      return sealed ? this.box.open(sealed, this.aad(id, owner, "token")) : "";
    }
    return (await this.redis.hget(this.keys.deleg(id), "public")) ?? "";
  }

  async delete(id: string, owner: string): Promise<boolean> {
    const rec = await this.get(id, owner);
    if (!rec) return false;
    await this.redis.multi().del(this.keys.deleg(id)).srem(this.keys.ownerDelegs(ownerKey(owner)), id).exec();
    return true;
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
    if (rec.type === "jwt") {
      const token = await this.publicPart(delegationId, owner);
      return token ? { type: "jwt", delegationId, token, expires: rec.expires } : undefined;
    }
    const sealed = await this.redis.hget(this.keys.deleg(delegationId), "proxy");
    if (!sealed) return undefined;
    return { type: "x509", delegationId, proxyPem: this.box.open(sealed, this.aad(delegationId, owner, "proxy")), expires: rec.expires };
  }
}
