/**
 * Shared reading of the wire for the contract suite (tests/wire/*.test.ts).
 *
 * The suite reads answers the way a client does, independently of the service's own renderers:
 * a small XML reader of its own (not @ce/glue2), JSON through JSON.parse, and one normal form of
 * a bulk item for both formats so that one assertion covers JSON and XML alike.
 *
 * Section names in test titles are those of the interface text, used as headings in docs/interface.md
 * ("E4", "Body shapes", "Errors" ...). "Deviation #N" names the row of docs/interface.md's Deviations table where the service
 * knowingly answers something else than the interface text.
 */
import { expect } from "vitest";
import type { Reply, RequestOptions, TestGateway } from "../../apps/gateway/test/harness.js";
import { waitFor } from "@ce/testing";

export type Fmt = "json" | "xml";
export const FORMATS: readonly Fmt[] = ["json", "xml"];
export const VERSIONS = ["1.0", "1.1"] as const;
export type Version = (typeof VERSIONS)[number];

/** General rule 3: `application/json` gives JSON; `text/xml` or `application/xml` gives XML. */
export const ACCEPT: Record<Fmt, string> = { json: "application/json", xml: "text/xml" };

/** Job table: "Job identifier (a UUID)". */
export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** States and transitions: the 17 REST state names a client may see. */
export const REST_STATE_NAMES = [
  "ACCEPTING",
  "ACCEPTED",
  "PREPARING",
  "PREPARED",
  "SUBMITTING",
  "QUEUING",
  "RUNNING",
  "HELD",
  "EXITINGLRMS",
  "OTHER",
  "EXECUTED",
  "FINISHING",
  "FINISHED",
  "FAILED",
  "KILLING",
  "KILLED",
  "WIPED",
] as const;

/** E7: "<file type> is one of" these fourteen. */
export const DIAGNOSE_TYPES = [
  "failed",
  "local",
  "errors",
  "description",
  "diag",
  "comment",
  "status",
  "acl",
  "xml",
  "input",
  "output",
  "input_status",
  "output_status",
  "statistics",
] as const;

// ---- a minimal XML reader (elements, attributes, text; enough for the service's documents) ----

export interface XNode {
  name: string;
  attrs: Record<string, string>;
  children: XNode[];
  text: string;
}

