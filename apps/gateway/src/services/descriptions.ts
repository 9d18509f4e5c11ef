import { type SettledDescription, DescriptionTooLargeError, detectFormat, isBodyLimit, parseDescriptionsSettled } from "@ce/model";
import { BadRequest, CeError, PayloadTooLarge, UnsupportedMediaType } from "../errors.js";
import { GENERIC_TYPES } from "./body.js";

const ADL_TYPES = new Set(["application/xml", "text/xml", "application/adl+xml"]);
const XRSL_TYPES = new Set(["application/rsl", "application/xrsl", "text/rsl", "text/xrsl", "application/x-rsl"]);
const JSON_TYPES = new Set(["application/json", "text/json"]);

/**
 * Submission body → one settled result per description, in order. Content-Type decides the
 * language when it names one (`application/xml` ADL, `application/rsl` xRSL); when it is absent
 * or generic the first non-blank character does (decisions #11) — the ARC client sends none.
 * Whole-body problems become request errors: 413 too large or more descriptions / syntax nodes
 * than the caps allow, 415 JSON or an unknown media type, 400 empty body or a body that
 * contradicts its Content-Type. A description that does not parse — also one part of a `+` or
 * ActivityDescriptions bundle, and a body that is no description at all — is a per-item 400
 * inside the overall 201 (decisions #20; A-REX answers such bodies per item too, and both the
 * ARC client and pyarcrest read the per-item result).
 */
export function settleDescriptions(
  body: string,
  contentType: string | undefined,
  opts: { maxBytes: number; maxRerun: number; maxDescriptions: number; localInputPrefixes?: readonly string[] | undefined },
): SettledDescription[] {
  if (body.length === 0) throw new BadRequest("Missing payload: the request body holds no job description", "EMPTY_BODY");
  if (body.trim() === "") throw new BadRequest("Payload is empty: the request body is only whitespace", "EMPTY_BODY");
  const sniffed = detectFormat(body);
  let format: "xrsl" | "adl" | undefined;
  if (contentType !== undefined && !GENERIC_TYPES.has(contentType)) {
    if (JSON_TYPES.has(contentType) || contentType.endsWith("+json")) throw jsonRefused();
    const declared = ADL_TYPES.has(contentType) ? "adl" : XRSL_TYPES.has(contentType) ? "xrsl" : undefined;
    if (!declared) {
      throw new UnsupportedMediaType(
        `Content-Type ${contentType} is not a job description type; use application/xml (ADL) or application/rsl (xRSL)`,
      );
    }
    // A body that is neither language is read as the declared one: its syntax error is the item's reason.
    if (sniffed === "unknown") format = declared;
    else if (sniffed !== declared && sniffed !== "json") {
      throw new BadRequest(
        `Content-Type ${contentType} announces ${declared === "adl" ? "ADL" : "xRSL"} but the body is not ${declared === "adl" ? "XML" : "xRSL"}`,
        "CONTENT_TYPE_MISMATCH",
      );
    }
  }
  if (sniffed === "json") throw jsonRefused();
  try {
    return parseDescriptionsSettled(body, {
      format,
      maxBytes: opts.maxBytes,
      maxRerun: opts.maxRerun,
      localInputPrefixes: opts.localInputPrefixes,
      limits: { maxDescriptions: opts.maxDescriptions },
    });
  } catch (e) {
    if (e instanceof DescriptionTooLargeError) throw new PayloadTooLarge("Job description", e.limit);
    if (isBodyLimit(e)) {
      throw new CeError(413, e.limit === "maxDescriptions" ? "TOO_MANY_DESCRIPTIONS" : "DESCRIPTION_LIMIT", e.message);
    }
    throw e;
  }
}

function jsonRefused(): CeError {
  return new UnsupportedMediaType("JSON job descriptions are not supported; send ADL (application/xml) or xRSL (application/rsl)");
}
