import { type El, hasChildren, sanitizeChars } from "../tree.js";

export interface XmlOptions {
  /** Prepend `<?xml version="1.0" encoding="utf-8"?>` (A-REX does not; clients do not need it). */
  declaration?: boolean;
}

// XML Name (ASCII subset is enough for our own element names); a bad name would corrupt the document.
const NAME = /^[A-Za-z_][A-Za-z0-9_.-]*(?::[A-Za-z_][A-Za-z0-9_.-]*)?$/;

export function escapeXmlText(s: string): string {
  return sanitizeChars(s).replace(/[&<>\r]/g, (c) => (c === "&" ? "&amp;" : c === "<" ? "&lt;" : c === ">" ? "&gt;" : "&#13;"));
}

export function escapeXmlAttr(s: string): string {
  // Whitespace other than space is escaped so that attribute-value normalisation keeps it.
  return sanitizeChars(s).replace(/[&<>"\t\n\r]/g, (c) => XML_ATTR_ESC[c] as string);
}

const XML_ATTR_ESC: Record<string, string> = {
  "&": "&amp;",
  "<": "&lt;",
  ">": "&gt;",
  '"': "&quot;",
  "\t": "&#9;",
  "\n": "&#10;",
  "\r": "&#13;",
};

/** Serialise a tree: no indentation, `xmlns` where the namespace first appears or changes. */
export function renderXml(root: El, opts: XmlOptions = {}): string {
  const out: string[] = [];
  if (opts.declaration) out.push('<?xml version="1.0" encoding="utf-8"?>');
  write(root, "", out);
  return out.join("");
}

function checkName(name: string): string {
  if (!NAME.test(name)) throw new Error(`invalid XML name: ${JSON.stringify(name)}`);
  return name;
}

function write(e: El, inheritedNs: string, out: string[]): void {
  const name = checkName(e.name);
  out.push("<", name);
  const ns = e.ns ?? inheritedNs;
  if (ns !== inheritedNs) out.push(' xmlns="', escapeXmlAttr(ns), '"');
  if (e.attrs) {
    for (const [k, v] of Object.entries(e.attrs)) {
      if (k === "xmlns") continue; // the default namespace is carried by `ns` only
      out.push(" ", checkName(k), '="', escapeXmlAttr(v), '"');
    }
  }
  const text = e.text ?? "";
  if (!hasChildren(e) && text === "") {
    out.push("/>");
    return;
  }
  out.push(">");
  if (text !== "") out.push(escapeXmlText(text));
  if (hasChildren(e)) for (const c of e.children) write(c, ns, out);
  out.push("</", name, ">");
}
