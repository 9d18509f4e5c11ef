import { type El, hasChildren, isNsDecl, localName } from "../tree.js";

export type JsonValue = string | JsonValue[] | { [key: string]: JsonValue };
type JsonObject = { [key: string]: JsonValue };

export interface JsonOptions {
  /**
   * Names of the root's direct children that are always arrays (even with one member) and `[]`
   * when absent (decisions #6): `job`, `delegation`, `version`, `file`, `dir`.
   */
  forceArrays?: readonly string[];
}

/**
 * Element → JSON value (arex-rest §2.5, decisions #17): a childless element is its text (attributes
 * dropped, so `status-code` stays a string); an element with children is an object whose keys are
 * the children's local names in order of first appearance, repeated names collected into arrays,
 * attributes (values, not blanks) under `_attributes` after the children. Mixed text is dropped.
 */
export function renderJsonValue(e: El, forceArrays?: readonly string[]): JsonValue {
  if (!hasChildren(e)) {
    if ((!forceArrays || forceArrays.length === 0) && !e.jsonArrays?.length) return e.text ?? "";
    // A childless list root still yields its (empty) forced arrays, never a bare string.
  }
  const groups = new Map<string, JsonValue[]>();
  for (const c of e.children ?? []) {
    const key = localName(c.name);
    let g = groups.get(key);
    if (!g) groups.set(key, (g = []));
    g.push(renderJsonValue(c));
  }
  const forced = new Set([...(forceArrays ?? []), ...(e.jsonArrays ?? [])]);
  const obj: JsonObject = {};
  for (const [key, values] of groups) {
    set(obj, key, forced.has(key) || values.length > 1 ? values : (values[0] as JsonValue));
  }
  // Forced-but-absent names are appended last, as A-REX 7 does.
  for (const key of forced) if (!groups.has(key)) set(obj, key, []);
  const attrs = e.attrs ? Object.entries(e.attrs).filter(([k]) => !isNsDecl(k)) : [];
  if (attrs.length > 0) {
    const a: JsonObject = {};
    for (const [k, v] of attrs) set(a, localName(k), v);
    set(obj, "_attributes", a);
  }
  return obj;
}

/**
 * Render a document as JSON. The root name is not emitted (the output is the root's content).
 * A childless root without forced arrays gives `{}` (or its text as a JSON string if it has
 * text) — never an empty body. Non-ASCII stays as real UTF-8 (JSON.stringify escapes only what
 * JSON requires).
 */
export function renderJson(root: El, opts: JsonOptions = {}): string {
  let v = renderJsonValue(root, opts.forceArrays);
  if (v === "") v = {};
  return JSON.stringify(v);
}

// defineProperty so that a key such as `__proto__` is stored as data, not as the prototype.
function set(obj: JsonObject, key: string, value: JsonValue): void {
  Object.defineProperty(obj, key, { value, enumerable: true, writable: true, configurable: true });
}
