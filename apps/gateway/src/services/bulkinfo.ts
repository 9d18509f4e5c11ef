import { type ActivityInput, type ActivityJsonValue, type BulkItem, activityJsonValue, buildActivityDocument, escapeXmlText, pushActivityXml } from "@ce/glue2";
import { ACTIVITY_FIELDS, activityInputFor } from "@ce/store";
import type { Identity, Services } from "../context.js";

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
  return items.map((it) => ({ statusCode: it.statusCode, reason: it.reason, id: it.id, infoDocument: it.activity ? buildActivityDocument(it.activity) : null }));
}

/**
 * Bulk info body without the element tree: byte-identical to
 * `render(bulkResultsDoc(infoBulkItems(items)), fmt)` (bulkinfo.test.ts checks it). JSON: plain
 * values and one JSON.stringify; XML: one list of parts and one join.
 */
export function renderBulkInfo(items: readonly InfoItem[], fmt: "json" | "xml"): string {
  if (fmt === "json") {
    const job = items.map((j) => {
      const o: Record<string, string | { ComputingActivity: ActivityJsonValue }> = { "status-code": String(j.statusCode), reason: j.reason };
      if (j.id) o.id = j.id;
      o.info_document = j.activity ? { ComputingActivity: activityJsonValue(j.activity) } : "";
      return o;
    });
    return JSON.stringify({ job });
  }
  if (items.length === 0) return "<jobs/>";
  const parts = ["<jobs>"];
  for (const j of items) {
    parts.push(`<job><status-code>${j.statusCode}</status-code><reason>${escapeXmlText(j.reason)}</reason>${j.id ? `<id>${escapeXmlText(j.id)}</id>` : ""}`);
    if (j.activity) {
      parts.push("<info_document>");
      pushActivityXml(parts, j.activity);
      parts.push("</info_document></job>");
    } else parts.push("<info_document/></job>");
  }
  parts.push("</jobs>");
  return parts.join("");
}
