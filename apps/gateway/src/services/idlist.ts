import { BadRequest, CeError } from "../errors.js";
import { unsupportedType } from "./body.js";
import { scanXmlIdList } from "./idlist-xml.js";

/** Ids per request when the caller does not say (the config default of gateway.limits.idsPerRequest). */
export const DEFAULT_MAX_IDS = 10_000;
/** Deepest element nesting an XML id list needs is 3 (`<jobs><job><id>`); a little slack for wrappers. */
export const MAX_XML_DEPTH = 8;

/**
 * What an id in a list may look like: 1–128 printable ASCII characters, no spaces. Ours are UUIDs
 * and A-REX ids are alphanumeric; anything else cannot name a job, and refusing it keeps control
 * characters and megabyte "ids" out of Redis keys, logs and the echoed per-item results.
 */
const ID_CHARS = /^[\x21-\x7e]+$/;
export function isListedId(id: string): boolean {
  // The length apart: V8 runs the bounded repeat {1,128} about 1.5 times slower.
  return id.length <= 128 && ID_CHARS.test(id);
}

export class TooManyIds extends CeError {
  constructor(what: string, max: number) {
    super(413, "TOO_MANY_IDS", `${what}; the limit is ${max} job ids per request`);
  }
}

/**
 * The format a bulk request's Content-Type declares (Body shapes: XML or JSON), or undefined when
 * it is absent and the body decides (decisions #11: the ARC C++ client sends none). Any other type
 * is a 415 naming the accepted ones, decided before the body is read: the form encodings included,
 * which another site's form can send (docs/security.md, cross-site requests).
 */
export function idListKind(contentType: string | undefined): "xml" | "json" | undefined {
  if (contentType === undefined) return undefined;
  if (contentType === "application/json" || contentType.endsWith("+json")) return "json";
  if (contentType === "application/xml" || contentType === "text/xml" || contentType.endsWith("+xml")) return "xml";
  throw unsupportedType(contentType, "job id lists", ["application/json", "application/xml"], true);
}

function sniffIdList(first: string): "xml" | "json" {
  if (first === "<") return "xml";
  if (first === "{" || first === "[") return "json";
  throw new BadRequest('Job id list must be XML (<jobs><job><id>…) or JSON ({"job":[{"id":…}]})', "BAD_ID_LIST");
}

/**
 * The job-id list of bulk requests (E5): XML `<jobs><job><id>…</id></job>…</jobs>` (root name not
 * checked, as A-REX) or JSON `{"job":[{"id":"…"}]}` / `{"job":{"id":"…"}}`. Unlike A-REX, a
 * malformed body is a 400 naming the problem instead of a silently empty list (decisions #9), and
 * the format follows Content-Type, or is sniffed when that is absent (decisions #11).
 * More than `maxIds` ids is a 413, decided before the list is materialised.
 */
export function parseIdList(body: string, contentType: string | undefined, maxIds = DEFAULT_MAX_IDS): string[] {
  const text = body.replace(/^\uFEFF/, "");
  const first = /\S/.exec(text)?.[0];
  if (first === undefined) throw new BadRequest("Missing job id list in the request body", "EMPTY_BODY");
  const kind = idListKind(contentType) ?? sniffIdList(first);
  if (kind === "json") {
    const quick = quickJsonIdList(text, maxIds);
    if (quick) return quick;
  }
  const ids = kind === "json" ? fromJson(text, maxIds) : fromXml(text, maxIds);
  ids.forEach((id, i) => {
    if (!isListedId(id)) {
      throw new BadRequest(
        `job[${i}] id ${JSON.stringify(id.slice(0, 40))}${id.length > 40 ? "…" : ""} is not a job id: ids are 1-128 printable ASCII characters without spaces`,
        "BAD_JOB_ID",
      );
    }
  });
  return ids;
}

