import type { Redis } from "ioredis";
import { legacyTokenOwner, REST_STATES } from "@ce/model";
import { delegationAad, SEALED_DELEGATION_FIELDS } from "./delegations.js";
import { Keys, ownerKey } from "./keys.js";
import type { SecretBox } from "./secretbox.js";

/**
 * Moves what a token owner written before the escaping (`<iss>/<sub>` with a `/` in `sub`, see
 * @ce/model tokenOwner) holds in Redis to the escaped owner: its job records (`owner`,
 * `ownerKey`) and every owner index (jobs, jobs per REST state, states, delegations, session
 * bytes), its delegations (owner, and each sealed secret opened and sealed again for the new
 * owner: the owner is part of the authenticated data) and its pool leases (who holds the account,
 * what the identity holds, when it last leased). Everything of one owner moves in one MULTI/EXEC
 * under WATCH of every key it reads, on a connection of its own: a gateway or JEM writing any of
 * them meanwhile (a submission, a state move, a renewal) makes it start again for that owner, so
 * no job ends up split from its delegation or its indexes.
 *
 * Safe to run at any time, any number of times, by several JEMs at once: an owner already in the
 * new form has no `/` after its issuer and is left alone. Gateways of the old version still
 * running keep writing the old form for such users until they stop; the pass after the last one
 * stopped (each JEM runs one at start) moves those too. Owners several configured issuers could
 * have written (the collision itself) are reported and left where they are.
 */

export interface OwnerMigration {
  /** Owners moved: old → new. */
  moved: { from: string; to: string; jobs: number; delegations: number; leases: number }[];
  /** Owners left where they are because several configured issuers fit them. */
  ambiguous: { owner: string; issuers: string[] }[];
  /** Owners that could not be moved (a secret that does not open, records that kept changing); the next pass tries again. */
  failed: { owner: string; reason: string }[];
}

const PAGE = 1000;
const ATTEMPTS = 20;

export async function migrateTokenOwners(
  redis: Redis,
  prefix: string,
  box: SecretBox,
  issuers: readonly string[],
): Promise<OwnerMigration> {
  const out: OwnerMigration = { moved: [], ambiguous: [], failed: [] };
  if (issuers.length === 0) return out;
  const k = new Keys(prefix);
  const owners = await knownOwners(redis, k);
  const todo = new Map<string, string>();
  for (const o of owners) {
    const r = legacyTokenOwner(o, issuers);
    if (r.kind === "to") todo.set(o, r.owner);
    else if (r.kind === "ambiguous") out.ambiguous.push({ owner: o, issuers: r.issuers });
  }
  for (const [from, to] of todo) {
    try {
      out.moved.push({ from, to, ...(await moveTokenOwner(redis, prefix, box, from, to)) });
    } catch (e) {
      out.failed.push({ owner: from, reason: (e as Error).message });
    }
  }
  return out;
}

/**
 * Moves everything one owner holds to another owner string (the step of `migrateTokenOwners`;
 * also how a test lays out what a gateway of the old version wrote).
 */
export async function moveTokenOwner(
  redis: Redis,
  prefix: string,
  box: SecretBox,
  from: string,
  to: string,
): Promise<{ jobs: number; delegations: number; leases: number }> {
  if (from === to) return { jobs: 0, delegations: 0, leases: 0 };
  // WATCH is per connection: the shared one carries everybody's commands and MULTIs.
  const conn = redis.duplicate();
  try {
    return await moveOwner(conn, new Keys(prefix), box, from, to);
  } finally {
    conn.disconnect();
  }
}

/** Every token owner named by a job record, a delegation or a pool lease. */
async function knownOwners(redis: Redis, k: Keys): Promise<Set<string>> {
  const owners = new Set<string>();
  const add = (o: string | null | undefined) => {
    if (o && !o.startsWith("/")) owners.add(o);
  };
  for (let start = 0; ; start += PAGE) {
    const ids = await redis.zrange(k.all(), start, start + PAGE - 1);
    if (ids.length === 0) break;
    const p = redis.pipeline();
    for (const id of ids) p.hget(k.job(id), "owner");
    for (const [, o] of (await p.exec()) ?? []) add(o as string | null);
    if (ids.length < PAGE) break;
  }
  // Delegations have no index of all of them: SCAN their hashes (`<prefix>:d:<id>`, not `…:jobs`).
  const base = k.deleg("");
  const pattern = `${base.replace(/[*?[\]\\]/g, "\\$&")}*`;
  let cursor = "0";
  do {
    const [next, keys] = await redis.scan(cursor, "MATCH", pattern, "COUNT", PAGE);
    cursor = next;
    const hashes = keys.filter((key) => !key.slice(base.length).includes(":"));
    if (hashes.length > 0) {
      const p = redis.pipeline();
      for (const key of hashes) p.hget(key, "owner");
      for (const [, o] of (await p.exec()) ?? []) add(o as string | null);
    }
  } while (cursor !== "0");
  for (const o of await redis.hvals(k.mapLeases())) add(o);
  for (const o of await redis.zrange(k.mapTouched(), 0, -1)) add(o);
  return owners;
}

