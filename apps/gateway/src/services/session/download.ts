import type { ServerResponse } from "node:http";
import { Readable } from "node:stream";
import type { FileHandle } from "node:fs/promises";
import type { Stats } from "node:fs";
import { RangeNotSatisfiable } from "../../errors.js";
import { sendFile } from "./send.js";

/** A byte range to serve, `end` inclusive; undefined = the whole file. */
export interface ByteRange {
  start: number;
  end: number;
}

/**
 * `Range` header → what to serve (docs/interface.md E6, RFC 7233). `bytes=a-b` and `bytes=a-` as
 * A-REX; additionally the suffix form `bytes=-N` (last N bytes), which A-REX ignores. Several
 * ranges, other units and malformed values are ignored (whole file, 200), as RFC 7233 allows.
 * A start at or beyond the end → 416 with `Content-Range: bytes *\/size`.
 */
export function parseRange(header: string | undefined, size: number): ByteRange | undefined {
  if (!header) return undefined;
  const m = /^\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*$/i.exec(header);
  if (!m) return undefined; // also multiple ranges (a comma never matches)
  const [, a = "", b = ""] = m;
  if (a === "" && b === "") return undefined;
  if (a === "") {
    const n = Number(b);
    if (!Number.isSafeInteger(n)) return undefined;
    if (n === 0) throw new RangeNotSatisfiable(size);
    if (size === 0) return undefined; // nothing to slice: serve the (empty) whole
    return { start: Math.max(0, size - n), end: size - 1 };
  }
  const start = Number(a);
  const end = b === "" ? Number.MAX_SAFE_INTEGER : Number(b);
  if (!Number.isSafeInteger(start) || !Number.isSafeInteger(end) || end < start) return undefined;
  if (start >= size) throw new RangeNotSatisfiable(size);
  return { start, end: Math.min(end, size - 1) };
}

export interface FileResponseOptions {
  contentType: string;
  head: boolean;
  range: string | undefined;
  /**
   * The Node response, when there is one: the file is then piped to it directly and the Response
   * returned only tells the adapter so (a web stream in between costs ~3 CPU s per GiB).
   */
  outgoing?: ServerResponse;
  /** Headers of the file's presentation (a page's text view or download), on every path. */
  headers?: Record<string, string> | undefined;
  /** Headers middleware would add after the handler (X-Request-Id), for the direct path. */
  extraHeaders?: Record<string, string>;
}

/** `@hono/node-server`: a body-less Response with this header means "already written". */
const ALREADY_SENT = "x-hono-already-sent";

/**
 * Streams an opened regular file (never buffered) as 200 or 206. Takes ownership of `handle`:
 * it is closed when the stream ends, errors or the client goes away — and at once for HEAD.
 */
export async function fileResponse(handle: FileHandle, stat: Stats, opts: FileResponseOptions): Promise<Response> {
  let range: ByteRange | undefined;
  try {
    range = parseRange(opts.range, stat.size);
  } catch (e) {
    await handle.close();
    throw e;
  }
  const headers = new Headers({
    "Content-Type": opts.contentType,
    "Last-Modified": stat.mtime.toUTCString(),
    "Accept-Ranges": "bytes",
    // Written to the socket directly below, past the request-context middleware that sets it elsewhere.
    "X-Content-Type-Options": "nosniff",
    "Content-Length": String(range ? range.end - range.start + 1 : stat.size),
    ...opts.headers,
  });
  if (range) headers.set("Content-Range", `bytes ${range.start}-${range.end}/${stat.size}`);
  const status = range ? 206 : 200;
  if (opts.head || stat.size === 0) {
    await handle.close();
    return new Response(null, { status, headers });
  }
  // Bounded by the size seen at open: a file still growing is served as it was then.
  const bounds = { start: range?.start ?? 0, end: range?.end ?? stat.size - 1, autoClose: true };
  const out = opts.outgoing;
  if (out) {
    const all = { ...Object.fromEntries(headers), ...opts.extraHeaders };
    out.writeHead(status, all);
    sendFile(handle, bounds.start, bounds.end, out);
    return new Response(null, { status, headers: { ...all, [ALREADY_SENT]: "1" } });
  }
  const stream = handle.createReadStream(bounds);
  return new Response(Readable.toWeb(stream) as ReadableStream<Uint8Array>, { status, headers });
}
