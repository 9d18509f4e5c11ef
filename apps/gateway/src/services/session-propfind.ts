import type { Stats } from "node:fs";
import { escapeXmlText } from "@ce/glue2";
import { BadRequest } from "../errors.js";

/**
 * WebDAV PROPFIND answer (RFC 4918 `DAV:multistatus`), the only way the ARC client lists a session
 * directory (arcget, arcls; arex-rest.md §10.4, §13 item 14). Hrefs are absolute paths: the client
 * prefixes `scheme://host:port` and strips the request URL + `/`, so a child href must be exactly
 * `<request path>/<name>` and the collection itself `<request path>/` (see `davHref` for encoding).
 */

export interface DavEntry {
  href: string;
  displayName: string;
  stat: Stats;
  dir: boolean;
}

/**
 * `Depth` header → 0 or 1. Absent and `infinity` are answered as 1: we never recurse (an
 * unbounded walk of a job-controlled tree is a cheap DoS), and clients recurse themselves.
 */
export function parseDepth(header: string | undefined): 0 | 1 {
  const v = header?.trim().toLowerCase();
  if (v === undefined || v === "" || v === "1" || v === "infinity") return 1;
  if (v === "0") return 0;
  throw new BadRequest("Invalid Depth header: expected 0, 1 or infinity", "BAD_DEPTH");
}

/** RFC 3339 / ISO 8601 without milliseconds: `2026-11-21T06:16:42Z`. */
function isoSeconds(d: Date): string {
  return d.toISOString().replace(/\.\d{3}Z$/, "Z");
}

function responseXml(e: DavEntry): string {
  const created = e.stat.birthtimeMs > 0 ? e.stat.birthtime : e.stat.ctime;
  return [
    "<d:response>",
    `<d:href>${escapeXmlText(e.href)}</d:href>`,
    "<d:propstat><d:prop>",
    `<d:displayname>${escapeXmlText(e.displayName)}</d:displayname>`,
    e.dir ? "<d:resourcetype><d:collection/></d:resourcetype>" : "<d:resourcetype/>",
    e.dir ? "" : `<d:getcontentlength>${e.stat.size}</d:getcontentlength>`,
    `<d:getlastmodified>${e.stat.mtime.toUTCString()}</d:getlastmodified>`,
    `<d:creationdate>${isoSeconds(created)}</d:creationdate>`,
    "</d:prop><d:status>HTTP/1.1 200 OK</d:status></d:propstat>",
    "</d:response>",
  ].join("");
}

export function multistatusXml(entries: readonly DavEntry[]): string {
  return `<?xml version="1.0" encoding="utf-8"?>\n<d:multistatus xmlns:d="DAV:">${entries.map(responseXml).join("")}</d:multistatus>\n`;
}
