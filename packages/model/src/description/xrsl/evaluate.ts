/**
 * Turns the RSL tree of one job into a flat list of relations with plain string values:
 * resolves `rsl_substitution` variables and concatenation, and picks alternatives.
 *
 * Alternatives (`|`): the CE has no broker, so the FIRST alternative is used and the others are
 * ignored. This applies both to a top-level `|(...)(...)` and to a `(|(a=1)(a=2))` nested in `&`.
 */
import { InvalidDescriptionError, positionAt } from "../../errors.js";
import { DESCRIPTION_LIMITS, ExpansionBudget, limitError } from "../limits.js";
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

/** A variable's value and how many variables deep its definition goes (1 = only literals). */
interface Variable {
  value: string;
  depth: number;
}

/** Evaluation state of one job: its variables and the characters it may still produce. */
interface Scope {
  text: string;
  vars: Map<string, Variable>;
  definitions: number;
  budget: ExpansionBudget;
  /** Deepest variable referenced by the value being evaluated. */
  refDepth: number;
}

/**
 * Flattens one job: document order, variables visible after their definition. Every string it
 * produces is charged to `budget` before it is built, so substitution cannot blow up memory.
 */
export function evaluateJob(node: RslNode, text: string, budget?: ExpansionBudget): EvaluatedRelation[] {
  const out: EvaluatedRelation[] = [];
  const scope: Scope = {
    text,
    vars: new Map(),
    definitions: 0,
    budget: budget ?? new ExpansionBudget(DESCRIPTION_LIMITS).child(),
    refDepth: 0,
  };
  walk(node, scope, out);
  return out;
}

function walk(node: RslNode, scope: Scope, out: EvaluatedRelation[]): void {
  const { text } = scope;
  if (node.kind === "boolean") {
    if (node.op === "|") {
      const first = node.children[0];
      if (first) walk(first, scope, out);
      return;
    }
    if (node.op === "+") {
      throw new InvalidDescriptionError(
        "xRSL: '+' (several jobs) may only appear at the top level",
        undefined,
        positionAt(text, node.start),
      );
    }
    for (const child of node.children) walk(child, scope, out);
    return;
  }
  scope.refDepth = 0;
  const values = node.values.map((v) => evaluateValue(v, scope));
  if (node.attribute === "rslsubstitution") {
    defineVariables(node, values, scope);
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

function defineVariables(node: RslRelation, values: XValue[], scope: Scope): void {
  const { text, budget } = scope;
  const { maxVariables, maxSubstitutionDepth } = budget.limits;
  const depth = scope.refDepth + 1;
  if (depth > maxSubstitutionDepth) {
    throw limitError(
      "maxSubstitutionDepth",
      maxSubstitutionDepth,
      `variables are defined through more than ${maxSubstitutionDepth} levels of other variables`,
      positionAt(text, node.start),
    );
  }
  for (const v of values) {
    if (!Array.isArray(v) || v.length !== 2 || typeof v[0] !== "string" || typeof v[1] !== "string") {
      const pos = positionAt(text, node.start);
      throw new InvalidDescriptionError(
        `xRSL attribute '${node.rawAttribute}' (line ${pos.line}, column ${pos.column}): each variable must be written ("NAME" "value")`,
        node.rawAttribute,
        pos,
      );
    }
    if (++scope.definitions > maxVariables) {
      throw limitError("maxVariables", maxVariables, `more than ${maxVariables} rsl_substitution variables`, positionAt(text, node.start));
    }
    scope.vars.set(v[0], { value: v[1], depth });
  }
}

function evaluateValue(v: RslValue, scope: Scope): XValue {
  const { text, budget } = scope;
  switch (v.kind) {
    case "literal":
      budget.charge(v.value.length, "a value", () => positionAt(text, v.start));
      return v.value;
    case "variable": {
      const variable = scope.vars.get(v.name);
      if (variable === undefined) {
        const pos = positionAt(text, v.start);
        throw new InvalidDescriptionError(
          `xRSL: undefined variable $(${v.name}) at line ${pos.line}, column ${pos.column}; define it with (rsl_substitution=("${v.name}" "value")) before use`,
          v.name,
          pos,
        );
      }
      // Every use counts: consumers (control files, the job script) write each copy out.
      budget.charge(variable.value.length, `$(${v.name})`, () => positionAt(text, v.start));
      scope.refDepth = Math.max(scope.refDepth, variable.depth);
      return variable.value;
    }
    case "concat": {
      // Lengths first: the joined string is only built once it is known to fit.
      let length = 0;
      for (const p of v.parts) {
        if (p.kind === "literal") length += p.value.length;
        else {
          const variable = scope.vars.get(p.name);
          if (variable === undefined) return evaluateValue(p, scope);
          length += variable.value.length;
          scope.refDepth = Math.max(scope.refDepth, variable.depth);
        }
      }
      budget.charge(length, "a concatenated value", () => positionAt(text, v.start));
      return v.parts.map((p) => (p.kind === "literal" ? p.value : (scope.vars.get(p.name) as Variable).value)).join("");
    }
    case "sequence":
      return v.items.map((i) => evaluateValue(i, scope));
  }
}
