import { type El, hasChildren, isNsDecl, sanitizeChars } from "../tree.js";

export interface HtmlOptions {
  /** Page title and heading; defaults to the root element name. */
  title?: string;
  /**
   * Link hook: called for every childless element with its path of element names from the root
   * (inclusive, e.g. `["jobs","job","id"]`), its text and the element. Return an href to render
   * the value as a link (job id → session dir, listing entry → file URL, ...), or undefined.
   */
  links?: (path: string[], text: string, node: El) => string | undefined;
}

const HTML_ESC: Record<string, string> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

/** Escape for both HTML text and double/single-quoted attribute values. */
export function escapeHtml(s: string): string {
  return sanitizeChars(s).replace(/[&<>"']/g, (c) => HTML_ESC[c] as string);
}

const STYLE = [
  "body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}",
  "h1{font-size:1.3em}",
  "table{border-collapse:collapse;margin:2px 0}",
  "th,td{border:1px solid #bbb;padding:3px 8px;text-align:left;vertical-align:top}",
  "th{background:#f0f0f0;font-weight:600;white-space:nowrap}",
  // Attribute lines (BaseType, CreationTime, ...) may wrap; only the element name stays on one line.
  ".attrs{display:block;font-weight:normal;color:#666;font-size:.85em;white-space:normal}",
  // Break long values (URNs, DNs) at word boundaries first, inside a word only when nothing else fits.
  "td{font-family:ui-monospace,monospace;white-space:pre-wrap;word-break:normal;overflow-wrap:break-word}",
  ".empty{color:#999}",
].join("");

// Only relative links and http(s) are emitted; a hook returning e.g. `javascript:` gets plain text.
const SAFE_HREF = /^(?:https?:|[^:]*$|[^:/?#]*[/?#])/i;

/** A complete, valid HTML5 page: nested tables for structure, everything escaped. */
export function renderHtml(root: El, opts: HtmlOptions = {}): string {
  const title = opts.title ?? root.name;
  const out: string[] = [
    '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">',
    '<meta name="viewport" content="width=device-width, initial-scale=1">',
    "<title>",
    escapeHtml(title),
    "</title><style>",
    STYLE,
    "</style></head><body><h1>",
    escapeHtml(title),
    "</h1>",
  ];
  const attrs = attrsHtml(root);
  if (attrs) out.push("<p>", attrs, "</p>");
  writeValue(root, [root.name], opts, out);
  out.push("</body></html>\n");
  return out.join("");
}

function attrsHtml(e: El): string {
  if (!e.attrs) return "";
  const parts = Object.entries(e.attrs)
    .filter(([k]) => !isNsDecl(k))
    .map(([k, v]) => `${escapeHtml(k)}=${escapeHtml(v)}`);
  return parts.length ? `<span class="attrs">${parts.join(" ")}</span>` : "";
}

function writeValue(e: El, path: string[], opts: HtmlOptions, out: string[]): void {
  if (!hasChildren(e)) {
    const text = e.text ?? "";
    if (text === "") {
      out.push('<span class="empty">(empty)</span>');
      return;
    }
    const href = opts.links?.(path, text, e);
    if (href !== undefined && SAFE_HREF.test(href)) out.push('<a href="', escapeHtml(href), '">', escapeHtml(text), "</a>");
    else out.push(escapeHtml(text));
    return;
  }
  out.push("<table>");
  for (const c of e.children) {
    out.push("<tr><th>", escapeHtml(c.name), attrsHtml(c), "</th><td>");
    writeValue(c, [...path, c.name], opts, out);
    out.push("</td></tr>");
  }
  out.push("</table>");
}
