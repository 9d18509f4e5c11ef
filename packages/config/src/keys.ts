import { z } from "zod";

/**
 * The schema's keys as data: every key path (for suggestions and the generated reference), the
 * environment variable name of each, and a copy of the schema in which every object refuses keys
 * it does not know. Derived from the schema itself, so a key added there is known here at once.
 */

/** One key of the schema. `path` uses `[]` for "each element of a list" (`jobs.queues[].name`). */
export interface SchemaKey {
  path: string[];
  /** The key's own schema with defaults, optionals and refinements unwrapped. */
  schema: z.ZodTypeAny;
  /** An object of further keys (a section), as opposed to a value. */
  section: boolean;
  /** Absent keys take this (undefined: none, the key is optional or derived). */
  default?: unknown;
  hasDefault: boolean;
  /** Settable through a `CE__…` variable (not inside a list). */
  env?: string;
}

interface Unwrapped {
  inner: z.ZodTypeAny;
  hasDefault: boolean;
  default?: unknown;
}

/** Strips ZodDefault/ZodOptional/ZodNullable/ZodEffects, keeping the outermost default. */
export function unwrap(s: z.ZodTypeAny): Unwrapped {
  let cur = s;
  let hasDefault = false;
  let dflt: unknown;
  for (;;) {
    if (cur instanceof z.ZodDefault) {
      if (!hasDefault) {
        hasDefault = true;
        dflt = (cur._def as { defaultValue: () => unknown }).defaultValue();
      }
      cur = cur._def.innerType;
    } else if (cur instanceof z.ZodOptional || cur instanceof z.ZodNullable) cur = cur._def.innerType;
    else if (cur instanceof z.ZodEffects) cur = cur._def.schema;
    else return { inner: cur, hasDefault, default: dflt };
  }
}

/** `jemPort` → `JEM_PORT`; a path → `CE__ADMIN__JEM_PORT`. */
export function envName(path: readonly string[]): string {
  return `CE__${path.map((seg) => seg.replace(/([a-z0-9])([A-Z])/g, "$1_$2").toUpperCase()).join("__")}`;
}

/** Every key of `schema`, sections before the keys in them, in declaration order. */
export function schemaKeys(schema: z.ZodTypeAny): SchemaKey[] {
  const out: SchemaKey[] = [];
  const walk = (s: z.ZodTypeAny, path: string[], inList: boolean) => {
    const u = unwrap(s);
    const key = (section: boolean): SchemaKey => ({
      path,
      schema: u.inner,
      section,
      hasDefault: u.hasDefault,
      ...(u.hasDefault ? { default: u.default } : {}),
      ...(inList ? {} : { env: envName(path) }),
    });
    if (u.inner instanceof z.ZodObject) {
      if (path.length > 0) out.push(key(true));
      for (const [k, v] of Object.entries(u.inner.shape as Record<string, z.ZodTypeAny>)) walk(v, [...path, k], inList);
      return;
    }
    out.push(key(false));
    if (u.inner instanceof z.ZodArray) {
      const el = unwrap(u.inner._def.type as z.ZodTypeAny).inner;
      if (el instanceof z.ZodObject) {
        for (const [k, v] of Object.entries(el.shape as Record<string, z.ZodTypeAny>)) walk(v, [...path, "[]", k], true);
      }
    }
  };
  walk(schema, [], false);
  return out;
}

/** A copy of `schema` in which every object, at any depth, refuses unknown keys (zod `strict`). */
export function strictDeep<T extends z.ZodTypeAny>(schema: T): T {
  const s: z.ZodTypeAny = schema;
  let out: z.ZodTypeAny = s;
  if (s instanceof z.ZodObject) {
    const shape = Object.fromEntries(Object.entries(s.shape as Record<string, z.ZodTypeAny>).map(([k, v]) => [k, strictDeep(v)]));
    out = new z.ZodObject({ ...s._def, unknownKeys: "strict", shape: () => shape });
  } else if (s instanceof z.ZodDefault) out = new z.ZodDefault({ ...s._def, innerType: strictDeep(s._def.innerType) });
  else if (s instanceof z.ZodOptional) out = new z.ZodOptional({ ...s._def, innerType: strictDeep(s._def.innerType) });
  else if (s instanceof z.ZodNullable) out = new z.ZodNullable({ ...s._def, innerType: strictDeep(s._def.innerType) });
  else if (s instanceof z.ZodEffects) out = new z.ZodEffects({ ...s._def, schema: strictDeep(s._def.schema) });
  else if (s instanceof z.ZodArray) out = new z.ZodArray({ ...s._def, type: strictDeep(s._def.type) });
  else if (s instanceof z.ZodUnion) {
    out = new z.ZodUnion({
      ...s._def,
      options: (s._def.options as z.ZodTypeAny[]).map((o) => strictDeep(o)) as [z.ZodTypeAny, z.ZodTypeAny],
    });
  }
  return out as T;
}

export function levenshtein(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    const cur = [i];
    for (let j = 1; j <= b.length; j++) {
      cur[j] = Math.min(prev[j]! + 1, cur[j - 1]! + 1, prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    prev = cur;
  }
  return prev[b.length]!;
}

/**
 * The candidate nearest to `wrong` (case-insensitive edit distance over the whole path), or the
 * key with the same last segment under another section; undefined when nothing is close enough to
 * be a plausible typo (an unrelated name gets no suggestion rather than a random one).
 */
export function nearest(wrong: string, candidates: readonly string[], sep = "."): string | undefined {
  const w = wrong.toLowerCase();
  const last = (s: string) => s.slice(s.lastIndexOf(sep) + sep.length).toLowerCase();
  let best: string | undefined;
  let bestD = Infinity;
  for (const c of candidates) {
    const d = levenshtein(w, c.toLowerCase());
    if (d < bestD) [best, bestD] = [c, d];
  }
  const room = Math.max(1, Math.floor(last(wrong).replace(/_/g, "").length / 2));
  if (best !== undefined && bestD <= room) return best;
  return candidates.find((c) => last(c) === last(wrong));
}
