import { type El, isNsDecl, localName } from "../tree.js";

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
 * Element → JSON value (docs/interface.md "Formats", decisions #17): a childless element is its text (attributes
 * dropped, so `status-code` stays a string); an element with children is an object whose keys are
 * the children's local names in order of first appearance, repeated names collected into arrays,
 * attributes (values, not blanks) under `_attributes` after the children. Mixed text is dropped.
 */
export function renderJsonValue(e: El, forceArrays?: readonly string[]): JsonValue {
  const children = e.children;
  const extra = e.jsonArrays;
  const forced = (forceArrays !== undefined && forceArrays.length > 0) || (extra !== undefined && extra.length > 0);
  // A childless list root still yields its (empty) forced arrays, never a bare string.
  if ((children === undefined || children.length === 0) && !forced) return e.text ?? "";
  // Plain objects and assignments (not a Map and defineProperty per element, nor null-prototype
  // objects, which V8 keeps in slow dictionary mode): bulk answers render thousands of elements.
  const obj: JsonObject = {};
  if (children) {
    for (const c of children) {
      const key = localName(c.name);
      // A leaf is its text (what the recursive call would answer, without the call).
      const v = c.children === undefined && c.jsonArrays === undefined ? (c.text ?? "") : renderJsonValue(c);
      const prev = Object.hasOwn(obj, key) ? obj[key] : undefined;
      // An element's value is a string or an object, never an array: an array here is one collected here.
      if (prev === undefined) set(obj, key, forced && (forceArrays?.includes(key) || extra?.includes(key)) ? [v] : v);
      else if (Array.isArray(prev)) prev.push(v);
      else set(obj, key, [prev, v]);
    }
  }
  // Forced-but-absent names are appended last, as A-REX 7 does.
  if (forced) {
    for (const key of forceArrays ?? []) if (!Object.hasOwn(obj, key)) set(obj, key, []);
    for (const key of extra ?? []) if (!Object.hasOwn(obj, key)) set(obj, key, []);
  }
  if (e.attrs) {
    let a: JsonObject | undefined;
    for (const k in e.attrs) {
      if (isNsDecl(k)) continue;
      set((a ??= {}), localName(k), e.attrs[k]!);
    }
    if (a) obj._attributes = a;
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

// `__proto__` would set the prototype by assignment: that one key is stored with defineProperty.
function set(obj: JsonObject, key: string, value: JsonValue): void {
  if (key === "__proto__") Object.defineProperty(obj, key, { value, enumerable: true, writable: true, configurable: true });
  else obj[key] = value;
}
