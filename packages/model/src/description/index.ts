/**
 * Entry point for job-description bodies: sniff the language (decisions.md #11), parse, validate.
 */
import {
  DescriptionError,
  DescriptionTooLargeError,
  UnsupportedFormatError,
} from "../errors.js";
import { parseAdlSettled } from "./adl/index.js";
import { DEFAULT_MAX_DESCRIPTION_BYTES } from "./adl/xml.js";
import type { JobDescription } from "./types.js";
import { validateDescription, type ValidateOptions } from "./validate.js";
import { parseXrslSettled } from "./xrsl/index.js";

export type DescriptionFormat = "xrsl" | "adl" | "json" | "unknown";

export interface ParseOptions extends ValidateOptions {
  /** Largest accepted body in bytes (UTF-8); default 5 MiB. */
  maxBytes?: number | undefined;
}

export type SettledDescription =
  | { ok: true; description: JobDescription; source: string }
  | { ok: false; error: DescriptionError; source?: string | undefined };

/** By the first non-blank character: `<` ADL, `&` `+` `(` xRSL (also `|`), `{` `[` JSON. */
export function detectFormat(body: string): DescriptionFormat {
  const c = /\S/.exec(body.replace(/^\uFEFF/, ""))?.[0];
  if (c === "<") return "adl";
  if (c === "&" || c === "+" || c === "(" || c === "|") return "xrsl";
  if (c === "{" || c === "[") return "json";
  return "unknown";
}

/**
 * Parses and validates every description in a body. Throws for problems with the whole body
 * (size, unknown format, syntax); a description that is invalid on its own is a failed item and
 * does not affect the others.
 */
export function parseDescriptionsSettled(body: string, opts: ParseOptions = {}): SettledDescription[] {
  const maxBytes = opts.maxBytes ?? DEFAULT_MAX_DESCRIPTION_BYTES;
  const size = Buffer.byteLength(body, "utf8");
  if (size > maxBytes) throw new DescriptionTooLargeError(size, maxBytes);
  const text = body.replace(/^\uFEFF/, "");
  const format = detectFormat(text);
  let items: SettledDescription[];
  switch (format) {
    case "xrsl":
      items = parseXrslSettled(text);
      break;
    case "adl":
      items = parseAdlSettled(text, { maxBytes });
      break;
    case "json":
      throw new UnsupportedFormatError("JSON job descriptions are not supported; send ADL (XML) or xRSL");
    default:
      throw new UnsupportedFormatError(
        "the request body is not a job description: it must start with '<' (ADL) or '&', '+', '(' (xRSL)",
      );
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