const ENTITIES: Record<string, string> = { lt: "<", gt: ">", amp: "&", quot: '"', apos: "'" };
const unescape = (s: string) =>
  s.replace(/&(#x[0-9a-f]+|#[0-9]+|[a-z]+);/gi, (m, e: string) =>
    e[0] === "#" ? String.fromCodePoint(e[1] === "x" || e[1] === "X" ? parseInt(e.slice(2), 16) : Number(e.slice(1))) : (ENTITIES[e] ?? m),
  );

/** Parses a well-formed document; throws on anything unbalanced (the suite wants to know). */
export function parseXml(text: string): XNode {
  const body = text.replace(/^\uFEFF?\s*(<\?xml[^>]*\?>)?/, "").replace(/<!--[\s\S]*?-->/g, "");
  const root: XNode = { name: "#document", attrs: {}, children: [], text: "" };
  const stack: XNode[] = [root];
  const tag = /<(\/?)([A-Za-z_][\w.:-]*)((?:\s+[\w.:-]+\s*=\s*(?:"[^"]*"|'[^']*'))*)\s*(\/?)>|([^<]+)|(<!\[CDATA\[[\s\S]*?\]\]>)/gy;
  let m: RegExpExecArray | null;
  let pos = 0;
  while ((m = tag.exec(body))) {
    pos = tag.lastIndex;
    const top = stack[stack.length - 1]!;
    if (m[5] !== undefined) top.text += unescape(m[5]);
    else if (m[6] !== undefined) top.text += m[6].slice(9, -3);
    else if (m[1]) {
      if (local(top.name) !== local(m[2]!) || top.name !== m[2]) throw new Error(`XML: </${m[2]}> closes <${top.name}>`);
      stack.pop();
    } else {
      const attrs: Record<string, string> = {};
      for (const a of m[3]!.matchAll(/([\w.:-]+)\s*=\s*(?:"([^"]*)"|'([^']*)')/g)) attrs[a[1]!] = unescape(a[2] ?? a[3] ?? "");
      const node: XNode = { name: m[2]!, attrs, children: [], text: "" };
      top.children.push(node);
      if (!m[4]) stack.push(node);
    }
  }
  if (pos < body.trimEnd().length) throw new Error(`XML: unreadable at offset ${pos}`);
  if (stack.length !== 1 || root.children.length !== 1) throw new Error("XML: not one balanced root element");
  return root.children[0]!;
}

/** Element names are compared by local name, as the ARC client does (namespace prefixes vary). */
export const local = (name: string) => name.slice(name.indexOf(":") + 1);
export const kids = (n: XNode, name: string) => n.children.filter((c) => local(c.name) === name);
export const kid = (n: XNode, name: string): XNode | undefined => kids(n, name)[0];

// ---- bulk items in one normal form ----

/**
 * A per-item result element as the client sees it: leaf fields as strings (JSON numbers are
 * turned into strings too; the suite asserts the JSON type separately), repeated fields as
 * arrays, `info_document` kept as given (XNode for XML, the JSON value for JSON).
 */
export type Item = Record<string, unknown> & { "status-code"?: string; reason?: string; id?: string; state?: string };

/**
 * Body shapes: the answer's items. XML: root `jobs`, one `job` element each. JSON: key `job`
 * holding an array (Deviation #6: always an array, the interface text allows a single object).
 */
export function itemsOf(r: Reply, fmt: Fmt): Item[] {
  if (fmt === "json") {
    const doc = r.json();
    expect(Object.keys(doc), "JSON bulk body: one key, job").toEqual(["job"]);
    expect(Array.isArray(doc.job), "Deviation #6: job is always an array").toBe(true);
    return (doc.job as Record<string, unknown>[]).map((o) => {
      const out: Item = {};
      for (const [k, v] of Object.entries(o)) out[k] = typeof v === "number" ? String(v) : v;
      return out;
    });
  }
  const root = parseXml(r.text);
  expect(local(root.name), "Body shapes: XML root element jobs").toBe("jobs");
  return root.children.map((job) => {
    expect(local(job.name), "Body shapes: repeated job elements").toBe("job");
    const out: Item = {};
    for (const c of job.children) {
      const k = local(c.name);
      const v = k === "info_document" ? c : c.children.length ? c : c.text;
      if (k in out) out[k] = [...(Array.isArray(out[k]) ? (out[k] as unknown[]) : [out[k]]), v];
      else out[k] = v;
    }
    return out;
  });
}

/** Per-item result element: status-code is a 3-digit RFC 7231 value; JSON renders it as a string (Deviation #5). */
export function expectItemBasics(items: Item[], fmt: Fmt, raw?: Reply): void {
  for (const it of items) {
    expect(it["status-code"], "Per-item result: status-code, 3 digits").toMatch(/^[1-5][0-9]{2}$/);
    expect(typeof it.reason, "Per-item result: reason present in all bulk responses").toBe("string");
    expect((it.reason as string).length, "Errors 3: a reason text accompanies each code").toBeGreaterThan(0);
  }
  if (fmt === "json" && raw) {
    for (const o of raw.json().job as Record<string, unknown>[])
      expect(typeof o["status-code"], "Deviation #5: status-code is a JSON string").toBe("string");
  }
}

/** General rule 3 and Body shapes: the Content-Type of a structured answer in `fmt`. */
export function expectFormat(r: Reply, fmt: Fmt | "html"): void {
  const ct = String(r.headers["content-type"] ?? "");
  if (fmt === "json") expect(ct).toMatch(/^application\/json\b/);
  else if (fmt === "xml") expect(ct).toMatch(/^(application|text)\/xml\b/);
  else expect(ct).toMatch(/^text\/html\b/);
}

/** Job-id list body (Body shapes) in either format; `single` sends one id as an object (JSON). */
export function idList(ids: readonly string[], fmt: Fmt, single = false): { body: string; headers: Record<string, string> } {
  if (fmt === "json") {
    const job = single && ids.length === 1 ? { id: ids[0] } : ids.map((id) => ({ id }));
    return { body: JSON.stringify({ job }), headers: { "content-type": "application/json" } };
  }
  return { body: `<jobs>${ids.map((id) => `<job><id>${id}</id></job>`).join("")}</jobs>`, headers: { "content-type": "application/xml" } };
}

/** `POST <base>/jobs?action=<action>` with an id list; returns the reply and its items. */
export async function bulk(
  t: Pick<TestGateway, "request" | "rest">,
  version: Version,
  action: string,
  ids: readonly string[],
  fmt: Fmt,
  opts: RequestOptions & { single?: boolean } = {},
) {
  const { body, headers } = idList(ids, fmt, opts.single);
  const r = await t.request("POST", `${t.rest}/${version}/jobs?action=${action}`, {
    ...opts,
    body,
    headers: { ...headers, ...opts.headers },
    accept: ACCEPT[fmt],
  });
  if (r.status !== 201 && r.status !== 200) return { r, items: [] as Item[] };
  return { r, items: itemsOf(r, fmt) };
}

export const XRSL_TYPE = { "content-type": "application/rsl" };
export const ADL_TYPE = { "content-type": "application/xml" };

/** `POST <base>/jobs?action=new`; returns the reply and its items (none when not 201). */
export async function submit(
  t: Pick<TestGateway, "request" | "rest">,
  version: Version,
  body: string,
  fmt: Fmt,
  opts: RequestOptions & { query?: string } = {},
) {
  const headers = { ...(body.trimStart().startsWith("<") ? ADL_TYPE : XRSL_TYPE), ...opts.headers };
  const r = await t.request("POST", `${t.rest}/${version}/jobs?action=new${opts.query ?? ""}`, {
    ...opts,
    body,
    headers,
    accept: ACCEPT[fmt],
  });
  return { r, items: r.status === 201 ? itemsOf(r, fmt) : [] };
}

/** Submits `n` plain jobs (one request) and returns their ids. */
export async function newJobs(
  t: Pick<TestGateway, "request" | "rest">,
  n: number,
  xrsl = '&(executable="/bin/echo")(arguments="hi")(stdout="out.txt")',
): Promise<string[]> {
  const { r, items } = await submit(t, "1.1", n === 1 ? xrsl : `+${Array.from({ length: n }, () => `(${xrsl})`).join("")}`, "json");
  expect(r.status).toBe(201);
  const ids = items.map((i) => i.id!);
  expect(ids.every((id) => UUID.test(id))).toBe(true);
  return ids;
}

/** The whole-request error document (Deviation #10): `error` with `status-code` and `reason`. */
export function errorOf(r: Reply, fmt: Fmt): { code: string; reason: string } {
  if (fmt === "json") {
    const doc = r.json();
    return { code: String(doc["status-code"]), reason: String(doc.reason) };
  }
  const root = parseXml(r.text);
  expect(local(root.name)).toBe("error");
  return { code: kid(root, "status-code")?.text ?? "", reason: kid(root, "reason")?.text ?? "" };
}

/** Polls `f` until it returns a value (not undefined) or `ms` pass. */
export async function until<T>(f: () => Promise<T | undefined>, ms: number, what: string): Promise<T> {
  return waitFor(what, f, ms, { everyMs: 250 });
}
