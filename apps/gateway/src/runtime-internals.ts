import type { CompiledConfig } from "@ce/config";
import { usePinoAccessLog } from "./middleware/request-context/access-log.js";
import { useAlignedMemory, useParserIntake } from "./services/session/index.js";

/**
 * Every use of Node, V8 or pino internals in the gateway: undocumented behaviour that a new Node
 * or pino release may change. Each is taken for a measured gain (bench/README.md), each has a
 * setting under `gateway.internals` that turns it off and falls back to public API, and
 * test/runtime-internals.test.ts checks each assumption on the Node major named below: a Node
 * upgrade fails that test until someone has checked the list again.
 */
export const CHECKED_ON_NODE_MAJOR = 20;

export interface RuntimeInternal {
  /** Stable name (the test's describe block). */
  id: string;
  /** Where it is used. */
  where: string;
  /** What is relied upon that no public API promises. */
  assumes: string;
  /** Why it is worth it. */
  gain: string;
  /** The `gateway.internals` key that turns it off. */
  setting: keyof CompiledConfig["gateway"]["internals"];
  /** What is used instead when off. */
  fallback: string;
}

export const RUNTIME_INTERNALS: readonly RuntimeInternal[] = [
  {
    id: "parser-body-intake",
    where: "services/session/intake.ts takeBody",
    assumes:
      "Node's HTTP parser hands every body chunk of a request to `req.push(chunk)` (looked up on the instance), stops reading the socket when it returns false, " +
      "and `socket.resume()` restarts it; `req.complete` is true once the whole body was parsed; `push(null)` ends the body",
    gain: "an upload's chunks skip the Readable machinery (buffering, `data` events, a nextTick per TLS record): less main-thread CPU per uploaded GiB",
    setting: "parserBodyIntake",
    fallback: "the request's `data`/`end` events, paused and resumed as a stream",
  },
  {
    id: "aligned-memory",
    where: "services/session/buffers.ts takeAlignedSlab (and O_DIRECT in direct.ts, write-path.ts, send.ts)",
    assumes: "the backing store of a `WebAssembly.Memory` starts on a page boundary (4096-aligned), so its 1 MiB slices satisfy O_DIRECT",
    gain: "large uploads and downloads bypass the page cache (no copy into, and no first-touch faults of, a GiB of cache pages)",
    setting: "alignedMemory",
    fallback: "no aligned slabs, so no O_DIRECT: every transfer through the page cache",
  },
  {
    id: "pino-access-log",
    where: "middleware/request-context/access-log.ts accessLogWriter",
    assumes:
      '`logger[pino.symbols.streamSym]` is the logger\'s destination (with `write(string)`) and `logger[pino.symbols.chindingsSym]` its bindings already serialized as `,"key":value…`',
    gain: "the access line (one per request) is one string written to the destination, without pino's serializer loop and redaction",
    setting: "pinoAccessLog",
    fallback: '`logger.info(fields, "request")`',
  },
  {
    id: "v8-array-buffer-sweeping",
    where: "main.ts (applyV8Flags)",
    assumes:
      "V8 knows `--no-concurrent-array-buffer-sweeping`, and `v8.setFlagsFromString` after start still changes how array buffers are swept",
    gain: "the 16 KiB record buffers of an upload are freed during the scavenge instead of counting against the external-memory limit, which started a full GC every ~64 MB uploaded",
    setting: "v8ArrayBufferSweeping",
    fallback: "V8's default sweeping",
  },
];

/** The process-wide switches of the module-level internals (createApp). */
export function applyRuntimeInternals(settings: CompiledConfig["gateway"]["internals"]): void {
  useParserIntake(settings.parserBodyIntake);
  useAlignedMemory(settings.alignedMemory);
  usePinoAccessLog(settings.pinoAccessLog);
}

export const ARRAY_BUFFER_SWEEPING_FLAG = "--no-concurrent-array-buffer-sweeping";

/** The V8 flag, once at start (main.ts); a flag given on the command line wins. */
export async function applyV8Flags(settings: CompiledConfig["gateway"]["internals"]): Promise<void> {
  if (!settings.v8ArrayBufferSweeping) return;
  if (process.execArgv.some((a) => a.includes("concurrent-array-buffer-sweeping"))) return;
  const { setFlagsFromString } = await import("node:v8");
  setFlagsFromString(ARRAY_BUFFER_SWEEPING_FLAG);
}
