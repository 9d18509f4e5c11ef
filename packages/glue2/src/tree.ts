/**
 * The one document model of the gateway: every structured response (versions, job lists, bulk
 * results, delegations, listings, errors, GLUE2) is built as an El tree and rendered to XML, JSON
 * or HTML from it, so the three formats can never drift apart.
 */
export interface El {
  /** Element name; a `prefix:` part is allowed but JSON only ever uses the local name. */
  name: string;
  /**
   * Namespace URI. `undefined` inherits the parent's namespace (as in XML); any other value is
   * emitted as `xmlns="..."` where it differs from the inherited one (`""` undeclares).
   */
  ns?: string;
  attrs?: Record<string, string>;
  children?: El[];
  text?: string;
  /**
   * JSON only: names of children always rendered as an array, `[]` when absent (the interface
   * text types them as arrays, e.g. `delegation_id` of a delegations item). XML/HTML ignore it.
   */
  jsonArrays?: readonly string[];
}

/** Anything accepted in a children list: falsy entries are skipped and nested arrays flattened. */
export type Child = El | null | undefined | false | readonly Child[];
export type Scalar = string | number | boolean;
export type AttrValue = Scalar | null | undefined;

/**
 * Build an element. `content` is either a children list or a text value (numbers/booleans are
 * stringified). Attributes with null/undefined values are dropped.
 */
export function el(name: string, content?: readonly Child[] | Scalar | null, attrs?: Record<string, AttrValue>): El {
  const e: El = { name };
  if (Array.isArray(content)) {
    const children = flatten(content);
    if (children.length > 0) e.children = children;
  } else if (content !== undefined && content !== null) {
    e.text = String(content);
  }
  if (attrs) {
    const a: Record<string, string> = {};
    let any = false;
    for (const [k, v] of Object.entries(attrs)) {
      if (v === undefined || v === null) continue;
      a[k] = String(v);
      any = true;
    }
    if (any) e.attrs = a;
  }
  return e;
}

/** Leaf element, or nothing when the value is absent (null/undefined/empty string). */
export function leaf(name: string, value: Scalar | null | undefined, attrs?: Record<string, AttrValue>): El | undefined {
  if (value === undefined || value === null || value === "") return undefined;
  return el(name, value, attrs);
}

/** Repeated leaf elements, one per non-empty value. */
export function leaves(name: string, values: readonly (Scalar | null | undefined)[] | undefined): El[] {
  if (!values) return [];
  const out: El[] = [];
  for (const v of values) {
    const e = leaf(name, v);
    if (e) out.push(e);
  }
  return out;
}

/** Integer leaf: pyarcrest int()s some GLUE2 values, so never emit fractions, NaN or Infinity. */
export function intLeaf(name: string, value: number | null | undefined): El | undefined {
  if (value === undefined || value === null || !Number.isFinite(value)) return undefined;
  return el(name, String(Math.round(value)));
}

/** Same element placed in namespace `ns`. */
export function withNs(e: El, ns: string): El {
  return { ...e, ns };
}

/** Local part of a possibly prefixed name. */
export function localName(name: string): string {
  const i = name.indexOf(":");
  return i < 0 ? name : name.slice(i + 1);
}

/** True when the attribute is a namespace declaration (never data). */
export function isNsDecl(attrName: string): boolean {
  return attrName === "xmlns" || attrName.startsWith("xmlns:");
}

export function hasChildren(e: El): e is El & { children: El[] } {
  return e.children !== undefined && e.children.length > 0;
}

function flatten(list: readonly Child[], out: El[] = []): El[] {
  for (const c of list) {
    if (!c) continue;
    if (Array.isArray(c)) flatten(c as readonly Child[], out);
    else out.push(c as El);
  }
  return out;
}

/** Characters XML 1.0 cannot carry (C0 controls except TAB/LF/CR, lone surrogates, U+FFFE/FFFF). */
const NOT_XML_CHAR = /[^\t\n\r\u0020-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]/gu;

/** Replace characters that no XML/HTML consumer can accept with U+FFFD instead of emitting garbage. */
export function sanitizeChars(s: string): string {
  return s.replace(NOT_XML_CHAR, "\uFFFD");
}
