import type { FileHandle } from "node:fs/promises";
import { PayloadTooLarge } from "../errors.js";

/**
 * Request bodies of session PUTs and PROPFINDs, consumed chunk by chunk (never buffered whole):
 * the limit is enforced on the bytes actually received, not on a declared Content-Length alone
 * (chunked uploads have none; GHSA-92vj-g62v-jqhh is about trusting the header).
 */

/** Declared Content-Length over `limit` → 413 before reading anything. */
export function checkDeclaredLength(header: string | undefined, limit: number, what: string): void {
  if (header === undefined) return;
  const n = Number(header);
  if (Number.isSafeInteger(n) && n > limit) throw new PayloadTooLarge(what, limit);
}

/**
 * Writes the body to `handle` at `offset`; returns the number of bytes written. Each write is
 * awaited before the next read, so a slow disk slows the client down (TCP backpressure).
 */
export async function writeBody(
  body: ReadableStream<Uint8Array> | null,
  handle: FileHandle,
  offset: number,
  limit: number,
  what: string,
  /** Called with the byte count about to be reached before each write (quota reservation); throws to refuse. */
  grow?: (received: number) => Promise<void>,
): Promise<number> {
  if (!body) return 0;
  const reader = body.getReader();
  let received = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      if (!value || value.byteLength === 0) continue;
      received += value.byteLength;
      if (received > limit) throw new PayloadTooLarge(what, limit);
      if (grow) await grow(received);
      let written = 0;
      while (written < value.byteLength) {
        const { bytesWritten } = await handle.write(value, written, value.byteLength - written, offset + received - value.byteLength + written);
        written += bytesWritten;
      }
    }
  } catch (e) {
    await reader.cancel().catch(() => undefined);
    throw e;
  } finally {
    reader.releaseLock();
  }
  return received;
}

/** Reads and discards a body, refusing more than `limit` bytes (PROPFIND request bodies). */
export async function drainBody(body: ReadableStream<Uint8Array> | null, limit: number, what: string): Promise<void> {
  if (!body) return;
  const reader = body.getReader();
  let received = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      received += value?.byteLength ?? 0;
      if (received > limit) throw new PayloadTooLarge(what, limit);
    }
  } catch (e) {
    await reader.cancel().catch(() => undefined);
    throw e;
  } finally {
    reader.releaseLock();
  }
}
