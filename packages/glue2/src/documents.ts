/**
 * Builders for the REST body shapes ("Body shapes" of the interface text, decisions #6, #10, #13).
 * Each returns an El; `forceArraysFor(root)` gives the JSON forced-array names for it.
 */
import { type El, el, leaf, leaves } from "./tree.js";

/** JSON forced-array names per document root (decisions #6). */
export const FORCE_ARRAYS: Readonly<Record<string, readonly string[]>> = {
  versions: ["version"],
  jobs: ["job"],
  delegations: ["delegation"],
  list: ["file", "dir"],
};

export function forceArraysFor(root: El): readonly string[] {
  return Object.hasOwn(FORCE_ARRAYS, root.name) ? (FORCE_ARRAYS[root.name] as readonly string[]) : [];
}

/** `<versions><version>1.0</version>…</versions>`, ascending (decisions #22). */
export function versionsDoc(versions: readonly string[]): El {
  const sorted = [...versions].sort(compareVersions);
  return el("versions", leaves("version", sorted));
}

function compareVersions(a: string, b: string): number {
  const pa = a.split(".").map(Number);
  const pb = b.split(".").map(Number);
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    const d = (pa[i] ?? 0) - (pb[i] ?? 0);
    if (d !== 0 && !Number.isNaN(d)) return d;
  }
  return a < b ? -1 : a > b ? 1 : 0;
}

export interface JobListItem {
  id: string;
  /** Present when the list was filtered by state (A-REX adds it to matching items). */
  state?: string;
}

/** `GET /jobs`: `<jobs><job><id>…</id>[<state>…</state>]</job>…</jobs>`. */
export function jobListDoc(jobs: readonly JobListItem[]): El {
  return el(
    "jobs",
    jobs.map((j) => el("job", [el("id", j.id), leaf("state", j.state)])),
  );
}

/** The literal A-REX renders as `state` of a job it cannot find in the status action. */
export const STATE_NONE = "None";

export interface BulkItem {
  statusCode: number;
  reason: string;
  /** Job id; absent for a failed submission item. */
  id?: string;
  /**
   * Job state (submission and status results). Absent → no `state` element. There is no implicit
   * "None": a caller that wants A-REX's literal for a not-found job in the status action sets
   * `stateNone: true` (or passes STATE_NONE) explicitly.
   */
  state?: string | null;
  stateNone?: boolean;
  /**
   * info action: the GLUE2 ComputingActivity placed as the single child of `info_document`;
   * null → an empty `info_document` (not found; JSON `""`); undefined → no element.
   */
  infoDocument?: El | null;
  /**
   * delegations action: one `delegation_id` per entry (none for an empty list); in JSON always an
   * array, `[]` for none (interface text: "delegation_id (array)"; A-REX collapsed one to a string).
   */
  delegationIds?: readonly string[];
}

function bulkItem(it: BulkItem): El {
  const state = it.state ?? (it.stateNone ? STATE_NONE : undefined);
  const job = el("job", [
    el("status-code", String(it.statusCode)),
    el("reason", it.reason),
    leaf("id", it.id),
    state !== undefined ? el("state", state) : undefined,
    it.infoDocument === undefined ? undefined : el("info_document", it.infoDocument ? [it.infoDocument] : undefined),
    it.delegationIds?.map((d) => el("delegation_id", d)),
  ]);
  if (it.delegationIds) job.jsonArrays = ["delegation_id"];
  return job;
}

/**
 * Bulk results (submission and every `POST /jobs?action=…`): one `job` per item in request order,
 * children `status-code`, `reason`, `id`, then `state` | `info_document` | `delegation_id`*.
 */
export function bulkResultsDoc(items: readonly BulkItem[]): El {
  return el("jobs", items.map(bulkItem));
}

export interface DelegationListItem {
  id: string;
  /** `x509` | `jwt`; listed under 1.1 (omit for 1.0 callers if wanted). */
  type?: string;
}

/** `<delegations><delegation><id>…</id><type>x509</type></delegation>…</delegations>`. */
export function delegationListDoc(items: readonly DelegationListItem[]): El {
  return el(
    "delegations",
    items.map((d) => el("delegation", [el("id", d.id), leaf("type", d.type)])),
  );
}

export interface SessionListing {
  files: readonly { name: string; size: number }[];
  dirs: readonly string[];
}

/**
 * Session directory listing (decisions #13): `<list><file size="N">name</file>…<dir>name</dir></list>`;
 * JSON gives names only: `{"file":[…],"dir":[…]}`.
 */
export function sessionListingDoc(listing: SessionListing): El {
  return el("list", [
    listing.files.map((f) => el("file", f.name, { size: String(Math.max(0, Math.trunc(f.size))) })),
    listing.dirs.map((d) => el("dir", d)),
  ]);
}

/** Whole-request error body (decisions #10): `<error><status-code>…</status-code><reason>…</reason></error>`. */
export function errorDoc(statusCode: number, reason: string): El {
  return el("error", [el("status-code", String(statusCode)), el("reason", reason)]);
}
