import type { Context } from "hono";
import type { AppEnv } from "../context.js";
import { PayloadTooLarge, UnsupportedMediaType } from "../errors.js";
import { requestHeader } from "../headers.js";

/**
 * Reads a request body as UTF-8 text, refusing more than `limit` bytes with 413: early from
 * Content-Length, otherwise while streaming (chunked bodies), so an oversized body is never
 * buffered whole.
 */
export async function readTextBody(c: Context<AppEnv>, limit: number, what: string): Promise<string> {
  const declared = Number(requestHeader(c, "content-length") ?? "NaN");
  if (Number.isFinite(declared) && declared > limit) throw new PayloadTooLarge(what, limit);
  const chunks: Buffer[] = [];
  let size = 0;
  const add = (chunk: Uint8Array) => {
    size += chunk.byteLength;
    if (size > limit) throw new PayloadTooLarge(what, limit);
    chunks.push(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength));
  };
  const incoming = c.env?.incoming;
  // Under @hono/node-server read the Node stream directly; touching `c.req.raw` here would
  // make the adapter build a web stream over the same socket data.
  if (incoming) {
    // Events, not `for await`: the async iterator's machinery cost more than a small body's read.
    // Over the limit the request stream is destroyed, as leaving a `for await` early did.
    if (!incoming.readableEnded) {
      await new Promise<void>((resolve, reject) => {
        const onData = (chunk: Buffer) => {
          try {
            add(chunk);
          } catch (err) {
            incoming.off("data", onData);
            incoming.destroy();
            reject(err);
          }
        };
        incoming.on("data", onData);
        incoming.once("end", resolve);
        incoming.once("error", reject);
        incoming.once("close", () => {
          if (!incoming.complete) reject(new Error("request aborted"));
        });
      });
    }
  } else if (c.req.raw.body) {
    const reader = c.req.raw.body.getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      add(value);
    }
  }
  return Buffer.concat(chunks, size).toString("utf8");
}

/** Media type of the request without parameters, lower-cased; undefined when absent. */
export function mediaType(c: Context<AppEnv>): string | undefined {
  const ct = requestHeader(c, "content-type");
  if (!ct) return undefined;
  const t = (ct.split(";", 1)[0] ?? "").trim().toLowerCase();
  return t === "" ? undefined : t;
}

/**
 * The 415 of a body whose Content-Type the route does not take, naming what it takes. No REST
 * route guesses the format of a body typed `text/plain`, `application/x-www-form-urlencoded` or
 * `multipart/form-data`: those are what another site's form can send with the user's certificate
 * (docs/interface.md "Request bodies", middleware/cross-site/README.md).
 */
export function unsupportedType(contentType: string, what: string, accepted: readonly string[], noneTaken: boolean): UnsupportedMediaType {
  const shown = contentType.replace(/[^\x20-\x7e]/g, "?").slice(0, 80);
  const list = noneTaken ? [...accepted, "no Content-Type"] : accepted;
  const options = list.length > 1 ? `${list.slice(0, -1).join(", ")} or ${list.at(-1)}` : list[0];
  return new UnsupportedMediaType(`Content-Type ${shown} is not accepted for ${what}; send ${options}`);
}
