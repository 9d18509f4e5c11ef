import { escapeXmlText, type BulkItem } from "@ce/glue2";

/** A status result: every item carries a state (the REST state, or "None" for a job not found). */
export type StatusItem = Required<Pick<BulkItem, "statusCode" | "reason" | "id">> & { state: string };

/**
 * Bulk status body without building an element tree: status is the CE's hottest request (clients
 * poll hundreds of jobs at a time), and the tree plus its JSON intermediate cost more than the
 * text itself. Byte-identical to `render(bulkResultsDoc(items), fmt)` (bulkstatus.test.ts checks it).
 */
export function renderBulkStatus(items: readonly StatusItem[], fmt: "json" | "xml"): string {
  if (fmt === "json") {
    let out = '{"job":[';
    for (let i = 0; i < items.length; i++) {
      const j = items[i]!;
      out += `${i === 0 ? "" : ","}{"status-code":"${j.statusCode}","reason":${jsonWord(j.reason)},"id":${jsonString(j.id)},"state":${jsonWord(j.state)}}`;
    }
    return out + "]}";
  }
  if (items.length === 0) return "<jobs/>";
  let out = "<jobs>";
  for (const j of items) {
    out += `<job><status-code>${j.statusCode}</status-code><reason>${escapeXmlText(j.reason)}</reason><id>${escapeXmlText(j.id)}</id><state>${escapeXmlText(j.state)}</state></job>`;
  }
  return out + "</jobs>";
}

// Printable ASCII without `"` and `\`: JSON.stringify would only add the quotes.
const JSON_PLAIN = /^[\x20\x21\x23-\x5b\x5d-\x7e]*$/;

/** JSON.stringify of a string; the common plain id or state without the call (about half the cost). */
function jsonString(s: string): string {
  return JSON_PLAIN.test(s) ? `"${s}"` : JSON.stringify(s);
}

/** The few reasons and state names, each checked once (not per item). */
const words = new Map<string, string>();
function jsonWord(s: string): string {
  let q = words.get(s);
  if (q === undefined) {
    q = jsonString(s);
    if (words.size < 256) words.set(s, q);
  }
  return q;
}