/** Everything of `from`, moved to `to` in one transaction (retried while a watched key changes). */
async function moveOwner(conn: Redis, k: Keys, box: SecretBox, from: string, to: string) {
  const [ok, nk] = [ownerKey(from), ownerKey(to)];
  const rest = REST_STATES.map((s) => [k.ownerRest(ok, s), k.ownerRest(nk, s)] as const);
  for (let attempt = 1; attempt <= ATTEMPTS; attempt++) {
    const indexKeys = [k.owner(ok), k.ownerStates(ok), k.ownerDelegs(ok), k.ownerSessionBytes(ok), ...rest.map(([o]) => o)];
    await conn.watch(...indexKeys, k.mapLeases(), k.mapHeld(from), k.mapTouched());
    const jobs = await conn.zrange(k.owner(ok), 0, -1, "WITHSCORES");
    const delegIds = await conn.smembers(k.ownerDelegs(ok));
    const jobIds = jobs.filter((_, i) => i % 2 === 0);
    if (jobIds.length + delegIds.length > 0) await conn.watch(...jobIds.map((id) => k.job(id)), ...delegIds.map((id) => k.deleg(id)));
    const m = conn.multi();
    let nJobs = 0;
    for (const id of jobIds) {
      if ((await conn.hget(k.job(id), "owner")) !== from) continue; // a stale index entry: not this owner's record
      // A new revision: whatever was derived from the record (the info document's texts) is stale.
      m.hset(k.job(id), "owner", to, "ownerKey", nk).hincrby(k.job(id), "rev", 1);
      nJobs++;
    }
    if (jobs.length > 0) m.zadd(k.owner(nk), ...jobs.flatMap((v, i) => (i % 2 === 0 ? [] : [v, jobs[i - 1]!])));
    for (const [o, n] of rest) {
      const members = await conn.smembers(o);
      if (members.length > 0) m.sadd(n, ...members);
    }
    const states = await conn.hgetall(k.ownerStates(ok));
    if (Object.keys(states).length > 0) m.hset(k.ownerStates(nk), states);
    for (const [field, bytes] of Object.entries(await conn.hgetall(k.ownerSessionBytes(ok))))
      m.hincrby(k.ownerSessionBytes(nk), field, Number(bytes));
    let nDelegs = 0;
    for (const id of delegIds) {
      const h = await conn.hgetall(k.deleg(id));
      if (h.owner !== from) continue;
      const fields: Record<string, string> = { owner: to, ownerKey: nk };
      for (const f of SEALED_DELEGATION_FIELDS)
        if (h[f]) fields[f] = box.seal(box.open(h[f], delegationAad(id, from, f)), delegationAad(id, to, f));
      m.hset(k.deleg(id), fields);
      nDelegs++;
    }
    if (delegIds.length > 0) m.sadd(k.ownerDelegs(nk), ...delegIds);
    let nLeases = 0;
    for (const [account, holder] of Object.entries(await conn.hgetall(k.mapLeases())))
      if (holder === from) {
        m.hset(k.mapLeases(), account, to);
        nLeases++;
      }
    const held = await conn.hgetall(k.mapHeld(from));
    if (Object.keys(held).length > 0) m.hset(k.mapHeld(to), held);
    const touched = await conn.zscore(k.mapTouched(), from);
    if (touched !== null) m.zadd(k.mapTouched(), "GT", touched, to).zrem(k.mapTouched(), from);
    m.del(...indexKeys, k.mapHeld(from));
    if ((await m.exec()) !== null) return { jobs: nJobs, delegations: nDelegs, leases: nLeases };
  }
  throw new Error(`owner ${from}: its records kept changing during ${ATTEMPTS} attempts to move them`);
}
