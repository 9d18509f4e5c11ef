import type { Redis } from "ioredis";
import {
  FINAL_INTERNAL_STATES,
  toRestState,
  type InternalState,
  type RestState,
  ACTIVE_REST_STATES,
  canMove,
  IllegalMoveError,
} from "@ce/model";
import { Keys, ownerKey } from "./keys.js";
import {
  type JobRecord,
  type RecordCore,
  decodeFlatRecord,
  decodeRecord,
  decodeValues,
  encodeRecord,
  fieldPlan,
  recordDelta,
} from "./record.js";
import { runScript } from "./scripts.js";
import { type ShareCount, parseShareCounts, shareField } from "./shares.js";
import { StatusReader } from "./status-many.js";

export { type JobRecord, type JobSummary, decodeFlatRecord, decodeRecord, encodeRecord } from "./record.js";

/** getManyFieldsSince's answer for a record still at the revision the caller holds. */
export const UNCHANGED: unique symbol = Symbol("unchanged record");

/** Limits of one atomic create (`createBounded`). */
export interface CreateLimits {
  maxTotal: number;
  minRequired?: number | undefined;
  /** The owner's quota (0 = none). */
  maxPerOwner?: number | undefined;
  /** `jobs.maxActivePerOwner`, checked for records created in PREPARING (0 = none). */
  maxActivePerOwner?: number | undefined;
  /** When records created in PREPARING are due for the JEM (their upload deadline, ms). */
  admittedDue?: number | undefined;
  /**
   * Deadline (ms) of the submission hold of records that carry one (`hold`, holds.ts): they are
   * due for the JEM only then, unless the hold is released first. Required when any record is held.
   */
  holdUntil?: number | undefined;
  /**
   * The pool account the records run as and the identity leasing it (@ce/mapping pools): nothing
   * is created ("lease") unless that identity still holds the lease at the commit, so an account
   * released and handed on after the mapping never runs this identity's jobs.
   */
  lease?: { account: string; identity: string } | undefined;
}

/** Fields a state change may set; `rest` is always recomputed from them. */
export type JobChange = Partial<
  Omit<JobRecord, "id" | "owner" | "ownerKey" | "rest" | "created" | "localUser" | "fqans" | "share" | "rev">
>;

export class JobStore {
  readonly keys: Keys;

  constructor(
    readonly redis: Redis,
    prefix: string,
  ) {
    this.keys = new Keys(prefix);
  }

  /** Builds a new record in ACCEPTED (REST ACCEPTING). */
  static newRecord(
    init: Omit<JobRecord, "ownerKey" | "state" | "pending" | "rest" | "created" | "updated" | "stateSince">,
    now = Date.now(),
  ): JobRecord {
    // Object.assign, then the new fields: `{ ...init, <7 new fields> }` (and a spread copy grown
    // afterwards) cost about twenty times this per record; a bulk submission builds one per job.
    const r = Object.assign({}, init) as JobRecord;
    r.ownerKey = ownerKey(init.owner);
    r.share = shareField(init.queue, init.fqans);
    r.state = "ACCEPTED";
    r.pending = false;
    r.rest = "ACCEPTING";
    r.created = now;
    r.updated = now;
    r.stateSince = now;
    r.rev = 1;
    return r;
  }

  /** Current free capacity under `maxTotal` (WIPED records do not count). */
  async headroom(maxTotal: number): Promise<number> {
    return maxTotal - (await this.held());
  }

  /** Jobs counted against `jobs.maxTotal`: every record but the WIPED ones. */
  async held(): Promise<number> {
    const [all, wiped] = await Promise.all([this.redis.zcard(this.keys.all()), this.redis.scard(this.keys.rest("WIPED"))]);
    return all - wiped;
  }

  /** Jobs an owner holds against `quotas.jobsPerOwner`: every state but WIPED. */
  async heldBy(owner: string): Promise<number> {
    const ok = ownerKey(owner);
    const [all, wiped] = await Promise.all([this.redis.zcard(this.keys.owner(ok)), this.redis.scard(this.keys.ownerRest(ok, "WIPED"))]);
    return all - wiped;
  }

  /**
   * Creates the records atomically (with indexes), due for the JEM at once. Returns how many of them (a prefix of the list)
   * were created: all up to the limit, or none if fewer than `minRequired` fit.
   */
  async create(records: JobRecord[], maxTotal: number, minRequired = records.length, maxPerOwner = 0): Promise<number> {
    return (await this.createBounded(records, { maxTotal, minRequired, maxPerOwner })).created;
  }

