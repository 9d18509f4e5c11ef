import type { Context } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import { type El, type HtmlOptions, contentTypeFor, errorDoc, negotiateFormat, render } from "@ce/glue2";
import type { AppEnv, Format } from "./context.js";
import type { CeError } from "./errors.js";
import { documentPage } from "./pages/document.js";
import { errorPage } from "./pages/error.js";

/**
 * Structured responses (versions, info, job lists, bulk results, errors) in the negotiated format:
 * XML is always `application/xml` (also when `text/xml` was asked for), JSON uses the forced
 * arrays of decisions #6 (registered per root in @ce/glue2), HTML is a browsable page.
 * Content-Length is always set, so HEAD (answered by Hono from the GET handler) carries the
 * length the GET body would have, without the body.
 */
export interface RespondOptions extends HtmlOptions {
  status?: ContentfulStatusCode;
  headers?: Record<string, string>;
  /** Override of the JSON forced-array names (default: by root name). */
  forceArrays?: readonly string[];
  /** Text for the status line (reason phrase); the standard phrase when absent. */
  statusText?: string;
}

export function formatOf(c: Context<AppEnv>): Format {
  return c.get("format") ?? negotiateFormat(c.req.header("accept"));
}

/** A GET or HEAD that negotiated HTML: what the pages for people (src/pages) answer. */
export function isPageRequest(c: Context<AppEnv>): boolean {
  const m = c.req.method.toUpperCase();
  return (m === "GET" || m === "HEAD") && formatOf(c) === "html";
}

export function respond(c: Context<AppEnv>, root: El, opts: RespondOptions = {}): Response {
  const fmt = formatOf(c);
  // Browsers: the document in the pages' frame (pages/document.tsx); programs: below, unchanged.
  if (fmt === "html" && c.get("services")) {
    if (opts.statusText) setStatusText(c, opts.statusText);
    return documentPage(c, root, { title: opts.title, status: opts.status, headers: opts.headers, links: opts.links });
  }
  const body = render(root, fmt, {
    ...(opts.forceArrays ? { forceArrays: opts.forceArrays } : {}),
    ...(opts.title !== undefined ? { title: opts.title } : {}),
    ...(opts.links ? { links: opts.links } : {}),
  });
  return sendRendered(c, body, fmt, opts);
}

/**
 * Pages load nothing and run nothing: inline styles only. `form-action 'self'` keeps the job
 * pages' buttons posting to this CE only; `frame-ancestors 'none'` stops another site from
 * framing a page to trick a click on them.
 */
export const HTML_CSP = "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/** A body already rendered in `fmt` (fast paths that skip the element tree). */
export function sendRendered(c: Context<AppEnv>, body: string, fmt: Format, opts: RespondOptions = {}): Response {
  const headers: Record<string, string> = {
    "Content-Type": contentTypeFor(fmt),
    "Content-Length": String(Buffer.byteLength(body)),
    ...opts.headers,
  };
  if (opts.statusText) setStatusText(c, opts.statusText);
  if (fmt === "html") headers["Content-Security-Policy"] = HTML_CSP;
  return c.body(body, opts.status ?? 200, headers);
}

/**
 * A body streamed in `fmt` whose exact byte length is known beforehand: the same headers as
 * sendRendered (Content-Length included, so no chunked encoding and HEAD stays as it was).
 */
export function sendStreamed(
  c: Context<AppEnv>,
  body: ReadableStream<Uint8Array>,
  length: number,
  fmt: "json" | "xml",
  opts: RespondOptions = {},
): Response {
  const headers: Record<string, string> = { "Content-Type": contentTypeFor(fmt), "Content-Length": String(length), ...opts.headers };
  if (opts.statusText) setStatusText(c, opts.statusText);
  return c.body(body, opts.status ?? 200, headers);
}

/**
 * Whole-request failure (decisions #10): `<error><status-code/><reason/></error>` in the
 * negotiated format, the error's headers (Allow, WWW-Authenticate, Retry-After ...), and the
 * reason also in the status line as A-REX does (clients print it).
 */
export function renderError(c: Context<AppEnv>, err: CeError): Response {
  const status = err.status as ContentfulStatusCode;
  const headers = { ...err.headers, "X-Error-Code": err.code };
  const title = ellipsis(`${status} ${err.message}`, 120);
  if (formatOf(c) === "html") {
    setStatusText(c, err.message);
    return errorPage(c, status, title, err.message, headers);
  }
  return respond(c, errorDoc(status, err.message), { status, headers, statusText: err.message, title });
}

/** Reason phrase of the status line: one line of printable ASCII, bounded. */
export function setStatusText(c: Context<AppEnv>, text: string): void {
  const out = c.env?.outgoing;
  if (!out || out.headersSent) return;
  const clean = text
    .replace(/[^\x20-\x7e]+/g, " ")
    .trim()
    .slice(0, 200);
  if (clean) out.statusMessage = clean;
}

function ellipsis(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1).trimEnd()}…`;
}
