/**
 * The local Unix account a job runs as, decided once at submission by the identity mapping
 * (@ce/mapping) and stored on the job record; it never changes for that job.
 */
export interface LocalUser {
  account: string;
  uid: number;
  gid: number;
  /** Supplementary groups (primary gid included). */
  groups: number[];
  /** Which mapping rule decided, for diagnostics (`mapping.rules[2] "atlas pool"`, `onNoMatch`). */
  rule: string;
  /** Set when the account is leased from this pool to the identity (the commit checks the lease). */
  pool?: string | undefined;
}
