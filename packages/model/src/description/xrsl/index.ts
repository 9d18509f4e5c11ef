import { DescriptionError } from "../../errors.js";
import { DESCRIPTION_LIMITS, ExpansionBudget, type DescriptionLimits } from "../limits.js";
import type { JobDescription } from "../types.js";
import { xrslToDescription } from "./attributes.js";
import { evaluateJob } from "./evaluate.js";
import { parseRslJobs } from "./parser.js";

export { parseRsl, parseRslJobs, skipBalanced, type RslJob } from "./parser.js";
export { evaluateJob, splitJobs, type EvaluatedRelation, type XValue } from "./evaluate.js";
export * from "./ast.js";

export type XrslItem = { ok: true; description: JobDescription; source: string } | { ok: false; error: DescriptionError; source: string };

/**
 * Parses an xRSL body into one result per job (`+` bodies hold several). A part that does not
 * parse or evaluate is a failed item and does not affect the others; only the body-wide caps
 * (number of descriptions, syntax nodes) throw. `budget` is the body's expansion budget.
 */
export function parseXrslSettled(
  text: string,
  limits: DescriptionLimits = DESCRIPTION_LIMITS,
  budget = new ExpansionBudget(limits),
): XrslItem[] {
  const jobs = parseRslJobs(text, limits);
  return jobs.map((job) => {
    // A single description is stored as sent; a part of a `+` body as its own `&(...)` text.
    const single = jobs.length === 1 && job.start === 0;
    if ("error" in job) return { ok: false, error: job.error, source: single ? text.trim() : text.slice(job.start, job.end) };
    const source = single ? text.trim() : text.slice(job.node.start, job.node.end);
    try {
      return { ok: true, description: xrslToDescription(evaluateJob(job.node, text, budget.child()), text), source };
    } catch (e) {
      if (e instanceof DescriptionError) return { ok: false, error: e, source };
      throw e;
    }
  });
}

/** Parses xRSL into normalized descriptions (not yet validated); throws on the first error. */
export function parseXrsl(text: string): JobDescription[] {
  return parseXrslSettled(text).map((item) => {
    if (!item.ok) throw item.error;
    return item.description;
  });
}