  /**
   * As `create`, and says which limit stopped it: the CE-wide `maxTotal` or the owner's quota
   * (`maxPerOwner`, 0 = none). WIPED records count against neither. Records admitted at creation
   * (PREPARING) that would take their owner past `maxActivePerOwner`: none created, "active".
   * The creating marks (`markCreating`) of the records created are cleared in the same step.
   */
  async createBounded(
    records: JobRecord[],
    o: CreateLimits,
  ): Promise<{ created: number; limitedBy?: "total" | "owner" | "active" | "lease" }> {
    if (records.length === 0) return { created: 0 };
    const k = this.keys;
    // With `admittedDue`, records in PREPARING are admitted at creation (@ce/model CREATION_STATES):
    // all of one owner, whose active count the script checks.
    const admitted = o.admittedDue === undefined ? [] : records.filter((r) => r.state === "PREPARING" && !r.pending);
    const admitOwner = admitted[0]?.ownerKey;
    if (admitted.some((r) => r.ownerKey !== admitOwner))
      throw new Error("createBounded: jobs admitted at creation must all be of one owner");
    const active = admitOwner === undefined ? [] : ACTIVE_REST_STATES.map((s) => k.ownerRest(admitOwner, s));
    // One argument for the whole batch (lua/create.lua builds the per-record keys): a bulk
    // submission's records differ mostly in id and job name, so each later record is sent as its
    // differences from the first.
    const encoded = records.map(encodeRecord);
    const first = encoded[0]!;
    const payload = JSON.stringify(encoded.map((e, i) => (i === 0 ? e : recordDelta(first, e))));
    const keys = [
      k.all(),
      k.rest("WIPED"),
      k.advanceDue(),
      k.advanceBell(),
      k.creating(),
      k.holds(),
      ...active,
      k.shareCounts(),
      k.mapLeases(),
    ];
    const args = [
      o.maxTotal,
      o.minRequired ?? records.length,
      Date.now(),
      o.maxPerOwner ?? 0,
      o.maxActivePerOwner ?? 0,
      active.length,
      o.admittedDue ?? 0,
      k.prefix,
      payload,
      o.holdUntil ?? 0,
      o.lease?.account ?? "",
      o.lease?.identity ?? "",
    ];
    const res = await runScript(this.redis, "ceCreateJobs", keys, args);
    const [n, by] = res as unknown as [number, string];
    return by === "total" || by === "owner" || by === "active" || by === "lease"
      ? { created: Number(n), limitedBy: by }
      : { created: Number(n) };
  }

  async get(id: string): Promise<JobRecord | undefined> {
    return decodeRecord(await this.redis.hgetall(this.keys.job(id)));
  }

  /**
   * The ids of `ids` that have a record, in one round trip. Throws on any Redis error (never
   * "missing" on doubt): the lost-record sweep deletes files of ids this does not return.
   */
  async existing(ids: readonly string[]): Promise<Set<string>> {
    if (ids.length === 0) return new Set();
    const pipe = this.redis.pipeline();
    for (const id of ids) pipe.exists(this.keys.job(id));
    pipe.zmscore(this.keys.creating(), ...ids);
    const res = (await pipe.exec()) ?? [];
    if (res.length !== ids.length + 1) throw new Error("existence check: incomplete pipeline reply");
    for (const [err] of res) if (err) throw err;
    const creating = res[ids.length]![1] as (string | null)[];
    // A job being created right now has its mark but no record yet: it counts as existing.
    return new Set(ids.filter((id, i) => res[i]![1] === 1 || creating[i] !== null));
  }

  /**
   * REST state of each id the owner holds (bulk status: the hottest read of the CE): one script
   * call (lua/status-many.lua) that reads two fields per job and compares the owner in Redis,
   * answering one short string instead of whole records or owner DNs. A missing id and another
   * owner's job both give `undefined`.
   */
  async statesOwnedBy(ids: readonly string[], owner: string): Promise<(RestState | undefined)[]> {
    // Concurrent reads share script calls (status-many.ts).
    return (this.statusReader ??= new StatusReader(this.redis, this.keys)).read(ids, owner);
  }

  private statusReader?: StatusReader;

