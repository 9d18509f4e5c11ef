import { XMLParser, XMLValidator } from "fast-xml-parser";
import { BadRequest, UnsupportedMediaType } from "../errors.js";
import { GENERIC_TYPES } from "./body.js";

/**
 * The job-id list of bulk requests (E5): XML `<jobs><job><id>…</id></job>…</jobs>` (root name not
 * checked, as A-REX) or JSON `{"job":[{"id":"…"}]}` / `{"job":{"id":"…"}}`. Unlike A-REX, a
 * malformed body is a 400 naming the problem instead of a silently empty list (decisions #9), and
 * the format follows Content-Type, or is sniffed when that is absent or generic (decisions #11).
 */
export function parseIdList(body: string, contentType: string | undefined): string[] {
  const text = body.replace(/^\uFEFF/, "");
  const first = /\S/.exec(text)?.[0];
  if (first === undefined) throw new BadRequest("Missing job id list in the request body", "EMPTY_BODY");
  let kind: "xml" | "json";
  if (contentType === "application/json" || contentType?.endsWith("+json")) kind = "json";
  else if (contentType === "application/xml" || contentType === "text/xml" || contentType?.endsWith("+xml")) kind = "xml";
  else if (contentType === undefined || GENERIC_TYPES.has(contentType)) {
    if (first === "<") kind = "xml";
    else if (first === "{" || first === "[") kind = "json";
    else throw new BadRequest("Job id list must be XML (<jobs><job><id>…) or JSON ({\"job\":[{\"id\":…}]})", "BAD_ID_LIST");
  } else {
    throw new UnsupportedMediaType(`Content-Type ${contentType} is not supported for job id lists; use application/xml or application/json`);
  }
  return kind === "json" ? fromJson(text) : fromXml(text);
}

function fromJson(text: string): string[] {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (e) {
    throw new BadRequest(`Malformed JSON job id list: ${(e as Error).message}`, "BAD_ID_LIST");
  }
  if (!doc || typeof doc !== "object" || Array.isArray(doc) || !("job" in doc)) {
    throw new BadRequest('JSON job id list must be an object with key "job"', "BAD_ID_LIST");
  }
  const job = (doc as { job: unknown }).job;
  const items = Array.isArray(job) ? job : [job];
  return items.map((it, i) => {
    const id = it && typeof it === "object" ? (it as { id?: unknown }).id : undefined;
    // Numbers are accepted as their decimal text (A-REX mangles them; ids are strings anyway).
    if (typeof id === "string" && id !== "") return id;
    if (typeof id === "number" && Number.isFinite(id)) return String(id);
    throw new BadRequest(`job[${i}] has no "id" string`, "BAD_ID_LIST");
  });
}

const parser = new XMLParser({
  ignoreAttributes: true,
  removeNSPrefix: true,
  parseTagValue: false,
  trimValues: true,
  processEntities: true,
  htmlEntities: false,
  isArray: (name, jpath) => name === "job" && String(jpath).split(".").length === 2,
});

function fromXml(text: string): string[] {
  // No DTDs: nothing in an id list needs one, and entity expansion is a denial-of-service vector.
  if (/<!DOCTYPE|<!ENTITY/i.test(text)) throw new BadRequest("DOCTYPE is not allowed in job id lists", "BAD_ID_LIST");
  const valid = XMLValidator.validate(text);
  if (valid !== true) {
    throw new BadRequest(`Malformed XML job id list: ${valid.err.msg} (line ${valid.err.line}, column ${valid.err.col})`, "BAD_ID_LIST");
  }
  const doc = parser.parse(text) as Record<string, unknown>;
  const roots = Object.keys(doc).filter((k) => k !== "?xml");
  if (roots.length !== 1) throw new BadRequest("XML job id list must have exactly one root element", "BAD_ID_LIST");
  const root = doc[roots[0]!];
  if (root === "" || root === undefined || root === null) return [];
  if (typeof root !== "object") throw new BadRequest("XML job id list root must contain <job> elements", "BAD_ID_LIST");
  const jobs = ((root as Record<string, unknown>).job ?? []) as unknown[];
  return jobs.map((j, i) => {
    const id = j && typeof j === "object" ? (j as Record<string, unknown>).id : undefined;
    const text = Array.isArray(id) ? id[0] : id;
    if (typeof text === "string" && text !== "") return text;
    if (typeof text === "number") return String(text);
    throw new BadRequest(`job[${i}] has no <id>`, "BAD_ID_LIST");
  });
}
