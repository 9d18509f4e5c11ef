import { type ActivityInput, type BulkItem, buildActivityDocument, escapeXmlText, glueTime } from "@ce/glue2";
import { ACTIVITY_FIELDS, activityInputFor, UNCHANGED } from "@ce/store";
import type { Identity, Services } from "../context.js";
import { type ActivityFormat, type ActivityText, ActivityCache, activityTextAt, renderActivityText, STAMP_DATE } from "./activity-cache.js";

/** An info result: the job's ComputingActivity facts, or null for a job not found (or not the caller's). */
export interface InfoItem {
  statusCode: number;
  reason: string;
  id: string;
  activity: ActivityInput | null;
}

// The endpoint URL is fixed for a Services object: its host name is parsed once, not per request.
const hostnames = new WeakMap<Services["config"], string>();

function hostnameOf(s: Services): string {
  let h = hostnames.get(s.config);
  if (h === undefined) hostnames.set(s.config, (h = new URL(s.config.endpoint.url).hostname));
  return h;
}

/**
 * The info action: only the fields the activity document shows are read (one script call). Another
 * owner's job answers exactly like a missing one (404 "Job not found", empty info_document).
 */
export async function bulkInfo(s: Services, ids: readonly string[], identity: Identity, now = new Date()): Promise<InfoItem[]> {
  const records = await s.jobs.getManyFields(ids, ACTIVITY_FIELDS);
  const hostname = hostnameOf(s);
  return ids.map((id, i) => {
    const r = records[i];
    if (!r || r.owner !== identity.subject) return { statusCode: 404, reason: "Job not found", id, activity: null };
    return { statusCode: 200, reason: "OK", id, activity: activityInputFor(r, { hostname, now }) };
  });
}

/** The items as bulkResultsDoc takes them (the HTML page is rendered from the tree). */
export function infoBulkItems(items: readonly InfoItem[]): BulkItem[] {
  return items.map((it) => ({
    statusCode: it.statusCode,
    reason: it.reason,
    id: it.id,
    infoDocument: it.activity ? buildActivityDocument(it.activity) : null,
  }));
}

/** Characters of rendered activities a gateway keeps (activity-cache.ts): ~8,000 jobs' texts. */
const CACHE_CHARS = 16 * 1024 * 1024;
const caches = new WeakMap<Services["jobs"], ActivityCache>();

function cacheOf(s: Services): ActivityCache {
  let c = caches.get(s.jobs);
  if (!c) caches.set(s.jobs, (c = new ActivityCache(CACHE_CHARS)));
  return c;
}

const INFO_FIELDS = [...ACTIVITY_FIELDS, "rev"] as const;

/**
 * The info action's JSON or XML body, byte-identical to
 * `render(bulkResultsDoc(infoBulkItems(await bulkInfo(...))), fmt)` (bulkinfo.test.ts checks it),
 * built from the activity texts this gateway already rendered (activity-cache.ts) wherever the
 * job's record is still at the revision they were rendered from; only the other records are read
 * and rendered. Another owner's job answers exactly like a missing one.
 */
export async function bulkInfoText(
  s: Services,
  ids: readonly string[],
  identity: Identity,
  fmt: ActivityFormat,
  now = new Date(),
): Promise<string> {
  const cache = cacheOf(s);
  // The entries themselves, not just their revisions: another request may evict them meanwhile.
  const held = ids.map((id) => cache.peek(fmt, id));
  const rows = await s.jobs.getManyFieldsSince(
    ids,
    INFO_FIELDS,
    held.map((t) => t?.rev),
  );
  const stamp = glueTime(now);
  const hostname = hostnameOf(s);
  const parts: string[] = [];
  for (let i = 0; i < ids.length; i++) {
    const id = ids[i]!;
    const row = rows[i];
    let t: ActivityText | undefined;
    if (row === UNCHANGED) {
      t = held[i]!;
      cache.touch(fmt, id, t);
    } else if (row && row.owner === identity.subject) {
      t = renderActivityText(activityInputFor(row, { hostname, now: STAMP_DATE }), fmt, row.rev ?? 0, row.owner);
      // A record without a revision (written before revisions existed) is never kept.
      if (row.rev !== undefined) cache.put(fmt, id, t);
    }
    const found = t !== undefined && t.owner === identity.subject;
    const code = found ? "200" : "404",
      reason = found ? "OK" : "Job not found";
    if (fmt === "json") {
      const head = `{"status-code":"${code}","reason":"${reason}"${id ? `,"id":${JSON.stringify(id)}` : ""},"info_document":`;
      parts.push(found ? `${head}{"ComputingActivity":${activityTextAt(t!, stamp)}}}` : `${head}""}`);
    } else {
      const head = `<job><status-code>${code}</status-code><reason>${reason}</reason>${id ? `<id>${escapeXmlText(id)}</id>` : ""}`;
      parts.push(found ? `${head}<info_document>${activityTextAt(t!, stamp)}</info_document></job>` : `${head}<info_document/></job>`);
    }
  }
  if (fmt === "json") return `{"job":[${parts.join(",")}]}`;
  return parts.length === 0 ? "<jobs/>" : `<jobs>${parts.join("")}</jobs>`;
}
