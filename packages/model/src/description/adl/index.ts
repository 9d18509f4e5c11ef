import { DescriptionError, InvalidDescriptionError, UnsupportedFormatError } from "../../errors.js";
import type { JobDescription } from "../types.js";
import { adlToDescription } from "./reader.js";
import { DEFAULT_MAX_DESCRIPTION_BYTES, readXml, type XNode } from "./xml.js";

export { DEFAULT_MAX_DESCRIPTION_BYTES } from "./xml.js";

export interface AdlOptions {
  /** Largest accepted body in bytes (UTF-8); default 5 MiB. */
  maxBytes?: number | undefined;
}

export type AdlItem =
  | { ok: true; description: JobDescription; source: string }
  | { ok: false; error: DescriptionError; source: string };

/**
 * Parses an ADL body: one `ActivityDescription`, or `ActivityDescriptions` whose every child
 * element is one description. Bad XML, DOCTYPE/entities, size and a wrong root throw; problems
 * inside one description are reported for that item only.
 */
export function parseAdlSettled(text: string, opts: AdlOptions = {}): AdlItem[] {
  const root = readXml(text, opts.maxBytes ?? DEFAULT_MAX_DESCRIPTION_BYTES);
  if (root.local === "ActivityDescription") return [settle(root, text, text.trim())];
  if (root.local !== "ActivityDescriptions") {
    throw new UnsupportedFormatError(
      `XML root element <${root.qname}> is not an ADL ActivityDescription or ActivityDescriptions`,
    );
  }
  if (root.children.length === 0) {
    throw new InvalidDescriptionError("ActivityDescriptions contains no ActivityDescription", "ActivityDescriptions");
  }
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