  /** One round trip for any number of ids; missing ids give `undefined` in their position. */
  async getMany(ids: readonly string[]): Promise<(JobRecord | undefined)[]> {
    if (ids.length === 0) return [];
    // One script call (lua/get-many.lua) per 1,000 ids: the client's per-command cost was most
    // of a bulk request's CPU.
    const out: (JobRecord | undefined)[] = [];
    for (let i = 0; i < ids.length; i += 1_000) {
      const chunk = ids.slice(i, i + 1_000);
      const rows = JSON.parse(
        (await runScript(
          this.redis,
          "ceGetMany",
          chunk.map((id) => this.keys.job(id)),
          [""],
        )) as string,
      ) as unknown[];
      for (const flat of rows) {
        // A missing job is an empty Lua table, which cjson writes as `{}`.
        if (!Array.isArray(flat) || flat.length === 0) {
          out.push(undefined);
          continue;
        }
        out.push(decodeFlatRecord(flat as string[]));
      }
    }
    return out;
  }

  /**
   * getMany of just `fields`, picked in Redis (bulk info reads 27 of a record's ~40 fields, and
   * values without their names). A record is undefined, as in getMany, when it is missing or its
   * id, owner, state or rest (always read) are not valid; absent fields are undefined members.
   * Read-only: records of one call may share their JSON-decoded members.
   */
  async getManyFields<K extends keyof JobRecord>(
    ids: readonly string[],
    fields: readonly K[],
  ): Promise<(Pick<JobRecord, K | RecordCore> | undefined)[]> {
    return (await this.readFields(ids, fields)) as (Pick<JobRecord, K | RecordCore> | undefined)[];
  }

  /**
   * getManyFields, except that a record whose revision (`rev`) is `known[i]` is not read:
   * UNCHANGED in its place. For a reader that keeps what it rendered from records (bulk info).
   */
  async getManyFieldsSince<K extends keyof JobRecord>(
    ids: readonly string[],
    fields: readonly K[],
    known: readonly (number | undefined)[],
  ): Promise<(Pick<JobRecord, K | RecordCore> | typeof UNCHANGED | undefined)[]> {
    return (await this.readFields(ids, fields, known)) as (Pick<JobRecord, K | RecordCore> | typeof UNCHANGED | undefined)[];
  }

  private async readFields(ids: readonly string[], fields: readonly string[], known?: readonly (number | undefined)[]): Promise<unknown[]> {
    if (ids.length === 0) return [];
    const plan = fieldPlan(fields);
    const out: unknown[] = [];
    for (let i = 0; i < ids.length; i += 1_000) {
      const chunk = ids.slice(i, i + 1_000);
      const revs = known ? JSON.stringify(known.slice(i, i + 1_000).map((r) => (r === undefined ? "" : String(r)))) : "";
      const rows = JSON.parse(
        (await runScript(
          this.redis,
          "ceGetMany",
          chunk.map((id) => this.keys.job(id)),
          [revs, ...plan.names],
        )) as string,
      ) as unknown[];
      // One row of values (false for an absent field) per key, in `plan.names` order; `true`
      // for a record still at the revision given.
      const parsed = new Map<string, unknown>();
      for (const row of rows) out.push(row === true ? UNCHANGED : decodeValues(plan, row as (string | false)[], parsed));
    }
    return out;
  }

  /** Owner-scoped lookup: another owner's job is indistinguishable from a missing one. */
  async getOwned(id: string, owner: string): Promise<JobRecord | undefined> {
    const r = await this.get(id);
    return r && r.owner === owner ? r : undefined;
  }

  /** Ids of an owner's jobs (oldest first), optionally only those in the given REST states. */
  async list(owner: string, states?: readonly RestState[]): Promise<{ id: string; state?: RestState }[]> {
    const ok = ownerKey(owner);
    if (!states) return (await this.redis.zrange(this.keys.owner(ok), 0, -1)).map((id) => ({ id }));
    const pipe = this.redis.pipeline();
    for (const s of states) pipe.smembers(this.keys.ownerRest(ok, s));
    const res = (await pipe.exec()) ?? [];
    const out: { id: string; state: RestState }[] = [];
    res.forEach(([, ids], i) => {
      for (const id of (ids as string[]) ?? []) out.push({ id, state: states[i]! });
    });
    return out;
  }

