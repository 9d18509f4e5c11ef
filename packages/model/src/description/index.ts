/**
 * Entry point for job-description bodies: sniff the language (docs/decisions.md #11), parse, validate.
 */
import { DescriptionError, DescriptionTooLargeError, UnsupportedFormatError } from "../errors.js";
import { parseAdlSettled } from "./adl/index.js";
import { DEFAULT_MAX_DESCRIPTION_BYTES } from "./adl/xml.js";
import { ExpansionBudget, resolveLimits, type DescriptionLimits } from "./limits.js";
import type { JobDescription } from "./types.js";
import { validateDescription, type ValidateOptions } from "./validate.js";
import { parseXrslSettled } from "./xrsl/index.js";

export { DESCRIPTION_LIMITS, isBodyLimit, type DescriptionLimits } from "./limits.js";

export type DescriptionFormat = "xrsl" | "adl" | "json" | "unknown";

export interface ParseOptions extends ValidateOptions {
  /** Largest accepted body in bytes (UTF-8); default 5 MiB. */
  maxBytes?: number | undefined;
  /** Read the body as this language instead of sniffing it (a declared Content-Type). */
  format?: "xrsl" | "adl" | undefined;
  /** Overrides of the expansion caps (limits.ts), e.g. `maxDescriptions` from the gateway's config. */
  limits?: Partial<DescriptionLimits> | undefined;
}

export type SettledDescription =
  { ok: true; description: JobDescription; source: string } | { ok: false; error: DescriptionError; source?: string | undefined };

/** By the first non-blank character: `<` ADL, `&` `+` `(` xRSL (also `|`), `{` `[` JSON. */
export function detectFormat(body: string): DescriptionFormat {
  const c = /\S/.exec(body.replace(/^\uFEFF/, ""))?.[0];
  if (c === "<") return "adl";
  if (c === "&" || c === "+" || c === "(" || c === "|") return "xrsl";
  if (c === "{" || c === "[") return "json";
  return "unknown";
}

/**
 * Parses and validates every description in a body. Throws only for the body as a whole: too
 * many bytes (DescriptionTooLargeError) or a body-wide cap (DescriptionLimitError for
 * maxDescriptions / maxNodes, see `isBodyLimit`). Everything else is a failed item that does not
 * affect the others: a description that does not parse, exceeds a per-description cap, is
 * invalid, or a body that is no description at all (one failed item, as A-REX answers it).
 */
export function parseDescriptionsSettled(body: string, opts: ParseOptions = {}): SettledDescription[] {
  const maxBytes = opts.maxBytes ?? DEFAULT_MAX_DESCRIPTION_BYTES;
  const size = Buffer.byteLength(body, "utf8");
  if (size > maxBytes) throw new DescriptionTooLargeError(size, maxBytes);
  const limits = resolveLimits(opts.limits);
  const text = body.replace(/^\uFEFF/, "");
  const format = opts.format ?? detectFormat(text);
  let items: SettledDescription[];
  switch (format) {
    case "xrsl":
      items = parseXrslSettled(text, limits, new ExpansionBudget(limits));
      break;
    case "adl":
      items = parseAdlSettled(text, { maxBytes, limits });
      break;
    case "json":
      items = [{ ok: false, error: new UnsupportedFormatError("JSON job descriptions are not supported; send ADL (XML) or xRSL") }];
      break;
    default:
      items = [
        {
          ok: false,
          error: new UnsupportedFormatError(
            "the request body is not a job description: it must start with '<' (ADL) or '&', '+', '(' (xRSL)",
          ),
        },
      ];
  }
  return items.map((item) => {
    if (!item.ok) return item;
    try {
      return { ok: true, description: validateDescription(item.description, opts), source: item.source };
    } catch (e) {
      if (e instanceof DescriptionError) return { ok: false, error: e, source: item.source };
      throw e;
    }
  });
}

/** All-or-nothing variant: throws the first error of any description. */
export function parseDescriptions(body: string, opts: ParseOptions = {}): JobDescription[] {
  return parseDescriptionsSettled(body, opts).map((item) => {
    if (!item.ok) throw item.error;
    return item.description;
  });
}
