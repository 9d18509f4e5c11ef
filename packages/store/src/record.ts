import { type InternalState, type LocalUser, type LrmsState, type Outcome, type RestState, isInternalState, isRestState } from "@ce/model";

/*
 * The job record and its one codec: the typed view of the Redis hash (`JobRecord`), how a record
 * becomes hash fields (`encodeRecord`, the create payload's `recordDelta`) and how hash fields or
 * HGETALL/HMGET rows become a record again. JobStore (jobs.ts) is the only caller that talks to Redis.
 */

/**
 * The job record: Redis is the source of truth for everything the REST interface reports.
 * Stored as a flat hash of strings; `JobRecord` is its typed view.
 */
export interface JobRecord {
  id: string;
  owner: string;
  ownerKey: string;
  state: InternalState;
  pending: boolean;
  outcome?: Outcome | undefined;
  lrms?: LrmsState | undefined;
  /**
   * Why the job waits in the batch system, as the batch system states it (Slurm `%r`, Grid
   * Engine's scheduling info; @ce/model lrmsReasonText), refreshed by the JEM's bulk poll. Shown
   * only while `lrms` is a waiting sub-state (@ce/model shownLrmsReason).
   */
  lrmsReason?: string | undefined;
  /** Derived from the fields above with `toRestState`, stored so the indexes match it. */
  rest: RestState;
  queue: string;
  backend: string;
  language: string;
  jobName?: string | undefined;
  created: number;
  updated: number;
  /** When the current state was entered (ms). */
  stateSince: number;
  localId?: string | undefined;
  exitCode?: number | undefined;
  /** Failure text (also in the `failed` control file). */
  failure?: string | undefined;
  failedState?: InternalState | undefined;
  /** Whose failure: `client` (a kill), `user` (their executable, inputs, outputs or limits), `internal` (the site's). */
  failedCause?: "internal" | "client" | "user" | undefined;
  /** Every delegation the job uses (main and per-file). */
  delegations: string[];
  mainDelegation?: string | undefined;
  /** Restarts left. */
  rerun: number;
  /** Session lifetime after the job ended, seconds. */
  lifetime: number;
  /** When the session directory is removed (ms); set when the job ends. */
  cleanupAt?: number | undefined;
  /** When the WIPED record itself is removed (ms). */
  removeAt?: number | undefined;
  /**
   * kill/clean/restart requests answered 202: set by the gateway before it answers (`request`),
   * acted on by the JEM; restartRequested is cleared once the restart is done or refused.
   */
  killRequested?: boolean | undefined;
  cleanRequested?: boolean | undefined;
  restartRequested?: boolean | undefined;
  /**
   * Submission hold (holds.ts): the key of the request that created the job while its answer has
   * not been handed to the client. The JEM does not advance a held job; the gateway clears the
   * field once the 201 is written, or the job is withdrawn (fails without running).
   */
  hold?: string | undefined;
  /** Request id of the submission, carried into JEM logs. */
  requestId?: string | undefined;
  clientHost?: string | undefined;
  /** Credential expiry of the main delegation (ms), for GLUE2 ProxyExpirationTime. */
  delegationExpires?: number | undefined;
  /**
   * When the main delegation's credential was last stored by a renewal (ms; lua/deleg-expiry.lua),
   * and when the credential the job's files hold was stored (set by the JEM as it writes them).
   * A running job whose `credRenewed` is later than its `credWritten` gets its files replaced.
   */
  credRenewed?: number | undefined;
  credWritten?: number | undefined;
  /** Credential files the JEM keeps current in the session (`token`, `proxy`; apps/jem credential-files.ts). */
  credFiles?: string | undefined;
  /**
   * A job waiting for client uploads: the files still expected (readable, bounded list; @ce/model
   * awaitingText) and when the wait ends (ms). Set at creation, kept current by the JEM.
   */
  awaiting?: string | undefined;
  uploadDeadline?: number | undefined;
  /** JSON summary of description fields the activity document shows. */
  summary?: JobSummary | undefined;
  /** The local account the job runs as (@ce/mapping), decided at submission; never changes. */
  localUser?: LocalUser | undefined;
  /** VOMS FQANs (short form, primary first) or token groups in effect at submission; never change. */
  fqans?: string[] | undefined;
  /**
   * `<queue>|<vo>`: the GLUE2 share counter the job is counted in (Keys.shareCounts), the VO
   * lower-cased and empty for a job without one. Set at creation (JobStore.newRecord); never changes.
   */
  share?: string | undefined;
  startedAt?: number | undefined;
  endedAt?: number | undefined;
  /** Execution node(s), comma separated. */
  nodes?: string | undefined;
  usedWallSeconds?: number | undefined;
  usedCpuSeconds?: number | undefined;
  usedMemoryMB?: number | undefined;
  /** CPU time split (the wrapper's UserTime/KernelTime) and processors, for the usage record. */
  usedUserSeconds?: number | undefined;
  usedSystemSeconds?: number | undefined;
  processors?: number | undefined;
  /**
   * The record's revision: 1 at creation, raised by every script that changes the record
   * (update, request, deleg-expiry). A reader that keeps something rendered from a record (bulk
   * info's activity texts) knows it is still right while `rev` is the same.
   */
  rev?: number | undefined;
}

export interface JobSummary {
  stdin?: string | undefined;
  stdout?: string | undefined;
  stderr?: string | undefined;
  logDir?: string | undefined;
  wallTime?: number | undefined;
  cpuTime?: number | undefined;
  slots?: number | undefined;
  rtes?: string[] | undefined;
}

