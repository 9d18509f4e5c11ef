import type { Context } from "hono";
import type { AppEnv } from "../../context.js";
import { BadRequest } from "../../errors.js";

/**
 * The `<path>` of `…/jobs/<id>/session/<path>`, taken from the RAW request target, not from the
 * parsed URL: the WHATWG URL parser silently resolves `..`, `%2e%2e` and friends, which would hide
 * an attack instead of refusing it (SECURITY.md; the lesson of CVE-2023-41914).
 */
export interface SessionPath {
  /** Decoded, lexically resolved segments below the session root ([] = the root itself). */
  segments: string[];
  /** `/a/b` form, used for input_status and the upload bookkeeping ("/" for the root). */
  normalized: string;
  /** Absolute URL path of the session root as routed (`/arex/rest/1.0/jobs/<id>/session`). */
  rootHref: string;
  /** Canonical, unencoded URL path of what was asked for (no trailing `/`); PROPFIND hrefs start with it. */
  requestHref: string;
}

/** Raw request-target path: `incoming.url` on the Node server (absolute-form stripped), else the Request URL. */
export function rawTargetPath(c: Context<AppEnv>): string {
  const raw = c.env?.incoming?.url ?? c.req.url;
  let path = raw;
  const scheme = raw.indexOf("://");
  if (scheme !== -1 && scheme < raw.indexOf("/")) {
    const slash = raw.indexOf("/", scheme + 3);
    path = slash === -1 ? "/" : raw.slice(slash);
  }
  const q = path.search(/[?#]/);
  return q === -1 ? path : path.slice(0, q);
}

const ENCODED_SEPARATOR = /%(2f|5c)/i;
const ENCODED_NUL = /%00/;
const ENCODED_DOT = /%2e/i;

/**
 * Parses and validates the session path. `rootHref` is where the session root is routed; the raw
 * path must start with it literally (anything else means dot segments or encodings were used to
 * reach this route, which no client needs). Throws 400 naming the problem.
 */
export function parseSessionPath(rawPath: string, rootHref: string): SessionPath {
  const path = rawPath.replace(/\/{2,}/g, "/");
  if (path.includes("\\")) throw new BadRequest("Invalid session path: backslash in path", "BAD_PATH");
  if (ENCODED_SEPARATOR.test(path)) throw new BadRequest("Invalid session path: encoded slash or backslash (%2F, %5C) in path", "BAD_PATH");
  if (ENCODED_NUL.test(path)) throw new BadRequest("Invalid session path: NUL byte in path", "BAD_PATH");
  if (path !== rootHref && !path.startsWith(`${rootHref}/`)) {
    throw new BadRequest("Invalid session path: dot segments or percent-encoding before the session path", "BAD_PATH");
  }
  const rest = path.slice(rootHref.length);
  const segments: string[] = [];
  for (const rawSeg of rest.split("/")) {
    if (rawSeg === "") continue;
    let seg: string;
    try {
      seg = decodeURIComponent(rawSeg);
    } catch {
      throw new BadRequest("Invalid session path: malformed percent-encoding", "BAD_PATH");
    }
    if (seg.includes("\0")) throw new BadRequest("Invalid session path: NUL byte in path", "BAD_PATH");
    if ((seg === "." || seg === "..") && ENCODED_DOT.test(rawSeg)) {
      throw new BadRequest("Invalid session path: percent-encoded dot segment", "BAD_PATH");
    }
    if (seg === ".") continue;
    if (seg === "..") {
      if (segments.length === 0) throw new BadRequest("Invalid session path: '..' climbs above the session directory", "BAD_PATH");
      segments.pop();
      continue;
    }
    if (Buffer.byteLength(seg) > 255) throw new BadRequest("Invalid session path: a path component is longer than 255 bytes", "BAD_PATH");
    segments.push(seg);
  }
  return {
    segments,
    normalized: `/${segments.join("/")}`,
    rootHref,
    requestHref: davHref(rootHref, segments, false),
  };
}

const SINGLE_DOT = /^(?:\.|%2e)$/i;
const DOUBLE_DOT = /^(?:\.|%2e){2}$/i;

/**
 * RFC 3986 / WHATWG dot-segment removal on an absolute URL path (`.`, `..` and their `%2e`
 * spellings); never climbs above `/`. A trailing dot segment leaves a trailing slash.
 */
export function resolveDotSegments(path: string): string {
  if (!path.includes(".") && !/%2e/i.test(path)) return path;
  const out: string[] = [];
  const segs = path.split("/").slice(1);
  segs.forEach((seg, i) => {
    const last = i === segs.length - 1;
    if (DOUBLE_DOT.test(seg)) {
      if (out.length > 0) out.pop();
      if (last) out.push("");
    } else if (SINGLE_DOT.test(seg)) {
      if (last) out.push("");
    } else {
      out.push(seg);
    }
  });
  return `/${out.join("/")}`;
}

/**
 * Percent-encodes one path segment for an href: only what a URL path cannot carry literally
 * (space, controls, `%`, `?`, `#`, non-ASCII, quotes, `<>` and the like). Unreserved characters
 * and sub-delims stay as they are, so hrefs look like what the ARC client would build itself.
 */
export function encodeSegment(name: string): string {
  return encodeURIComponent(name).replace(/%(2[146-9ABC]|3[ABD]|40|24)/gi, (m) => decodeURIComponent(m));
}

/** Percent-encoded URL path of an entry below the session root (HTML links for browsers). */
export function hrefFor(rootHref: string, segments: readonly string[], dir: boolean): string {
  const rel = segments.map(encodeSegment).join("/");
  const base = rel ? `${rootHref}/${rel}` : rootHref;
  return dir ? `${base}/` : base;
}

/**
 * WebDAV href of an entry for the ARC client: the names NOT percent-encoded, as A-REX does
 * (docs/interface.md, "What real clients rely on"). The client does not decode hrefs but encodes the URL it builds from them
 * when it sends a request: an href `a%20b.txt` makes it ask for `a%2520b.txt` (404), while
 * `a b.txt` makes it ask for `a%20b.txt` (checked with arccp 6.17). Only control characters, which
 * XML 1.0 cannot carry, are encoded.
 */
export function davHref(rootHref: string, segments: readonly string[], dir: boolean): string {
  const rel = segments.map((s) => s.replace(/[\x00-\x1f\x7f]/g, (ch) => encodeURIComponent(ch))).join("/");
  const base = rel ? `${rootHref}/${rel}` : rootHref;
  return dir ? `${base}/` : base;
}
