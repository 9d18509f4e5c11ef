import { Readable } from "node:stream";
import { PayloadTooLarge } from "../../errors.js";

/**
 * Request bodies of session PUTs and PROPFINDs, consumed chunk by chunk (never buffered whole):
 * the limit is enforced on the bytes actually received, not on a declared Content-Length alone
 * (chunked uploads have none; GHSA-92vj-g62v-jqhh is about trusting the header).
 *
 * How an upload takes its request body's chunks (receive.ts), the fast or the portable way:
 *
 * Node's HTTP parser hands every body chunk of a request to `incoming.push(chunk)`
 * (_http_common parserOnBody) and stops reading the socket when that returns false. Taken right
 * there, a chunk skips the Readable machinery that otherwise runs for every 16 KiB TLS record
 * (buffer bookkeeping, a `data` event, a nextTick running read(0) and socket.resume()): the
 * gateway's main thread spends about a sixth less CPU per uploaded GiB (CPU per GiB:
 * apps/gateway/bench/session-io.bench.ts). Backpressure stays the parser's own: `false` from push pauses
 * the socket, and `socket.resume()` — what IncomingMessage._read does — restarts it (the HTTP
 * server keeps a socket it paused for pipelining paused). The parser may still deliver the rest
 * of what it has already decrypted after a `false` (tens of KiB): the caller holds those chunks.
 *
 * Any other stream — no socket, already being consumed, `push` replaced, or the fast path turned
 * off (`gateway.internals.parserBodyIntake`, runtime-internals.ts) — is read through its events,
 * the portable way; a web stream (a request without a Node request behind it) is first made a
 * Node stream. The upload tests drive both paths (a Node request and plain streams).
 */

let parserIntake = true;

/** Turns the fast path on or off (`gateway.internals.parserBodyIntake`). */
export function useParserIntake(on: boolean): void {
  parserIntake = on;
}

/** Declared Content-Length over `limit` → 413 before reading anything. */
export function checkDeclaredLength(header: string | undefined, limit: number, what: string): void {
  if (header === undefined) return;
  const n = Number(header);
  if (Number.isSafeInteger(n) && n > limit) throw new PayloadTooLarge(what, limit);
}

/** A web-stream body as a Node stream (empty when there is none), for the portable path. */
export function nodeStreamOf(body: ReadableStream<Uint8Array> | null): Readable {
  return body ? Readable.fromWeb(body as Parameters<typeof Readable.fromWeb>[0]) : Readable.from([]);
}
export interface Intake {
  /** Whether chunks come from the parser directly. */
  readonly direct: boolean;
  /** No more chunks wanted for now (the direct path stops at the next chunk it is offered). */
  pause(): void;
  /** Chunks wanted again. */
  resume(): void;
  /** Delivers nothing more; the stream is left as Node made it. */
  detach(): void;
}

type NodeRequest = Readable & { socket?: Readable | null; complete?: boolean };

/**
 * Starts delivering `src`'s chunks to `onData` and its end to `onEnd`. `wanted()` is asked after
 * each chunk on the direct path: false pauses the socket until `resume()`.
 */
export function takeBody(src: Readable, onData: (chunk: Buffer) => void, onEnd: () => void, wanted: () => boolean): Intake {
  const req = src as NodeRequest;
  const socket = req.socket;
  const untouched =
    parserIntake &&
    socket &&
    typeof req.complete === "boolean" &&
    req.readableFlowing === null &&
    !Object.prototype.hasOwnProperty.call(req, "push");
  if (!untouched) return viaEvents(src, onData, onEnd);

  let stopped = false;
  let live = true;
  const inherited = req.push;
  // What arrived before the handler ran waits in the stream's buffer.
  for (let b: Buffer | null; (b = req.read() as Buffer | null) !== null;) onData(b);
  const detach = () => {
    if (!live) return;
    live = false;
    delete (req as { push?: unknown }).push;
  };
  if (req.complete) {
    // The whole body had been buffered: nothing more will be pushed.
    detach();
    onEnd();
  } else {
    req.push = (chunk: unknown, encoding?: BufferEncoding): boolean => {
      if (!live) return inherited.call(req, chunk, encoding);
      if (chunk === null) {
        detach();
        onEnd();
        // Node's own end of the stream (`end`, auto-destroy) as if it had been read.
        const r = inherited.call(req, null);
        req.resume();
        return r;
      }
      onData(chunk as Buffer);
      stopped = !wanted();
      return !stopped;
    };
  }
  return {
    direct: true,
    pause: () => undefined,
    resume: () => {
      if (!stopped || !live) return;
      stopped = false;
      socket.resume();
    },
    detach,
  };
}

function viaEvents(src: Readable, onData: (chunk: Buffer) => void, onEnd: () => void): Intake {
  src.on("data", onData);
  src.on("end", onEnd);
  src.resume();
  return {
    direct: false,
    pause: () => void src.pause(),
    resume: () => {
      if (src.isPaused()) src.resume();
    },
    detach: () => {
      src.off("data", onData);
      src.off("end", onEnd);
    },
  };
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