// JSON whitespace is exactly [ \t\n\r]. An id of listed-id syntax without `"` and `\`: the JSON
// string is the id itself.
const LIST_HEAD = /[ \t\n\r]*\{[ \t\n\r]*"job"[ \t\n\r]*:[ \t\n\r]*\[/y;
const LIST_ITEM = /[ \t\n\r]*\{[ \t\n\r]*"id"[ \t\n\r]*:[ \t\n\r]*"([\x21\x23-\x5b\x5d-\x7e]{1,128})"[ \t\n\r]*\}[ \t\n\r]*([,\]])/y;
const LIST_TAIL = /[ \t\n\r]*\}[ \t\n\r]*$/y;

/**
 * The list as clients send it, `{"job":[{"id":"<id>"},…]}` (JSON whitespace anywhere between
 * tokens), read without JSON.parse and its objects: about half the parsing cost. Only that
 * shape, with ids of listed-id syntax that need no escapes; anything else (escapes, numbers,
 * other keys, one object, an empty list, more than `maxIds`) is undefined and goes the general
 * way. For what it takes, the ids are those JSON.parse reads, all valid (idlist.test.ts checks).
 */
export function quickJsonIdList(text: string, maxIds: number): string[] | undefined {
  LIST_HEAD.lastIndex = 0;
  if (!LIST_HEAD.test(text)) return undefined;
  const ids: string[] = [];
  let at = LIST_HEAD.lastIndex;
  for (;;) {
    LIST_ITEM.lastIndex = at;
    const m = LIST_ITEM.exec(text);
    if (!m || ids.length >= maxIds) return undefined;
    ids.push(m[1]!);
    at = LIST_ITEM.lastIndex;
    if (m[2] === "]") break;
  }
  LIST_TAIL.lastIndex = at;
  return LIST_TAIL.test(text) ? ids : undefined;
}

function fromJson(text: string, maxIds: number): string[] {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (e) {
    throw new BadRequest(`Malformed JSON job id list: ${(e as Error).message}`, "BAD_ID_LIST");
  }
  if (!doc || typeof doc !== "object" || Array.isArray(doc) || !Object.hasOwn(doc, "job")) {
    throw new BadRequest('JSON job id list must be an object with key "job"', "BAD_ID_LIST");
  }
  const job = (doc as { job: unknown }).job;
  const items = Array.isArray(job) ? job : [job];
  if (items.length > maxIds) throw new TooManyIds(`${items.length} job ids in one request`, maxIds);
  return items.map((it, i) => {
    const id = it && typeof it === "object" && Object.hasOwn(it, "id") ? (it as { id?: unknown }).id : undefined;
    // Numbers are accepted as their decimal text (A-REX mangles them; ids are strings anyway).
    if (typeof id === "string" && id !== "") return id;
    if (typeof id === "number" && Number.isFinite(id)) return String(id);
    throw new BadRequest(`job[${i}] has no "id" string`, "BAD_ID_LIST");
  });
}

function fromXml(text: string, maxIds: number): string[] {
  // No DTDs: nothing in an id list needs one, and entity expansion is a denial-of-service vector.
  if (/<!DOCTYPE|<!ENTITY/i.test(text)) throw new BadRequest("DOCTYPE is not allowed in job id lists", "BAD_ID_LIST");
  // Each id costs 4 tags (<job><id></id></job>): more markup than maxIds need is refused at once.
  const tags = countChar(text, "<");
  if (tags > 4 * maxIds + 64) throw new TooManyIds(`XML job id list has ${tags} tags, more than ${maxIds} ids need`, maxIds);
  return scanXmlIdList(text, {
    maxIds,
    maxDepth: MAX_XML_DEPTH,
    tooMany: (n) => new TooManyIds(`More than ${n - 1} job ids in one request`, maxIds),
  });
}

function countChar(s: string, ch: string): number {
  let n = 0;
  for (let i = s.indexOf(ch); i !== -1; i = s.indexOf(ch, i + 1)) n++;
  return n;
}
