import type { Context } from "hono";
import type { AppEnv } from "../context.js";
import { BadRequest } from "../errors.js";

/*
 * How the pages link a session file: `?view=text` shows it in the browser as text, `?download=1`
 * saves it under its own name. A request with neither (every REST client) gets the file exactly
 * as the interface says: `application/octet-stream`, no Content-Disposition.
 *
 * The text view is safe for a hostile file: `text/plain; charset=utf-8` with `nosniff` is never
 * run or rendered as HTML, and the CSP's `sandbox` keeps it in an opaque origin even so.
 */

const TEXT_HEADERS = {
  "X-Content-Type-Options": "nosniff",
  "Content-Disposition": "inline",
  "Content-Security-Policy": "default-src 'none'; sandbox",
};

/** The URL of a session file shown as text; `href` is its plain (download) URL. */
export const textViewHref = (href: string) => `${href}?view=text`;
export const downloadHref = (href: string) => `${href}?download=1`;

/** The presentation a page's link asked for (undefined: the interface's own). */
export function filePresentation(
  c: Context<AppEnv>,
  segments: readonly string[],
): { contentType: string; headers: Record<string, string> } | undefined {
  const view = c.req.query("view");
  const download = c.req.query("download");
  if (view === undefined && download === undefined) return undefined;
  if (view !== undefined && view !== "text") throw new BadRequest(`Unknown view ${JSON.stringify(view)}; only view=text`, "BAD_VIEW");
  if (view === "text") return { contentType: "text/plain; charset=utf-8", headers: TEXT_HEADERS };
  const name = segments.at(-1) ?? "file";
  // RFC 6266: an ASCII fallback (no quotes, backslashes or controls) and the exact UTF-8 name.
  const ascii = name.replace(/[^\x20-\x7e]|["\\]/g, "_");
  return {
    contentType: "application/octet-stream",
    headers: {
      "X-Content-Type-Options": "nosniff",
      "Content-Disposition": `attachment; filename="${ascii}"; filename*=UTF-8''${encodeURIComponent(name)}`,
    },
  };
}
