/**
 * Turns the RSL tree of one job into a flat list of relations with plain string values:
 * resolves `rsl_substitution` variables and concatenation, and picks alternatives.
 *
 * Alternatives (`|`): the CE has no broker, so the FIRST alternative is used and the others are
 * ignored. This applies both to a top-level `|(...)(...)` and to a `(|(a=1)(a=2))` nested in `&`.
 */
import { InvalidDescriptionError, positionAt } from "../../errors.js";
import type { RelationOperator, RslNode, RslRelation, RslValue } from "./ast.js";

/** A string, or a parenthesised list of values (lists of lists are allowed). */
export type XValue = string | XValue[];

export interface EvaluatedRelation {
  attribute: string;
  rawAttribute: string;
  op: RelationOperator;
  values: XValue[];
  start: number;
  end: number;
}

/** The RSL nodes that are separate jobs: the children of a top-level `+`, else the node itself. */
export function splitJobs(root: RslNode): RslNode[] {
  return root.kind === "boolean" && root.op === "+" ? root.children : [root];
}

/** Flattens one job: document order, variables visible after their definition. */
export function evaluateJob(node: RslNode, text: string): EvaluatedRelation[] {
  const out: EvaluatedRelation[] = [];
  const vars = new Map<string, string>();
  walk(node, text, vars, out);
  return out;
}

function walk(node: RslNode, text: string, vars: Map<string, string>, out: EvaluatedRelation[]): void {
  if (node.kind === "boolean") {
    if (node.op === "|") {
      const first = node.children[0];
      if (first) walk(first, text, vars, out);
      return;
    }
    if (node.op === "+") {
      throw new InvalidDescriptionError(
        "xRSL: '+' (several jobs) may only appear at the top level",
        undefined,
        positionAt(text, node.start),
      );
    }
    for (const child of node.children) walk(child, text, vars, out);
    return;
  }
  const values = node.values.map((v) => evaluateValue(v, text, vars));
  if (node.attribute === "rslsubstitution") {
    defineVariables(node, values, text, vars);
    return;
  }
  out.push({
    attribute: node.attribute,
    rawAttribute: node.rawAttribute,
    op: node.op,
    values,
    start: node.start,
    end: node.end,
  });
}

function defineVariables(node: RslRelation, values: XValue[], text: string, vars: Map<string, string>): void {
  for (const v of values) {
    if (!Array.isArray(v) || v.length !== 2 || typeof v[0] !== "string" || typeof v[1] !== "string") {
      const pos = positionAt(text, node.start);
      throw new InvalidDescriptionError(
        `xRSL attribute '${node.rawAttribute}' (line ${pos.line}, column ${pos.column}): each variable must be written ("NAME" "value")`,
        node.rawAttribute,
        pos,
      );
    }
    vars.set(v[0], v[1]);
  }
}

function evaluateValue(v: RslValue, text: string, vars: Map<string, string>): XValue {
  switch (v.kind) {
    case "literal":
      return v.value;
    case "variable": {
      const value = vars.get(v.name);
      if (value === undefined) {
        const pos = positionAt(text, v.start);
        throw new InvalidDescriptionError(
          `xRSL: undefined variable $(${v.name}) at line ${pos.line}, column ${pos.column}; define it with (rsl_substitution=("${v.name}" "value")) before use`,
          v.name,
          pos,
        );
      }
      return value;
    }
    case "concat":
      return v.parts.map((p) => evaluateValue(p, text, vars) as string).join("");
    case "sequence":
      return v.items.map((i) => evaluateValue(i, text, vars));
  }
}
