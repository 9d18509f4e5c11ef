import { BadRequest } from "../errors.js";

/**
 * The XML job-id list (`<jobs><job><id>…</id></job>…</jobs>`, any root name, namespace prefixes
 * ignored, as A-REX) read by one sticky tokenizer in a single pass. A general XML parser spent up
 * to 2 s of event loop on a 1 MiB body of entities or attributes; this reads only what a list
 * can hold, stops at the first error or at the id cap, and never looks at a byte twice (save one
 * unterminated comment, PI or CDATA section, which ends the scan).
 */
const TOKEN =
  /(<\?[\s\S]*?\?>)|(<!--[\s\S]*?-->)|<!\[CDATA\[([\s\S]*?)\]\]>|<(\/?)([A-Za-z_][\w.-]*(?::[A-Za-z_][\w.-]*)?)((?:\s+[^\s=/>"'<]+\s*=\s*(?:"[^"<]*"|'[^'<]*'))*)\s*(\/?)>|([^<]+)/y;
const ENTITY = /&(?:#([0-9]{1,7})|#x([0-9a-fA-F]{1,6})|(lt|gt|amp|quot|apos));|&/g;
const NAMED: Record<string, string> = { lt: "<", gt: ">", amp: "&", quot: '"', apos: "'" };
/** Longest raw <id> text read: 128 characters, each possibly written as a 10-character reference. */
const MAX_ID_TEXT = 1280;
const isJob = (qname: string) => qname === "job" || qname.endsWith(":job");

export interface XmlIdListLimits {
  maxIds: number;
  maxDepth: number;
  /** Thrown when the list holds more than maxIds jobs (a 413 naming the cap). */
  tooMany: (count: number) => Error;
}

export function scanXmlIdList(text: string, lim: XmlIdListLimits): string[] {
  const bad = (what: string, at: number) => {
    const before = text.slice(0, at);
    const line = before.split("\n").length;
    return new BadRequest(`Malformed XML job id list: ${what} (line ${line}, column ${at - before.lastIndexOf("\n")})`, "BAD_ID_LIST");
  };
  const stack: string[] = [];
  const ids: string[] = [];
  let rootSeen = false;
  let jobs = 0;
  let id: string | undefined; // text of the current job's first <id>, once seen
  let collecting = false; // inside that <id>
  let pos = 0;
  while (pos < text.length) {
    TOKEN.lastIndex = pos;
    const m = TOKEN.exec(text);
    if (!m) throw bad(`unexpected ${JSON.stringify(text.slice(pos, pos + 12))}`, pos);
    const at = pos;
    pos = TOKEN.lastIndex;
    const [, pi, comment, cdata, slash, name, , selfClose, chars] = m;
    if (pi !== undefined || comment !== undefined) continue;
    if (chars !== undefined || cdata !== undefined) {
      const raw = cdata ?? chars!;
      if (collecting) {
        // Entities are at most 10 characters each: longer raw text cannot be an id of ≤ 128.
        if (id!.length + raw.length > MAX_ID_TEXT)
          throw new BadRequest(`job[${jobs - 1}] <id> is longer than 128 characters`, "BAD_JOB_ID");
        id += cdata ?? decode(raw, (what) => bad(what, at));
      } else if (/\S/.test(raw) && (stack.length <= 1 || (stack.length === 2 && isJob(stack[1]!)))) {
        throw bad(stack.length === 0 ? "text outside the root element" : "text outside an <id> element", at);
      }
      continue;
    }
    const depth = stack.length; // of the parent
    const local = name!.slice(name!.indexOf(":") + 1); // namespace prefixes are not checked, as A-REX
    if (slash) {
      const open = stack.pop();
      if (open !== name)
        throw bad(open === undefined ? `closing tag </${name}> without an opening tag` : `expected </${open}>, found </${name}>`, at);
      if (collecting && depth === 3) collecting = false;
      else if (depth === 2 && local === "job") closeJob();
      continue;
    }
    if (depth === 0 && rootSeen) throw bad("more than one root element", at);
    if (depth >= lim.maxDepth) throw bad(`elements nested deeper than ${lim.maxDepth} levels`, at);
    if (collecting) throw bad(`job[${jobs - 1}] <id> holds an element, not text`, at);
    rootSeen = true;
    if (depth === 1 && local === "job") {
      if (++jobs > lim.maxIds) throw lim.tooMany(jobs);
      id = undefined;
    } else if (depth === 2 && local === "id" && isJob(stack[1]!) && id === undefined) {
      id = "";
      collecting = true;
    }
    if (selfClose) {
      collecting = false;
      if (depth === 1 && local === "job") closeJob();
    } else {
      stack.push(name!);
    }
  }
  if (stack.length > 0) throw bad(`unclosed <${stack[stack.length - 1]}>`, text.length);
  if (!rootSeen) throw bad("no root element", text.length);
  return ids;

  function closeJob(): void {
    const v = id?.trim();
    if (!v) throw new BadRequest(`job[${jobs - 1}] has no <id>`, "BAD_ID_LIST");
    ids.push(v);
  }
}

function decode(s: string, bad: (what: string) => Error): string {
  if (!s.includes("&")) return s;
  return s.replace(ENTITY, (m, dec: string | undefined, hex: string | undefined, named: string | undefined) => {
    if (named) return NAMED[named]!;
    if (dec === undefined && hex === undefined)
      throw bad("a bare '&' or an undefined entity (only &lt; &gt; &amp; &quot; &apos; and &#…; exist here)");
    const cp = dec !== undefined ? Number(dec) : parseInt(hex!, 16);
    if (cp > 0x10ffff) throw bad(`character reference ${m} is out of range`);
    return String.fromCodePoint(cp);
  });
}
