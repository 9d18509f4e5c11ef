import { DescriptionError, InvalidDescriptionError, UnsupportedFormatError } from "../../errors.js";
import { DESCRIPTION_LIMITS, isBodyLimit, limitError, type DescriptionLimits } from "../limits.js";
import type { JobDescription } from "../types.js";
import { adlToDescription } from "./reader.js";
import { splitBundle } from "./split.js";
import { DEFAULT_MAX_DESCRIPTION_BYTES, readXml, type XNode } from "./xml.js";

export { DEFAULT_MAX_DESCRIPTION_BYTES } from "./xml.js";

export interface AdlOptions {
  /** Largest accepted body in bytes (UTF-8); default 5 MiB. */
  maxBytes?: number | undefined;
  limits?: DescriptionLimits | undefined;
}

export type AdlItem = { ok: true; description: JobDescription; source: string } | { ok: false; error: DescriptionError; source: string };

/**
 * Parses an ADL body: one `ActivityDescription`, or `ActivityDescriptions` whose every child
 * element is one description. Size and the body-wide caps throw; anything else wrong (bad XML,
 * DOCTYPE, a wrong root, one broken description of a bundle) is a failed item. When a bundle is
 * not well-formed its descriptions are cut apart and read one by one (split.ts).
 */
export function parseAdlSettled(text: string, opts: AdlOptions = {}): AdlItem[] {
  const maxBytes = opts.maxBytes ?? DEFAULT_MAX_DESCRIPTION_BYTES;
  const limits = opts.limits ?? DESCRIPTION_LIMITS;
  let root: XNode;
  try {
    root = readXml(text, maxBytes, limits);
  } catch (e) {
    if (!(e instanceof DescriptionError) || e.code === "TOO_LARGE" || isBodyLimit(e)) throw e;
    const parts = splitBundle(text, limits.maxDescriptions + 1);
    if (!parts || parts.length === 0) return [{ ok: false, error: e, source: text.trim() }];
    checkCount(parts.length, limits);
    return parts.map((p) => {
      try {
        const el = readXml(p.text, maxBytes, limits);
        if (el.local !== "ActivityDescription")
          throw new InvalidDescriptionError(`expected an ActivityDescription, found <${el.qname}>`, el.local);
        return settle(el, p.text, p.text);
      } catch (err) {
        if (!(err instanceof DescriptionError) || isBodyLimit(err)) throw err;
        return { ok: false as const, error: err, source: p.text };
      }
    });
  }
  if (root.local === "ActivityDescription") return [settle(root, text, text.trim())];
  if (root.local !== "ActivityDescriptions") {
    const error = new UnsupportedFormatError(`XML root element <${root.qname}> is not an ADL ActivityDescription or ActivityDescriptions`);
    return [{ ok: false, error, source: text.trim() }];
  }
  if (root.children.length === 0) {
    const error = new InvalidDescriptionError("ActivityDescriptions contains no ActivityDescription", "ActivityDescriptions");
    return [{ ok: false, error, source: text.trim() }];
  }
  checkCount(root.children.length, limits);
  return root.children.map((c) => {
    const source = withNamespaces(text.slice(c.start, c.end), c, root);
    if (c.local !== "ActivityDescription") {
      const error = new InvalidDescriptionError(
        `ActivityDescriptions may only contain ActivityDescription elements, found <${c.qname}>`,
        c.local,
      );
      return { ok: false as const, error, source };
    }
    return settle(c, text, source);
  });
}

function checkCount(n: number, limits: DescriptionLimits): void {
  if (n > limits.maxDescriptions) {
    throw limitError("maxDescriptions", limits.maxDescriptions, `more than ${limits.maxDescriptions} descriptions in one request`);
  }
}

/** Parses ADL into normalized descriptions (not yet validated); throws on the first error. */
export function parseAdl(text: string, opts: AdlOptions = {}): JobDescription[] {
  return parseAdlSettled(text, opts).map((item) => {
    if (!item.ok) throw item.error;
    return item.description;
  });
}

function settle(node: XNode, text: string, source: string): AdlItem {
  try {
    return { ok: true, description: adlToDescription(node, text), source };
  } catch (e) {
    if (e instanceof DescriptionError) return { ok: false, error: e, source };
    throw e;
  }
}

/** Copies the root's namespace declarations the element does not redeclare into its start tag. */
function withNamespaces(slice: string, el: XNode, root: XNode): string {
  const extra = Object.entries(root.attrs)
    .filter(([k]) => (k === "xmlns" || k.startsWith("xmlns:")) && !(k in el.attrs))
    .map(([k, v]) => ` ${k}="${v.replace(/&/g, "&amp;").replace(/"/g, "&quot;").replace(/</g, "&lt;")}"`)
    .join("");
  return extra === "" ? slice : `<${el.qname}${extra}${slice.slice(el.qname.length + 1)}`;
}