  /**
   * Compare-and-set change. `expect` holds encoded field values that must match (e.g. `{state:"INLRMS"}`);
   * the REST state and every index follow automatically. Returns false when the expectation failed
   * or the job is gone, so two JEMs can never advance the same job twice. A move into FINISHED
   * also appends the job's usage record (the record plus `usage`) to the usage stream, atomically.
   */
  async update(
    current: JobRecord,
    change: JobChange,
    expect: Partial<Record<keyof JobRecord, string>> = {},
    usage: Record<string, string | number> = {},
  ): Promise<JobRecord | undefined> {
    // The mapping is decided once (at submission): nothing may change it afterwards.
    if ("localUser" in change) throw new Error(`job ${current.id}: localUser never changes`);
    if ("fqans" in change) throw new Error(`job ${current.id}: fqans never change`);
    // Every state move, whoever makes it, must be in the one table (packages/model transitions.ts).
    const to = change.state ?? current.state;
    const pending = change.pending ?? current.pending;
    if ((to !== current.state || (pending && !current.pending)) && !canMove(current.state, to, pending)) {
      throw new IllegalMoveError(current.id, current.state, to, pending);
    }
    const next = { ...current, ...change, updated: Date.now() } as JobRecord;
    if (change.state && change.state !== current.state) next.stateSince = next.updated;
    next.rest = toRestState(next);
    const set: Record<string, string | null> = encodeRecord({
      ...change,
      updated: next.updated,
      stateSince: next.stateSince,
      rest: next.rest,
    });
    // Explicitly cleared fields (undefined in `change`) are removed from the hash.
    for (const [k, v] of Object.entries(change)) if (v === undefined) set[k] = null;
    const k = this.keys;
    const keys = [
      k.job(current.id),
      k.ownerSessionBytes(current.ownerKey || ownerKey(current.owner)),
      k.uploads(current.id),
      k.shareCounts(),
      k.usageStream(),
    ];
    const res = await runScript(this.redis, "ceUpdateJob", keys, [
      k.prefix,
      current.id,
      JSON.stringify(expect),
      JSON.stringify(set),
      JSON.stringify(usage),
    ]);
    return Number(res) === 1 ? next : undefined;
  }

  async remove(id: string): Promise<boolean> {
    const k = this.keys;
    return (
      Number(
        await runScript(
          this.redis,
          "ceRemoveJob",
          [k.job(id), k.all(), k.expiry(), k.uploads(id), k.advanceDue(), k.advanceInflight(), k.shareCounts()],
          [k.prefix, id],
        ),
      ) === 1
    );
  }

  async countByInternal(states: readonly InternalState[]): Promise<Record<string, number>> {
    const pipe = this.redis.pipeline();
    for (const s of states) pipe.scard(this.keys.internal(s));
    const res = (await pipe.exec()) ?? [];
    return Object.fromEntries(states.map((s, i) => [s, Number(res[i]?.[1] ?? 0)]));
  }

  async countByRest(states: readonly RestState[]): Promise<Record<string, number>> {
    const pipe = this.redis.pipeline();
    for (const s of states) pipe.scard(this.keys.rest(s));
    const res = (await pipe.exec()) ?? [];
    return Object.fromEntries(states.map((s, i) => [s, Number(res[i]?.[1] ?? 0)]));
  }

  /**
   * Job counts per queue, VO and REST state (GLUE2 shares), in one read of a hash of at most
   * queues × VOs × states fields. Records created before the counters existed are not in it.
   */
  async shareCounts(): Promise<ShareCount[]> {
    return parseShareCounts(await this.redis.hgetall(this.keys.shareCounts()));
  }

  async idsInState(state: InternalState): Promise<string[]> {
    return this.redis.smembers(this.keys.internal(state));
  }

  /** Ids of every job in one of the REST states (any owner). */
  async idsInRest(states: readonly RestState[]): Promise<string[]> {
    if (states.length === 0) return [];
    const pipe = this.redis.pipeline();
    for (const s of states) pipe.smembers(this.keys.rest(s));
    return ((await pipe.exec()) ?? []).flatMap(([, v]) => (v as string[] | null) ?? []);
  }

  /** Up to `n` random ids of jobs in a REST state, of one owner when given (waking waiters). */
  async sampleRest(rest: RestState, n: number, owner?: string): Promise<string[]> {
    return this.redis.srandmember(owner === undefined ? this.keys.rest(rest) : this.keys.ownerRest(ownerKey(owner), rest), n);
  }

  /** How many of an owner's jobs are in any of the REST states (per-owner limits). */
  async countOwnerRest(owner: string, states: readonly RestState[]): Promise<number> {
    const ok = ownerKey(owner);
    // One script call, not one SCARD per state: the JEM counts per ACCEPTED look (per-owner limit).
    return Number(
      await runScript(
        this.redis,
        "ceCountSets",
        states.map((s) => this.keys.ownerRest(ok, s)),
        [],
      ),
    );
  }

