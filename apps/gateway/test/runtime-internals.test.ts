import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { constants, writeSync } from "node:fs";
import { mkdtemp, open, rm } from "node:fs/promises";
import { createServer, type IncomingMessage, request, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import pino from "pino";
import { compileConfig } from "@ce/config";
import { createLogger } from "@ce/ops";
import { accessLogWriter, usePinoAccessLog } from "../src/middleware/request-context/access-log.js";
import { ARRAY_BUFFER_SWEEPING_FLAG, CHECKED_ON_NODE_MAJOR, RUNTIME_INTERNALS } from "../src/runtime-internals.js";
import { ALIGN, SLAB, takeAlignedSlab, giveSlab, useAlignedMemory } from "../src/services/session/buffers.js";
import { takeBody, useParserIntake } from "../src/services/session/intake.js";

/**
 * The assumptions of runtime-internals.ts, checked on the Node in use. A new Node major fails the
 * first test on purpose: check every entry below again, then raise CHECKED_ON_NODE_MAJOR.
 */
describe("runtime internals", () => {
  it(`the list was checked on this Node major (${CHECKED_ON_NODE_MAJOR})`, () => {
    expect(Number(process.versions.node.split(".")[0])).toBe(CHECKED_ON_NODE_MAJOR);
  });

  it("every entry has a gateway.internals setting, on by default, and a check here", () => {
    const defaults = compileConfig({}).gateway.internals as Record<string, boolean>;
    for (const i of RUNTIME_INTERNALS) expect(defaults[i.setting], i.id).toBe(true);
    expect(Object.keys(defaults).sort()).toEqual(RUNTIME_INTERNALS.map((i) => i.setting).sort());
    expect(RUNTIME_INTERNALS.map((i) => i.id).sort()).toEqual([
      "aligned-memory",
      "parser-body-intake",
      "pino-access-log",
      "v8-array-buffer-sweeping",
    ]);
  });
});

describe("parser-body-intake", () => {
  let server: Server;
  let port: number;
  let handler: (req: IncomingMessage) => Promise<string>;
  beforeAll(async () => {
    server = createServer(
      (req, res) =>
        void handler(req).then(
          (t) => res.end(t),
          (e: unknown) => res.end(`error ${String(e)}`),
        ),
    );
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  const put = (data: Buffer) =>
    new Promise<string>((res, rej) => {
      const req = request({ host: "127.0.0.1", port, method: "PUT", path: "/", agent: false }, (r) => {
        let t = "";
        r.on("data", (d: Buffer) => (t += d.toString()));
        r.on("end", () => res(t));
      });
      req.on("error", rej);
      void (async () => {
        for (let off = 0; off < data.length; off += 50_000) {
          if (!req.write(data.subarray(off, off + 50_000))) await new Promise((r) => req.once("drain", r));
        }
        req.end();
      })();
    });

  /** Takes the body with `takeBody`, refusing more after each chunk and resuming a tick later. */
  const receive = (req: IncomingMessage) =>
    new Promise<string>((done) => {
      const chunks: Buffer[] = [];
      let sawPause = false;
      const before = { ownPush: Object.hasOwn(req, "push"), complete: typeof req.complete };
      const intake = takeBody(
        req,
        (c) => chunks.push(Buffer.from(c)),
        () => done(JSON.stringify({ direct: intake.direct, before, sawPause, bytes: Buffer.concat(chunks).toString("hex") })),
        () => {
          // The parser stops reading the socket on false; resume() restarts it.
          setImmediate(() => {
            sawPause ||= req.socket.isPaused();
            intake.resume();
          });
          return false;
        },
      );
    });

  it("the parser hands body chunks to the request's own `push`; false pauses the socket, resume restarts it", async () => {
    const data = randomBytes(2 * 1024 * 1024 + 17);
    handler = receive;
    const r = JSON.parse(await put(data)) as {
      direct: boolean;
      before: { ownPush: boolean; complete: string };
      sawPause: boolean;
      bytes: string;
    };
    expect(r.before).toEqual({ ownPush: false, complete: "boolean" });
    expect(r.direct).toBe(true);
    expect(r.sawPause).toBe(true);
    expect(r.bytes).toBe(data.toString("hex"));
  });

  it("off: the same bytes through stream events", async () => {
    const data = randomBytes(300_001);
    handler = receive;
    useParserIntake(false);
    try {
      const r = JSON.parse(await put(data)) as { direct: boolean; bytes: string };
      expect(r.direct).toBe(false);
      expect(r.bytes).toBe(data.toString("hex"));
    } finally {
      useParserIntake(true);
    }
  });
});

describe("aligned-memory", () => {
  /** A directory whose file system does O_DIRECT (tmpfs may not), or undefined. */
  async function directDir(): Promise<string | undefined> {
    for (const base of [resolve(import.meta.dirname, "../node_modules/.cache"), tmpdir()]) {
      const dir = await mkdtemp(join(base, "ce-odirect-")).catch(() => undefined);
      if (!dir) continue;
      const ok = await open(join(dir, "probe"), constants.O_CREAT | constants.O_WRONLY | constants.O_DIRECT).then(
        (h) => h.close().then(() => true),
        () => false,
      );
      if (ok) return dir;
      await rm(dir, { recursive: true, force: true });
    }
    return undefined;
  }

  it("slices of a WebAssembly.Memory satisfy O_DIRECT where an unaligned buffer does not; off: no aligned slab", async () => {
    const dir = await directDir();
    if (!dir) return void console.warn("no file system here accepts O_DIRECT: aligned-memory not checked");
    const fh = await open(join(dir, "f"), constants.O_CREAT | constants.O_WRONLY | constants.O_DIRECT);
    try {
      const slab = takeAlignedSlab();
      expect(slab?.length).toBe(SLAB);
      expect(writeSync(fh.fd, slab!, 0, SLAB, 0)).toBe(SLAB);
      giveSlab(slab!);
      // The file system checks alignment: the same length from an address 1 byte off is refused.
      const off = Buffer.allocUnsafeSlow(2 * ALIGN + 1).subarray(1, 1 + ALIGN);
      let code: string | undefined;
      try {
        writeSync(fh.fd, off, 0, ALIGN, 0);
      } catch (e) {
        code = (e as NodeJS.ErrnoException).code;
      }
      // Some file systems accept unaligned direct I/O (then the check above proves less).
      if (code !== undefined) expect(code).toBe("EINVAL");
      useAlignedMemory(false);
      expect(takeAlignedSlab()).toBeUndefined();
    } finally {
      useAlignedMemory(true);
      await fh.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe("pino-access-log", () => {
  it("pino's stream and chindings symbols hold the destination and the serialized bindings; off: logger.info writes the same fields", () => {
    const out: string[] = [];
    const logger = createLogger("gateway", "info", {}, { write: (s: string) => void out.push(s) });
    const sym = logger as unknown as Record<symbol, unknown>;
    expect(typeof (sym[pino.symbols.streamSym] as { write?: unknown }).write).toBe("function");
    expect(sym[pino.symbols.chindingsSym]).toBe(',"svc":"gateway"');
    const fields = { reqId: "r1", method: "GET", path: "/x", status: 200, ms: 3, subject: "/CN=a" };
    accessLogWriter(logger)(fields);
    usePinoAccessLog(false);
    try {
      accessLogWriter(logger)(fields);
    } finally {
      usePinoAccessLog(true);
    }
    const [direct, plain] = out.map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(direct).toMatchObject({ ...fields, svc: "gateway", level: 30, msg: "request" });
    expect({ ...plain, time: 0 }).toEqual({ ...direct, time: 0 });
  });
});

describe("v8-array-buffer-sweeping", () => {
  it("V8 knows the flag (Node refuses an unknown one) and setFlagsFromString exists", async () => {
    const v8 = await import("node:v8");
    expect(typeof v8.setFlagsFromString).toBe("function");
    const res = await new Promise<{ code: number | null; stderr: string }>((r) =>
      execFile(process.execPath, [ARRAY_BUFFER_SWEEPING_FLAG, "-e", "0"], (err, _o, stderr) =>
        r({ code: err ? (err.code as number) : 0, stderr }),
      ),
    );
    expect(res).toEqual({ code: 0, stderr: "" });
    const bad = await new Promise<number>((r) =>
      execFile(process.execPath, ["--no-concurrent-array-buffer-sweeping-nonexistent", "-e", "0"], (err) => r(err ? 1 : 0)),
    );
    expect(bad).toBe(1);
  });
});
