import type { El } from "./tree.js";
import { renderXml } from "./render/xml.js";
import { renderJson } from "./render/json.js";
import { type HtmlOptions, renderHtml } from "./render/html.js";
import { forceArraysFor } from "./documents.js";

export type Format = "json" | "xml" | "html";

/**
 * docs/interface.md General rules 3: all Accept values are split on `,`, parameters (q-values too) dropped, and the
 * first recognised entry in header order wins; nothing recognised (absent, `*\/*`) → HTML.
 */
export function negotiateFormat(accept: string | readonly string[] | undefined): Format {
  if (accept === undefined) return "html";
  const joined = typeof accept === "string" ? accept : accept.join(",");
  for (const part of joined.split(",")) {
    const type = (part.split(";", 1)[0] ?? "").trim().toLowerCase();
    if (type === "application/json") return "json";
    if (type === "text/xml" || type === "application/xml") return "xml";
    if (type === "text/html") return "html";
  }
  return "html";
}

/** Response Content-Type; XML is always `application/xml`, also when `text/xml` was asked for. */
export function contentTypeFor(fmt: Format): string {
  switch (fmt) {
    case "json":
      return "application/json";
    case "xml":
      return "application/xml";
    case "html":
      return "text/html; charset=utf-8";
  }
}

export interface RenderOptions extends HtmlOptions {
  /** JSON forced-array names; defaults to the list registered for the root name (FORCE_ARRAYS). */
  forceArrays?: readonly string[];
  /** XML declaration (off by default). */
  declaration?: boolean;
}

/** Render a document in the negotiated format. */
export function render(root: El, fmt: Format, opts: RenderOptions = {}): string {
  switch (fmt) {
    case "json":
      return renderJson(root, { forceArrays: opts.forceArrays ?? forceArraysFor(root) });
    case "xml":
      return renderXml(root, { declaration: opts.declaration ?? false });
    case "html":
      return renderHtml(root, opts);
  }
}