  /** The newest `limit` job ids (any owner), newest first. */
  async newest(limit: number): Promise<string[]> {
    return this.redis.zrevrange(this.keys.all(), 0, limit - 1);
  }

  /** Some fields of many records in one round trip (null where a record or field is missing). */
  async fieldsOf<F extends string>(ids: readonly string[], fields: readonly F[]): Promise<(string | null)[][]> {
    if (ids.length === 0) return [];
    const pipe = this.redis.pipeline();
    for (const id of ids) pipe.hmget(this.keys.job(id), ...fields);
    return ((await pipe.exec()) ?? []).map(([err, v]) => (err ? fields.map(() => null) : (v as (string | null)[])));
  }

  /** Every record, WIPED ones included (see `held` for what counts against the limit). */
  async total(): Promise<number> {
    return this.redis.zcard(this.keys.all());
  }

  /**
   * Submission bookkeeping: ids are marked before their control files are written and unmarked
   * after the commit (or rollback). A mark that stays (a gateway died in between) points at files
   * without a record, which the JEM removes (`staleCreating`).
   */
  async markCreating(ids: readonly string[], now = Date.now()): Promise<void> {
    if (ids.length === 0) return;
    await this.redis.zadd(this.keys.creating(), ...ids.flatMap((id) => [now, id]));
  }

  async doneCreating(ids: readonly string[]): Promise<void> {
    if (ids.length === 0) return;
    await this.redis.zrem(this.keys.creating(), ...ids);
  }

  async staleCreating(olderThan: number, limit = 500): Promise<string[]> {
    return this.redis.zrangebyscore(this.keys.creating(), 0, olderThan, "LIMIT", 0, limit);
  }

  /**
   * Puts kill/clean/restart requests on the job records (the fact behind a 202). A kill of a job
   * in a final state is a no-op. Returns, per id, whether the request was recorded.
   */
  async request(reqs: readonly { action: "kill" | "clean" | "restart"; jobId: string }[], now = Date.now()): Promise<boolean[]> {
    const k = this.keys;
    return Promise.all(
      reqs.map(async ({ action, jobId }) => {
        const noop = action === "kill" ? [...FINAL_INTERNAL_STATES].join(" ") : "";
        const keys = [k.job(jobId), k.requests(), k.advanceDue()];
        return Number(await runScript(this.redis, "ceRequest", keys, [jobId, `${action}Requested`, noop, now])) === 1;
      }),
    );
  }

  /** Wakes idle JEMs now (pub/sub): after rings made outside the work list's own scripts. */
  async ringBell(): Promise<void> {
    await this.redis.publish(this.keys.advanceBell(), "1");
  }

  /** Up to `limit` jobs with an open request, a random sample so that none is starved (JEM recovery). */
  async openRequests(limit = 500): Promise<string[]> {
    return this.redis.srandmember(this.keys.requests(), limit);
  }

  /**
   * Forgets ids whose requests are all answered (or whose record is gone), as decided from the
   * records given (undefined: gone). Atomic against a new request recorded since they were read:
   * an id is dropped only while its state and request flags are still what the caller saw.
   */
  async closeRequests(seen: readonly { id: string; record: JobRecord | undefined }[]): Promise<void> {
    if (seen.length === 0) return;
    const f = (b: boolean | undefined) => (b ? "1" : "");
    const args = seen.flatMap(({ id, record: r }) => [
      id,
      r ? `${r.state}|${f(r.killRequested)}|${f(r.cleanRequested)}|${f(r.restartRequested)}` : "",
    ]);
    await runScript(this.redis, "ceCloseRequests", [this.keys.requests(), ...seen.map(({ id }) => this.keys.job(id))], args);
  }

  async scheduleExpiry(id: string, at: number): Promise<void> {
    await this.redis.zadd(this.keys.expiry(), at, id);
  }

  /** Drops a job from the expiry schedule (gone, restarted, or no longer final). */
  async unscheduleExpiry(id: string): Promise<void> {
    await this.redis.zrem(this.keys.expiry(), id);
  }

  async dueExpiries(now = Date.now(), limit = 500): Promise<string[]> {
    return this.redis.zrangebyscore(this.keys.expiry(), 0, now, "LIMIT", 0, limit);
  }
}
