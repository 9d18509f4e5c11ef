import { createHash } from "node:crypto";
import type { InternalState, RestState } from "@ce/model";

/**
 * Every Redis key (and pub/sub channel) of the CE, built here only. All keys start with the
 * configured prefix, which config requires to be a hash tag (default `{ce}`): the whole keyspace
 * shares one slot, so the multi-key Lua scripts (lua/*.lua) stay atomic on Redis Cluster too.
 *
 * Not listed here, because their owners build them under the same prefix:
 * - BullMQ queues (`<prefix>:<queue>:*`, see queues.ts) — BullMQ's own layout.
 */
export class Keys {
  constructor(readonly prefix: string) {}

  // ── Job records and their indexes (jobs.ts, lua/create|update|remove.lua) ──
  /** HASH: one job record. */
  job(id: string) {
    return `${this.prefix}:job:${id}`;
  }
  /** ZSET of every job id, scored by creation time (total count, expiry sweep). */
  all() {
    return `${this.prefix}:all`;
  }
  /** ZSET of an owner's job ids by creation time. */
  owner(ownerKey: string) {
    return `${this.prefix}:o:${ownerKey}`;
  }
  /** SET of an owner's job ids in one REST state (the `state` filter of GET /jobs). */
  ownerRest(ownerKey: string, rest: RestState) {
    return `${this.prefix}:o:${ownerKey}:s:${rest}`;
  }
  /**
   * HASH id → REST state of one owner's jobs (bulk status, the hottest read: one HMGET answers a
   * request, and only the caller's own jobs can be found in it). Kept by lua/create|update|remove.lua.
   */
  ownerStates(ownerKey: string) {
    return `${this.prefix}:o:${ownerKey}:st`;
  }
  /** SET of job ids per internal state (JEM recovery and limits). */
  internal(state: InternalState) {
    return `${this.prefix}:i:${state}`;
  }
  /** SET of job ids per REST state (GLUE2 counters). */
  rest(rest: RestState) {
    return `${this.prefix}:r:${rest}`;
  }
  /**
   * HASH `<queue>|<vo>|<REST state>` → number of jobs: the GLUE2 per-queue and per-VO share
   * counters. Kept by lua/create|update|remove.lua from each record's `share` field (`<queue>|<vo>`,
   * `<vo>` empty for a job without one), one HINCRBY per state move; a field at 0 is removed.
   */
  shareCounts() {
    return `${this.prefix}:share:n`;
  }
  /** ZSET id → time of the next expiry action (session removal, then record removal). */
  expiry() {
    return `${this.prefix}:expiry`;
  }
  /** ZSET id → time: jobs whose files are being written before their record is committed. */
  creating() {
    return `${this.prefix}:creating`;
  }
  /** SET of job ids with a kill/clean/restart request on their record (lua/request.lua; JEM recovery rings again). */
  requests() {
    return `${this.prefix}:requests`;
  }

  // ── Submission holds (holds.ts, lua/create|hold-release|hold-withdraw.lua) ──
  /**
   * ZSET request key → deadline (ms): submissions whose answer the gateway has not yet handed to
   * the client. Their jobs carry the key in their record's `hold` field and the JEM does not
   * advance them; released (answer written) or withdrawn (never answered 201, or past the deadline).
   */
  holds() {
    return `${this.prefix}:holds`;
  }

  // ── The JEM's work (advance.ts, lua/advance-*.lua) ──
  /** ZSET id → when the JEM should next look at the job (now for events, later for timers). */
  advanceDue() {
    return `${this.prefix}:adv:due`;
  }
  /** ZSET id → lease end: jobs a JEM is looking at right now; an expired lease means lost work. */
  advanceInflight() {
    return `${this.prefix}:adv:run`;
  }
  /** Pub/sub CHANNEL: "something is due now" — wakes idle JEMs (the due set is the truth). */
  advanceBell() {
    return `${this.prefix}:adv:bell`;
  }

  // ── Identity-mapping pool leases (leases.ts, lua/pool-lease|pool-release.lua; used by @ce/mapping) ──
  /** HASH account → identity holding it, across every pool (an account is never leased twice). */
  mapLeases() {
    return `${this.prefix}:map:acct`;
  }
  /** HASH pool name → account: the leases one identity holds. */
  mapHeld(identity: string) {
    return `${this.prefix}:map:id:${ownerKey(identity)}`;
  }
  /** ZSET identity → last lease time (release grace, sweep). */
  mapTouched() {
    return `${this.prefix}:map:touched`;
  }

  // ── Delegations (delegations.ts, lua/deleg-*.lua) ──
  /** HASH: one delegation (metadata in clear, secrets sealed). */
  deleg(id: string) {
    return `${this.prefix}:d:${id}`;
  }
  /** SET of an owner's delegation ids (quota, listing). */
  ownerDelegs(ownerKey: string) {
    return `${this.prefix}:o:${ownerKey}:d`;
  }
  /** SET of the job ids bound to a delegation. */
  delegJobs(id: string) {
    return `${this.prefix}:d:${id}:jobs`;
  }
  /** ZSET id → time a CSR was issued and not yet answered by a PUT (abandoned-slot sweep). */
  delegPending() {
    return `${this.prefix}:dpend`;
  }
  /** ZSET id → credential end time (expired-delegation sweep). */
  delegExpiry() {
    return `${this.prefix}:dexp`;
  }
  /** Counter of an owner's delegation renewals in one minute window (lua/window.lua). */
  ownerRenewals(ownerKey: string, minute: number) {
    return `${this.prefix}:o:${ownerKey}:rn:${minute}`;
  }

