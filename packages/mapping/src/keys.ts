import { Keys, ownerKey } from "@ce/store";

/** Every Redis key of the identity mapping, built here only (same hash tag as the job store). */
export class MappingKeys {
  private readonly store: Keys;
  constructor(readonly prefix: string) {
    this.store = new Keys(prefix);
  }
  /** HASH account → identity holding it, across every pool (an account is never leased twice). */
  leases() { return `${this.prefix}:map:acct`; }
  /** HASH pool name → account: the leases one identity holds. */
  held(identity: string) { return `${this.prefix}:map:id:${ownerKey(identity)}`; }
  /** ZSET identity → last lease time (release grace, sweep). */
  touched() { return `${this.prefix}:map:touched`; }
  /** The job store's own indexes of the identity's jobs: all of them, and the WIPED ones. */
  ownerJobs(identity: string) { return this.store.owner(ownerKey(identity)); }
  ownerWiped(identity: string) { return this.store.ownerRest(ownerKey(identity), "WIPED"); }
}
