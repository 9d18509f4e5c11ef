import { createHash } from "node:crypto";
import type { InternalState, RestState } from "@ce/model";

/**
 * Every Redis key of the CE. All keys share the configured hash tag (default `{ce}`), so the
 * multi-key Lua scripts stay in one slot on Redis Cluster, and BullMQ uses the same prefix.
 */
export class Keys {
  constructor(readonly prefix: string) {}
  job(id: string) { return `${this.prefix}:job:${id}`; }
  /** ZSET of every job id, scored by creation time (total count, expiry sweep). */
  all() { return `${this.prefix}:all`; }
  /** ZSET of an owner's job ids by creation time. */
  owner(ownerKey: string) { return `${this.prefix}:o:${ownerKey}`; }
  /** SET of an owner's job ids in one REST state (the `state` filter of GET /jobs). */
  ownerRest(ownerKey: string, rest: RestState) { return `${this.prefix}:o:${ownerKey}:s:${rest}`; }
  /** SET of job ids per internal state (JEM recovery and limits). */
  internal(state: InternalState) { return `${this.prefix}:i:${state}`; }
  /** SET of job ids per REST state (GLUE2 counters). */
  rest(rest: RestState) { return `${this.prefix}:r:${rest}`; }
  /** ZSET id → time of the next expiry action (session removal, then record removal). */
  expiry() { return `${this.prefix}:expiry`; }
  deleg(id: string) { return `${this.prefix}:d:${id}`; }
  ownerDelegs(ownerKey: string) { return `${this.prefix}:o:${ownerKey}:d`; }
  delegJobs(id: string) { return `${this.prefix}:d:${id}:jobs`; }
  /** ZSET id → time: jobs whose files are being written before their record is committed. */
  creating() { return `${this.prefix}:creating`; }
  /** HASH of CE-wide flags (drain). */
  flags() { return `${this.prefix}:flags`; }
  /** HASH normalized path → JSON range list of a job's partially uploaded files. */
  uploads(jobId: string) { return `${this.prefix}:up:${jobId}`; }
  /** HASH of an owner's uploaded session bytes: field = job id, `*` = the owner's total. */
  ownerSessionBytes(ownerKey: string) { return `${this.prefix}:o:${ownerKey}:sb`; }
  /** Counter of an owner's delegation renewals in one minute window. */
  ownerRenewals(ownerKey: string, minute: number) { return `${this.prefix}:o:${ownerKey}:rn:${minute}`; }
}

/** Owners are arbitrary strings (DNs, iss/sub); keys use a fixed-length digest of them. */
export function ownerKey(owner: string): string {
  return createHash("sha256").update(owner).digest("base64url").slice(0, 24);
}