const NUM = new Set([
  "created",
  "updated",
  "stateSince",
  "exitCode",
  "rerun",
  "lifetime",
  "cleanupAt",
  "removeAt",
  "delegationExpires",
  "credRenewed",
  "credWritten",
  "startedAt",
  "endedAt",
  "usedWallSeconds",
  "usedCpuSeconds",
  "usedMemoryMB",
  "rev",
  "usedUserSeconds",
  "usedSystemSeconds",
  "processors",
  "uploadDeadline",
]);
const BOOL = new Set(["pending", "killRequested", "cleanRequested", "restartRequested"]);
const JSON_FIELDS = new Set(["summary", "localUser", "fqans"]);

export function encodeRecord(r: Partial<JobRecord>): Record<string, string> {
  const out: Record<string, string> = {};
  // for-in, not Object.entries: no pair arrays for each of a bulk submission's records.
  for (const k in r) {
    const v = r[k as keyof JobRecord];
    if (v === undefined || v === null) continue;
    if (k === "delegations") out[k] = (v as string[]).join(",");
    else if (JSON_FIELDS.has(k)) out[k] = JSON.stringify(v);
    else if (BOOL.has(k)) out[k] = v ? "1" : "0";
    else out[k] = String(v);
  }
  return out;
}

/** The fields of `rec` that differ from `base`; a field of `base` that `rec` lacks is null (lua/create.lua). */
export function recordDelta(base: Record<string, string>, rec: Record<string, string>): Record<string, string | null> {
  const out: Record<string, string | null> = {};
  for (const f in rec) if (rec[f] !== base[f]) out[f] = rec[f]!;
  for (const f in base) if (!(f in rec)) out[f] = null;
  return out;
}

export function decodeRecord(h: Record<string, string>): JobRecord | undefined {
  if (!h.id || !h.owner || !isInternalState(h.state ?? "") || !isRestState(h.rest ?? "")) return undefined;
  const r: Record<string, unknown> = {};
  for (const k in h) r[k] = decodeField(k, h[k]!);
  r.delegations ??= [];
  return r as unknown as JobRecord;
}

/**
 * decodeRecord of a record read as a flat `[field, value, ...]` list (HGETALL's shape), without
 * the intermediate hash: bulk info decodes 100 records per request. A field given twice keeps
 * its last value, as in a hash.
 */
export function decodeFlatRecord(f: readonly string[]): JobRecord | undefined {
  const r: Record<string, unknown> = {};
  for (let i = 0; i + 1 < f.length; i += 2) r[f[i]!] = decodeField(f[i]!, f[i + 1]!);
  if (!r.id || !r.owner || !isInternalState((r.state as string | undefined) ?? "") || !isRestState((r.rest as string | undefined) ?? ""))
    return undefined;
  r.delegations ??= [];
  return r as unknown as JobRecord;
}

/** The fields every partial read includes: decoding checks them (decodeFlatRecord's checks). */
export type RecordCore = "id" | "owner" | "state" | "rest";
const CORE: readonly RecordCore[] = ["id", "owner", "state", "rest"];

/** How to decode each field of a partial read; the core fields first. */
interface FieldPlan {
  names: string[];
  kinds: Uint8Array;
  /** Every field undefined: records are copies of it, so they share one object shape. */
  blank: Record<string, unknown>;
}
const K_TEXT = 0,
  K_NUM = 1,
  K_BOOL = 2,
  K_LIST = 3,
  K_JSON = 4;
const plans = new WeakMap<readonly string[], FieldPlan>();

export function fieldPlan(fields: readonly string[]): FieldPlan {
  let plan = plans.get(fields);
  if (!plan) {
    const names = [...new Set<string>([...CORE, ...fields])];
    const kinds = Uint8Array.from(names, kindOf);
    plans.set(fields, (plan = { names, kinds, blank: Object.fromEntries(names.map((k) => [k, undefined])) }));
  }
  return plan;
}

/**
 * decodeField over one row of values (get-many.lua given field names): the same values, every
 * field a member (undefined when absent). A JSON text repeated within one read (the owner's localUser, a batch's summary) is parsed once:
 * records of one read may share those values, so they are read-only.
 */
export function decodeValues(
  plan: FieldPlan,
  row: readonly (string | false | null)[],
  parsed: Map<string, unknown>,
): Record<string, unknown> | undefined {
  const id = row[0],
    owner = row[1],
    state = row[2],
    rest = row[3];
  if (!id || !owner || !isInternalState(state || "") || !isRestState(rest || "")) return undefined;
  const r = { ...plan.blank };
  const { names, kinds } = plan;
  for (let i = 0; i < names.length; i++) {
    const v = row[i];
    if (v === false || v === null || v === undefined) {
      if (kinds[i] === K_LIST) r[names[i]!] = [];
      continue;
    }
    if (kinds[i] === K_JSON) {
      let j = parsed.get(v);
      if (j === undefined && !parsed.has(v)) parsed.set(v, (j = safeJson(v)));
      r[names[i]!] = j;
    } else r[names[i]!] = decodeKind(kinds[i]!, v);
  }
  return r;
}

/** How a field's stored string is decoded (the one table for whole and partial reads). */
function kindOf(k: string): number {
  return NUM.has(k) ? K_NUM : BOOL.has(k) ? K_BOOL : k === "delegations" ? K_LIST : JSON_FIELDS.has(k) ? K_JSON : K_TEXT;
}

function decodeKind(kind: number, v: string): unknown {
  switch (kind) {
    case K_NUM:
      return Number(v);
    case K_BOOL:
      return v === "1";
    case K_LIST:
      return v ? v.split(",") : [];
    case K_JSON:
      return safeJson(v);
    default:
      return v === "" ? undefined : v;
  }
}

function decodeField(k: string, v: string): unknown {
  return decodeKind(kindOf(k), v);
}

function safeJson(v: string): unknown {
  try {
    return JSON.parse(v);
  } catch {
    return undefined;
  }
}