  // ── Uploads and quotas (quotas.ts) ──
  /** HASH normalized path → range list of a job's partially uploaded files (lua/upload-range.lua). */
  uploads(jobId: string) {
    return `${this.prefix}:up:${jobId}`;
  }
  /** HASH of an owner's uploaded session bytes: field = job id, `*` = the owner's total. */
  ownerSessionBytes(ownerKey: string) {
    return `${this.prefix}:o:${ownerKey}:sb`;
  }
  /** HASH {tokens, ts}: the request token bucket of one client (lua/token-bucket.lua). */
  rateLimit(client: string) {
    return `${this.prefix}:rl:${client}`;
  }

  // ── Accounting (lua/update.lua appends, @ce/accounting consumes) ──
  /**
   * STREAM of usage facts: one entry per terminal move (into FINISHED), appended by the move's
   * own script; the accounting consumer group writes each to the database, then acknowledges it.
   */
  usageStream() {
    return `${this.prefix}:acct:usage`;
  }

  // ── CE-wide state (flags.ts, locks.ts) ──
  /** HASH of CE-wide flags: `drain` ("1" = refuse new jobs), `drainSince` (ms). */
  flags() {
    return `${this.prefix}:flags`;
  }
  /** STRING: a JEM lease (token of the holder), e.g. `job:<id>`, `limit:<name>`, `poll` (locks.ts). */
  lock(name: string) {
    return `${this.prefix}:jem:lock:${name}`;
  }
  /** Pub/sub CHANNEL: job ids whose running step (staging, submission) every JEM must abort. */
  abortChannel() {
    return `${this.prefix}:jem:abort`;
  }
  /** HASH JEM instance → `<last beat ms>:<beat interval ms>` (health.ts): is a JEM alive, seen from any process. */
  jemBeats() {
    return `${this.prefix}:jem:beats`;
  }
  /** STRING: write probe of one process during a Redis outage (outage.ts); expires by itself. */
  health(who: string) {
    return `${this.prefix}:health:${who}`;
  }

  // ── Input cache (apps/jem/src/staging/cache; the per-URL download lease is `lock("cache:<hash>")`) ──
  /** STRING, expires after staging.cache.permissionSeconds: the origin gave the URL (hash) to this credential (apps/jem cache/policy.ts credentialKey). */
  cachePerm(identityKey: string, urlHash: string) {
    return `${this.prefix}:cache:perm:${identityKey}:${urlHash}`;
  }
  /** STRING, kept for the cache lifetime: the origin gave the URL to this credential once (`cache=invariant`). */
  cacheEver(identityKey: string, urlHash: string) {
    return `${this.prefix}:cache:ever:${identityKey}:${urlHash}`;
  }
  /** HASH of CE-wide counters: hits, misses, bytesSaved, downloads, refused. */
  cacheStats() {
    return `${this.prefix}:cache:stats`;
  }
  /** HASH cache dir → JSON of its usage as the cleaner last measured it. */
  cacheUsage() {
    return `${this.prefix}:cache:usage`;
  }
  /** STRING: an operator's clean request (`ceadm cache clean`), taken by one JEM's cleaner. */
  cacheCleanRequest() {
    return `${this.prefix}:cache:clean`;
  }
}

/**
 * The keys scripts must build inside Redis (an index chosen by a state or owner read in the
 * script, or one key per record of a batch), as Lua functions generated from the methods above:
 * `local K = ceKeys(prefix)` then `K.job(id)`, `K.ownerRest(ownerKey, rest)`. scripts.ts prepends
 * this to every script that declares `keysInLua`, so the layout has one owner (this file).
 */
export const LUA_KEY_METHODS = [
  "job",
  "owner",
  "ownerRest",
  "ownerStates",
  "internal",
  "rest",
  "delegJobs",
  "ownerSessionBytes",
  "advanceDue",
  "advanceBell",
] as const;

export function luaKeyPrelude(): string {
  // Placeholders no prefix or argument can contain: \x00 = the prefix, \x01.. = the arguments.
  const k = new Keys("\x00") as unknown as Record<string, (...a: string[]) => string>;
  const fns = LUA_KEY_METHODS.map((m) => {
    const arity = k[m]!.length;
    const args = Array.from({ length: arity }, (_, i) => `a${i + 1}`);
    const text = k[m]!(...args.map((_, i) => String.fromCharCode(i + 1)));
    const parts = text.split(/([\x00-\x03])/).filter((p) => p !== "");
    const expr = parts
      .map((p) => (p === "\x00" ? "p" : p.charCodeAt(0) < 4 ? `a${p.charCodeAt(0)}` : `'${p.replace(/[\\']/g, "\\$&")}'`))
      .join(" .. ");
    return `${m} = function(${args.join(", ")}) return ${expr} end`;
  });
  return `local function ceKeys(p) return { ${fns.join(", ")} } end\n`;
}

/** Owners are arbitrary strings (DNs, iss/sub); keys use a fixed-length digest of them. */
const ownerKeys = new Map<string, string>();
const OWNER_KEYS_MAX = 4_096;
/** Remembered per owner (every record and every request of an owner needs it; a bulk submission once per job). */
export function ownerKey(owner: string): string {
  let k = ownerKeys.get(owner);
  if (k === undefined) {
    k = createHash("sha256").update(owner).digest("base64url").slice(0, 24);
    if (ownerKeys.size >= OWNER_KEYS_MAX) ownerKeys.delete(ownerKeys.keys().next().value!);
    ownerKeys.set(owner, k);
  }
  return k;
}
