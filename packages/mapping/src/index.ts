import type { Redis } from "ioredis";
import type { MappingConfig } from "@ce/config";
import { type AccountScrub, PoolLeases, type ReleaseResult } from "@ce/store";

export { type MatchIdentity, allMatch, fqanForms, invalidRules, ruleMatches, shortFqan } from "./rules.js";
export { type Account, type AccountPolicy, accountProblem, lookupAccounts, ownGids, ownUids } from "./accounts.js";
export { type GridMap, type GridMapEntry, GridMapFile, parseGridMap } from "./gridmap.js";
// Pool leases live in the store (keys, Lua); re-exported for the mapping's users.
export { type AccountScrub, PoolLeases, type ReleaseResult } from "@ce/store";
export { Mapper, type MapperOptions, poolAccounts, poolName } from "./mapper.js";
export { MappingConfigError, MappingRefused } from "./errors.js";

const DEFAULT_GRACE_SECONDS = 600;

/**
 * For the JEM's wipe and removal paths: after a job of `owner` was wiped or removed, frees the
 * owner's pool leases when no other job of it is left. Cheap when the owner holds none. `scrub`
 * (the privileged JEM's) makes each account clean first; one that cannot be keeps the lease.
 */
export async function onJobWiped(
  redis: Redis,
  prefix: string,
  owner: string,
  mapping?: MappingConfig,
  scrub?: AccountScrub,
): Promise<ReleaseResult> {
  return new PoolLeases(redis, prefix).release(owner, (mapping?.leaseGraceSeconds ?? DEFAULT_GRACE_SECONDS) * 1000, Date.now(), scrub);
}

/** For the JEM's expiry pass: releases leases whose identities have no jobs left (safety net; dirty accounts are retried each pass). */
export async function sweepLeases(redis: Redis, prefix: string, mapping?: MappingConfig, scrub?: AccountScrub): Promise<number> {
  return new PoolLeases(redis, prefix).sweep((mapping?.leaseGraceSeconds ?? DEFAULT_GRACE_SECONDS) * 1000, Date.now(), 10_000, scrub);
}
export { type AccessDecision, type QueueDecision, accessDecision, queueDecision, rteAvailable } from "./admission.js";
export { type Placement, jobIdentity, placementFor } from "./placement.js";
export { DestinationRefused, type DestinationPolicy, destinationPolicy, parseCidr } from "./destinations.js";
