import pino, { type Logger } from "pino";

/** The access log's fields (request-context): never headers or query values. */
export interface AccessFields {
  reqId: string;
  method: string;
  path: string;
  status: number;
  ms: number;
  subject?: string | undefined;
}

let pinoAccessLog = true;

/** Turns the direct writer on or off (`gateway.internals.pinoAccessLog`). */
export function usePinoAccessLog(on: boolean): void {
  pinoAccessLog = on;
}

/**
 * Writes access-log lines straight to the service logger's destination, the same bytes a plain
 * pino logger with the service logger's bindings writes for `info(fields, "request")`
 * (access-log.test.ts compares them): the line has a fixed shape, and pino's
 * generic path (serializer loop, redaction-free sibling logger) was most of its cost per request.
 */
export function accessLogWriter(logger: Logger): (f: AccessFields) => void {
  // The public way (runtime-internals.ts, "pino-access-log"): the same fields, through pino.
  if (!pinoAccessLog) return (f) => logger.info({ ...f }, "request");
  const sym = logger as unknown as Record<symbol, unknown>;
  const stream = sym[pino.symbols.streamSym] as pino.DestinationStream;
  // `,"svc":"gateway"`: the service logger's bindings as pino serialized them.
  const chindings = sym[pino.symbols.chindingsSym] as string;
  const head = `{"level":${logger.levels.values.info}`;
  return (f) => {
    const subject = f.subject === undefined ? "" : `,"subject":${asString(f.subject)}`;
    stream.write(
      `${head},"time":${Date.now()}${chindings},"reqId":${asString(f.reqId)},"method":${asString(f.method)},"path":${asString(f.path)},"status":${num(f.status)},"ms":${num(f.ms)}${subject},"msg":"request"}\n`,
    );
  };
}

const num = (n: number) => (Number.isFinite(n) ? String(n) : "null");

/** pino's string serializer (pino/lib/tools.js asString), so that the bytes stay pino's. */
function asString(str: string): string {
  const l = str.length;
  if (l > 100) return JSON.stringify(str);
  let result = "";
  let last = 0;
  let found = false;
  let point = 255;
  for (let i = 0; i < l && point >= 32; i++) {
    point = str.charCodeAt(i);
    if (point === 34 || point === 92) {
      result += str.slice(last, i) + "\\";
      last = i;
      found = true;
    }
  }
  result = found ? result + str.slice(last) : str;
  return point < 32 ? JSON.stringify(str) : `"${result}"`;
}

const noop = () => undefined;

/**
 * A request's logger: the pino child with `bindings`, made when something is first logged through
 * it. Most requests log nothing but their access line (written above), and a pino child (bindings
 * serialized and redacted, formatters, level methods) cost every request a few microseconds.
 * A call at a level that is off is a no-op without making the child, as it would be on the child.
 */
export function lazyChild(parent: Logger, bindings: pino.Bindings): Logger {
  let real: Logger | undefined;
  const make = () => (real ??= parent.child(bindings));
  const levels = parent.levels.values;
  return new Proxy(parent, {
    get(target, key) {
      if (real === undefined && typeof key === "string") {
        if (key === "isLevelEnabled") return target.isLevelEnabled.bind(target);
        if (Object.hasOwn(levels, key) && !target.isLevelEnabled(key)) return noop;
      }
      const l = make();
      const v: unknown = Reflect.get(l, key, l);
      return typeof v === "function" ? (v as (...a: unknown[]) => unknown).bind(l) : v;
    },
    set(_target, key, value) {
      return Reflect.set(make(), key, value);
    },
  });
}
