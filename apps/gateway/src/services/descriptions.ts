import { type SettledDescription, DescriptionTooLargeError, detectFormat, isBodyLimit, parseDescriptionsSettled } from "@ce/model";
import { BadRequest, CeError, PayloadTooLarge, UnsupportedMediaType } from "../errors.js";
import { unsupportedType } from "./body.js";

const ADL_TYPES = new Set(["application/xml", "text/xml", "application/adl+xml"]);
const XRSL_TYPES = new Set(["application/rsl", "application/xrsl", "text/rsl", "text/xrsl", "application/x-rsl"]);
const JSON_TYPES = new Set(["application/json", "text/json"]);

/** The types the interface names (E4), as a 415 names them; the other spellings above are taken too. */
const DESCRIPTION_TYPES = ["application/xml (ADL)", "application/rsl (xRSL)"];

/**
 * The language a submission's Content-Type declares: "adl", "xrsl", or undefined when it is absent
 * and the body decides (decisions #11: the ARC C++ client sends none). JSON is a 415 of its own;
 * every other type is a 415 naming the accepted ones, decided before the body is read. The form
 * encodings (`text/plain`, `application/x-www-form-urlencoded`) are no longer read as "look at
 * the body": another site's form sends them (docs/security.md, cross-site requests).
 */
export function descriptionLanguage(contentType: string | undefined): "adl" | "xrsl" | undefined {
  if (contentType === undefined) return undefined;
  if (ADL_TYPES.has(contentType)) return "adl";
  if (XRSL_TYPES.has(contentType)) return "xrsl";
  if (JSON_TYPES.has(contentType) || contentType.endsWith("+json")) throw jsonRefused();
  throw unsupportedType(contentType, "job descriptions", DESCRIPTION_TYPES, true);
}

/**
 * Submission body → one settled result per description, in order. Content-Type decides the
 * language when given (`application/xml` ADL, `application/rsl` xRSL); when it is absent the
 * first non-blank character does (decisions #11) — the ARC client sends none.
 * Whole-body problems become request errors: 413 too large or more descriptions / syntax nodes
 * than the caps allow, 415 JSON or a type the route does not take, 400 empty body or a body that
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
  const declared = descriptionLanguage(contentType);
  if (body.length === 0) throw new BadRequest("Missing payload: the request body holds no job description", "EMPTY_BODY");
  if (body.trim() === "") throw new BadRequest("Payload is empty: the request body is only whitespace", "EMPTY_BODY");
  const sniffed = detectFormat(body);
  let format: "xrsl" | "adl" | undefined;
  if (declared) {
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
