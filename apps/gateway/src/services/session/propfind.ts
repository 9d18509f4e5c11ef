import type { Stats } from "node:fs";
import { opendir } from "node:fs/promises";
import { escapeXmlText } from "@ce/glue2";
import { BadRequest, CeError } from "../../errors.js";
import type { Dir, Entry } from "./fs.js";

/**
 * WebDAV PROPFIND answer (RFC 4918 `DAV:multistatus`), the only way the ARC client lists a session
 * directory (arcget, arcls; docs/interface.md E6, decisions #13). Hrefs are absolute paths: the client
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

/** A directory with more entries than one listing may carry. */
export class ListingTooLarge extends CeError {
  constructor(at: string, limit: number) {
    super(
      507,
      "LISTING_TOO_LARGE",
      `Directory ${at} has more than ${limit} entries, the listing limit (gateway.limits.listingEntries); fetch files by name or delete some`,
    );
  }
}

/**
 * Entries of an open directory for a listing (GET or PROPFIND): regular files and directories,
 * examined with lstat (symlinks and special files omitted, as A-REX), sorted by name. A job can
 * create millions of files, so names are streamed and reading stops after `limit` + 1: memory and
 * time per request stay bounded, and a directory over the limit is a 507 naming it rather than a
 * silently short list (arcget would miss outputs without noticing).
 */
export async function listCapped(dir: Dir, at: string, limit: number): Promise<{ files: Entry[]; dirs: Entry[] }> {
  const names: string[] = [];
  const it = await opendir(dir.self, { bufferSize: 128 });
  try {
    for await (const e of it) {
      if (names.length >= limit) throw new ListingTooLarge(at, limit);
      names.push(e.name);
    }
  } finally {
    // Leaving the loop early closes the iterator already; a second close only says so.
    await it.close().catch(() => undefined);
  }
  const files: Entry[] = [];
  const dirs: Entry[] = [];
  for (const name of names.sort()) {
    const stat = await dir.lstat(name).catch(() => undefined); // vanished meanwhile
    if (stat?.isFile()) files.push({ name, stat });
    else if (stat?.isDirectory()) dirs.push({ name, stat });
  }
  return { files, dirs };
}
