import { DescriptionError } from "../../errors.js";
import type { JobDescription } from "../types.js";
import { xrslToDescription } from "./attributes.js";
import { evaluateJob, splitJobs } from "./evaluate.js";
import { parseRsl } from "./parser.js";

export { parseRsl } from "./parser.js";
export { evaluateJob, splitJobs, type EvaluatedRelation, type XValue } from "./evaluate.js";
export * from "./ast.js";

export type XrslItem =
  | { ok: true; description: JobDescription; source: string }
  | { ok: false; error: DescriptionError; source: string };

/**
 * Parses an xRSL body into one result per job (`+` bodies hold several). A syntax error anywhere
 * throws (the whole body is unusable); attribute errors are reported per job.
 */
export function parseXrslSettled(text: string): XrslItem[] {
  const root = parseRsl(text);
  const jobs = splitJobs(root);
  return jobs.map((node) => {
    // A single description is stored as sent; a part of a `+` body as its own `&(...)` text.
    const source = jobs.length === 1 && node === root ? text.trim() : text.slice(node.start, node.end);
    try {
      return { ok: true, description: xrslToDescription(evaluateJob(node, text), text), source };
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
