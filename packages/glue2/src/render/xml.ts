import { type El, hasChildren, sanitizeChars } from "../tree.js";

export interface XmlOptions {
  /** Prepend `<?xml version="1.0" encoding="utf-8"?>` (A-REX does not; clients do not need it). */
  declaration?: boolean;
}

// XML Name (ASCII subset is enough for our own element names); a bad name would corrupt the document.
const NAME = /^[A-Za-z_][A-Za-z0-9_.-]*(?::[A-Za-z_][A-Za-z0-9_.-]*)?$/;

// Printable ASCII without `&<>"` (and TAB/LF): nothing to escape or sanitise, the common case.
const PLAIN = /^[\t\n\x20\x21\x23-\x25\x27-\x3b\x3d\x3f-\x7e]*$/;

export function escapeXmlText(s: string): string {
  if (PLAIN.test(s)) return s;
  return sanitizeChars(s).replace(/[&<>\r]/g, (c) => (c === "&" ? "&amp;" : c === "<" ? "&lt;" : c === ">" ? "&gt;" : "&#13;"));
}

export function escapeXmlAttr(s: string): string {
  // Whitespace other than space is escaped so that attribute-value normalisation keeps it.
  if (PLAIN.test(s) && !/[\t\n]/.test(s)) return s;
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
  // One string grown by concatenation (V8 ropes): cheaper than an array of parts and a join.
  return (opts.declaration ? '<?xml version="1.0" encoding="utf-8"?>' : "") + write(root, "");
}

// Names already checked: documents repeat a few dozen names thousands of times.
const goodNames = new Set<string>();

function checkName(name: string): string {
  if (goodNames.has(name)) return name;
  if (!NAME.test(name)) throw new Error(`invalid XML name: ${JSON.stringify(name)}`);
  if (goodNames.size < 10_000) goodNames.add(name);
  return name;
}

function write(e: El, inheritedNs: string): string {
  const name = checkName(e.name);
  let out = "<" + name;
  const ns = e.ns ?? inheritedNs;
  if (ns !== inheritedNs) out += ' xmlns="' + escapeXmlAttr(ns) + '"';
  if (e.attrs) {
    for (const k in e.attrs) {
      if (k === "xmlns") continue; // the default namespace is carried by `ns` only
      out += " " + checkName(k) + '="' + escapeXmlAttr(e.attrs[k]!) + '"';
    }
  }
  const text = e.text ?? "";
  if (!hasChildren(e) && text === "") return out + "/>";
  out += ">";
  if (text !== "") out += escapeXmlText(text);
  if (hasChildren(e)) for (const c of e.children) out += write(c, ns);
  return out + "</" + name + ">";
}
