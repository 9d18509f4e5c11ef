/** The RSL syntax tree. `start`/`end` are character offsets into the parsed text (end exclusive). */

export type RelationOperator = "=" | "!=" | "<" | ">" | "<=" | ">=";

export interface RslLiteral {
  kind: "literal";
  value: string;
  start: number;
  end: number;
}

/** `$(NAME)` reference to an `rsl_substitution` variable. */
export interface RslVariable {
  kind: "variable";
  name: string;
  start: number;
  end: number;
}

/** `a # b` or juxtaposed `$(A)b`: the string values joined without separator. */
export interface RslConcat {
  kind: "concat";
  parts: Array<RslLiteral | RslVariable>;
  start: number;
  end: number;
}

/** A parenthesised value list, e.g. one `("name" "url")` entry of `inputfiles`. */
export interface RslSequence {
  kind: "sequence";
  items: RslValue[];
  start: number;
  end: number;
}

export type RslValue = RslLiteral | RslVariable | RslConcat | RslSequence;

export interface RslRelation {
  kind: "relation";
  /** Lower-cased, underscores removed: `rsl_substitution` → `rslsubstitution`. */
  attribute: string;
  /** As written, for messages. */
  rawAttribute: string;
  op: RelationOperator;
  values: RslValue[];
  start: number;
  end: number;
}

export interface RslBoolean {
  kind: "boolean";
  /** `&` all of, `|` alternatives, `+` several independent jobs (top level only). */
  op: "&" | "|" | "+";
  children: RslNode[];
  start: number;
  end: number;
}

export type RslNode = RslBoolean | RslRelation;

/** Normalizes an attribute name the way RSL does: case-insensitive, `_` ignored. */
export function normalizeAttributeName(name: string): string {
  return name.replace(/_/g, "").toLowerCase();
}
