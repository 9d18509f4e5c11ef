import { randomBytes } from "node:crypto";
import { mkdtemp, open, readFile, rm, truncate, writeFile } from "node:fs/promises";
import { createServer, type IncomingMessage, request, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough, Readable } from "node:stream";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { SessionBytes } from "@ce/store";
import { BodyAborted, receiveBody } from "../src/services/session/receive.js";
import { DIRECT_MIN, reopenDirect } from "../src/services/session/direct.js";
import { type Harness, OWNER, startHarness } from "./session-harness.js";
import { quietPeriod, waitFor } from "@ce/testing";

/**
 * The direct Node paths of session transfers (services/session/receive.ts receiveBody,
 * services/session/send.ts): bodies larger than their buffers, split across many writes and
 * reads, come back byte for byte, with the headers the middleware would have added.
 */
let h: Harness;
beforeAll(async () => {
  h = await startHarness(inject("redisUrl"));
});
afterAll(async () => {
  await h?.close();
});

const sess = (id: string, rel = "") => `${h.base}/${id}/session${rel}`;
const MiB = 1024 * 1024;

describe("session transfers larger than the I/O buffers", () => {
  it("a chunked 3 MiB upload is stored exactly; GET and ranges across buffer edges return exact bytes", async () => {
    const id = await h.newJob();
    const data = randomBytes(3 * MiB + 5);
    // Many client writes of odd sizes, no Content-Length (chunked): quota reserved in steps.
    const parts: Buffer[] = [];
    for (let off = 0; off < data.length; off += 77_777) parts.push(data.subarray(off, off + 77_777));
    expect((await h.raw("PUT", sess(id, "/big.bin"), { body: parts })).status).toBe(200);
    expect((await readFile(join(h.sessionRoot, id, "big.bin"))).equals(data)).toBe(true);

    const whole = await h.raw("GET", sess(id, "/big.bin"));
    expect(whole.status).toBe(200);
    expect(whole.headers["content-length"]).toBe(String(data.length));
    expect(whole.headers["x-request-id"]).toMatch(/^[0-9a-f-]{36}$/);
    expect(whole.headers["x-hono-already-sent"]).toBeUndefined();
    expect(whole.body.equals(data)).toBe(true);

    // Longer than one read buffer (session/send.ts CHUNK), starting off its alignment.
    const [a, b] = [MiB - 3, 2 * MiB + 7];
    const ranged = await h.raw("GET", sess(id, "/big.bin"), { headers: { range: `bytes=${a}-${b}` } });
    expect(ranged.status).toBe(206);
    expect(ranged.headers["content-range"]).toBe(`bytes ${a}-${b}/${data.length}`);
    expect(ranged.body.equals(data.subarray(a, b + 1))).toBe(true);

    const tail = await h.raw("GET", sess(id, "/big.bin"), { headers: { range: "bytes=-300000" } });
    expect(tail.status).toBe(206);
    expect(tail.body.equals(data.subarray(data.length - 300_000))).toBe(true);
  });

  it("four parallel Content-Range parts of one file assemble into it", async () => {
    const id = await h.newJob();
    const data = randomBytes(4 * MiB);
    const part = MiB;
    const res = await Promise.all(
      [0, 1, 2, 3].map((k) =>
        h.raw("PUT", sess(id, "/parts.bin"), {
          body: data.subarray(k * part, (k + 1) * part),
          headers: { "content-length": String(part), "content-range": `bytes ${k * part}-${(k + 1) * part - 1}/${data.length}` },
        }),
      ),
    );
    expect(res.map((r) => r.status)).toEqual([200, 200, 200, 200]);
    expect((await readFile(join(h.sessionRoot, id, "parts.bin"))).equals(data)).toBe(true);
    // Charged once: each PUT settling "its" growth counted the others' too (4 MiB was charged ~12 MB).
    const bytes = new SessionBytes(h.services.redis, h.services.jobs.keys.prefix, { perJob: 1e12, perOwner: 1e12 });
    expect((await bytes.usage(OWNER, id)).job).toBe(data.length);
    // A later whole-file PUT of 1 byte gives the rest back.
    expect((await h.raw("PUT", sess(id, "/parts.bin"), { body: "x", headers: { "content-length": "1" } })).status).toBe(200);
    expect((await bytes.usage(OWNER, id)).job).toBe(1);
  });
});

describe("sendFile backpressure", () => {
  /** Bytes this process has read (files and sockets): the server runs in it. */
  const rchar = async () => Number(/rchar: (\d+)/.exec(await readFile("/proc/self/io", "utf8"))![1]);

  it("a client that stops reading stops the file reads; it then still gets every byte", async () => {
    const id = await h.newJob();
    const size = 256 * MiB; // sparse: no disk, but every byte is read and sent
    await writeFile(join(h.sessionRoot, id, "sparse.bin"), "");
    await truncate(join(h.sessionRoot, id, "sparse.bin"), size);
    const before = await rchar();
    const res = await new Promise<IncomingMessage>((resolve, reject) => {
      const req = request({ host: "127.0.0.1", port: h.port, path: sess(id, "/sparse.bin"), agent: false }, resolve);
      req.on("error", reject);
      req.end();
    });
    res.pause();
    await quietPeriod(500, "a paused client: the server must not read the file ahead meanwhile");
    // Socket buffers (loopback autotuning: up to tcp_rmem's 32 MiB) plus the buffers in flight.
    expect((await rchar()) - before).toBeLessThan(64 * MiB);
    let got = 0;
    res.on("data", (d: Buffer) => (got += d.length));
    res.resume();
    await new Promise((r) => res.once("end", r));
    expect(got).toBe(size);
  });
});

describe("receiveBody (request body → file)", () => {
  it("writes at the offset; a body aborted before or while it is read rejects, never hangs", async () => {
    const dir = await mkdtemp(join(tmpdir(), "ce-recv-"));
    const fh = await open(join(dir, "f"), "w+");
    try {
      const src = new PassThrough();
      const done = receiveBody(src, fh, 3, 100, "x");
      src.write("abc");
      src.end("de");
      expect(await done).toBe(5);
      expect((await readFile(join(dir, "f"))).subarray(3).toString()).toBe("abcde");

      const gone = new PassThrough();
      gone.destroy();
      await new Promise((r) => setImmediate(r)); // its "close" has been emitted already
      await expect(receiveBody(gone, fh, 0, 100, "x")).rejects.toBeInstanceOf(BodyAborted);

      const mid = new PassThrough();
      const p = receiveBody(mid, fh, 0, 100, "x");
      mid.write("12");
      mid.destroy(new Error("ECONNRESET"));
      await expect(p).rejects.toBeInstanceOf(BodyAborted);
    } finally {
      await fh.close();
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("bodies across many 1 MiB slabs, with quota waits between chunks, land exactly at the offset", async () => {
    const dir = await mkdtemp(join(tmpdir(), "ce-recv-"));
    const fh = await open(join(dir, "f"), "w+");
    try {
      const data = randomBytes(5 * MiB + 12_345);
      const src = new PassThrough();
      let asked = 0;
      // Every ~700 KB the reservation answers later (a Redis round trip): the chunk is held meanwhile.
      const grow = (n: number) =>
        n - asked > 700_000 ? ((asked = n), quietPeriod(2, "the file grows while it is being sent")) : undefined;
      const done = receiveBody(src, fh, 7, 10 * MiB, "x", grow);
      for (let off = 0; off < data.length; off += 33_333) {
        if (!src.write(data.subarray(off, off + 33_333))) await new Promise((r) => src.once("drain", r));
      }
      src.end();
      expect(await done).toBe(data.length);
      const stored = await readFile(join(dir, "f"));
      expect(stored.length).toBe(7 + data.length);
      expect(stored.subarray(7).equals(data)).toBe(true);
    } finally {
      await fh.close();
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("takes no more than ~4 MiB ahead of the disk: the rest stays with the sender (backpressure)", async () => {
    const dir = await mkdtemp(join(tmpdir(), "ce-recv-"));
    const fh = await open(join(dir, "f"), "w+");
    const src = new Readable({ read() {} });
    const done = receiveBody(src, fh, 0, 64 * MiB, "x");
    try {
      await new Promise((r) => process.nextTick(r)); // flowing now
      // 16 MiB offered at once, before any write can complete: the request must be paused.
      for (let i = 0; i < 256; i++) src.push(Buffer.alloc(64 * 1024, i));
      expect(src.isPaused()).toBe(true);
      expect(src.readableLength).toBeGreaterThanOrEqual(11 * MiB);
      src.push(null);
      expect(await done).toBe(16 * MiB);
      const stored = await readFile(join(dir, "f"));
      expect(stored.length).toBe(16 * MiB);
      for (let i = 0; i < 256; i++) expect(stored[i * 64 * 1024 + 100]).toBe(i);
    } finally {
      src.destroy();
      await done.catch(() => undefined);
      await fh.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe("receiveBody from a Node request (chunks taken from the parser, session/intake.ts)", () => {
  let server: Server;
  let port: number;
  let handler: (req: IncomingMessage) => Promise<string>;
  beforeAll(async () => {
    server = createServer((req, res) => {
      handler(req).then(
        (text) => res.end(text),
        (e: unknown) => {
          res.statusCode = 500;
          res.end(String((e as Error).message));
        },
      );
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  /**
   * PUTs `data` in `piece`-byte writes; `chunked`: without Content-Length, so one socket read
   * carries many body chunks and the parser hands over several in a row (as TLS records do).
   */
  const put = (data: Buffer, piece: number, chunked = false) =>
    new Promise<{ status: number; text: string }>((resolve, reject) => {
      const headers = chunked ? {} : { "content-length": data.length };
      const req = request({ host: "127.0.0.1", port, method: "PUT", path: "/", agent: false, headers }, (res) => {
        let text = "";
        res.on("data", (d: Buffer) => (text += d.toString()));
        res.on("end", () => resolve({ status: res.statusCode!, text }));
      });
      req.on("error", reject);
      void (async () => {
        for (let off = 0; off < data.length; off += piece) {
          if (!req.write(data.subarray(off, off + piece))) await new Promise((r) => req.once("drain", r));
        }
        req.end();
      })();
    });

  const withFile = async (fn: (fh: Awaited<ReturnType<typeof open>>, path: string) => Promise<void>) => {
    const dir = await mkdtemp(join(tmpdir(), "ce-intake-"));
    const fh = await open(join(dir, "f"), "w+");
    try {
      await fn(fh, join(dir, "f"));
    } finally {
      await fh.close();
      await rm(dir, { recursive: true, force: true });
    }
  };

  it("many small chunks per read, with quota waits between them, land exactly and in order, without `data` listeners", async () => {
    await withFile(async (fh, path) => {
      const data = randomBytes(5 * MiB + 4_321);
      let asked = 0;
      let listeners = -1;
      handler = async (req) => {
        // The reservation answers later every ~300 KB: chunks the parser delivers meanwhile are held.
        const grow = (n: number) => {
          listeners = Math.max(listeners, req.listenerCount("data"));
          return n - asked > 300_000 ? ((asked = n), quietPeriod(3, "the file grows while it is being sent")) : undefined;
        };
        return String(await receiveBody(req, fh, 7, 10 * MiB, "x", grow));
      };
      const r = await put(data, 3_333, true);
      expect(r).toEqual({ status: 200, text: String(data.length) });
      expect(listeners).toBe(0);
      const stored = await readFile(path);
      expect(stored.length).toBe(7 + data.length);
      expect(stored.subarray(7).equals(data)).toBe(true);
    });
  });

  it("a body already received before the handler reads it is taken from the request's buffer", async () => {
    await withFile(async (fh, path) => {
      const data = randomBytes(9_000);
      handler = async (req) => {
        await waitFor("the whole body in the request's buffer", () => req.readableLength >= data.length, 5_000, { everyMs: 5 });
        return String(await receiveBody(req, fh, 0, MiB, "x"));
      };
      expect(await put(data, 1_000)).toEqual({ status: 200, text: "9000" });
      expect((await readFile(path)).equals(data)).toBe(true);
    });
  });

  it("while the quota does not answer, the socket is not read further (the sender keeps the bytes)", async () => {
    await withFile(async (fh, path) => {
      const data = Buffer.alloc(32 * MiB);
      for (let i = 0; i < 512; i++) data[i * 64 * 1024 + 5] = i & 0xff;
      let release!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      let readWhileBlocked = -1;
      handler = async (req) => {
        let first = true;
        const grow = () => {
          if (!first) return undefined;
          first = false;
          // Blocked for 300 ms: what the gateway read from the socket meanwhile must stay small.
          setTimeout(() => {
            readWhileBlocked = req.socket.bytesRead; // its own connection: this request only
            release();
          }, 300);
          return gate;
        };
        return String(await receiveBody(req, fh, 0, 64 * MiB, "x", grow));
      };
      expect(await put(data, 256 * 1024)).toEqual({ status: 200, text: String(data.length) });
      expect(readWhileBlocked).toBeGreaterThan(0);
      expect(readWhileBlocked).toBeLessThan(4 * MiB);
      const stored = await readFile(path);
      expect(stored.length).toBe(data.length);
      for (let i = 0; i < 512; i++) expect(stored[i * 64 * 1024 + 5]).toBe(i & 0xff);
    });
  });

  it("a quota refusal mid-body rejects the upload (no hang), and the connection still answers", async () => {
    await withFile(async (fh) => {
      const data = randomBytes(3 * MiB);
      handler = async (req) => {
        const grow = (n: number) => (n > MiB ? Promise.reject(new Error("over quota")) : undefined);
        return String(await receiveBody(req, fh, 0, 10 * MiB, "x", grow));
      };
      const r = await put(data, 64 * 1024).catch((e: Error) => ({ status: 0, text: e.message }));
      // The handler's error answer (500 here) or a reset while the client still sends: never a hang.
      expect(r.status === 500 ? r.text : "reset").toMatch(/over quota|reset/);
    });
  });
});

// Large session transfers through O_DIRECT (services/session/direct.ts, write-path.ts): whole aligned blocks
// through the direct descriptor, the partial last block (and any unaligned start) through the
// ordinary one; downloads read whole aligned blocks and send only the range asked for.
describe("session transfers with O_DIRECT", () => {
  it("the temp file system takes O_DIRECT (else these tests would only cover the fallback)", async () => {
    const dir = await mkdtemp(join(tmpdir(), "ce-direct-"));
    const fh = await open(join(dir, "f"), "w+");
    try {
      const d = await reopenDirect(fh, "w");
      expect(d?.num).toBeTypeOf("number");
      await d?.close();
    } finally {
      await fh.close();
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("chunked and declared uploads above DIRECT_MIN are stored exactly; GETs of odd ranges return exact bytes", async () => {
    const id = await h.newJob();
    const data = randomBytes(DIRECT_MIN + 3 * MiB + 777);
    const parts: Buffer[] = [];
    for (let off = 0; off < data.length; off += 77_777) parts.push(data.subarray(off, off + 77_777));
    expect((await h.raw("PUT", sess(id, "/a.bin"), { body: parts })).status).toBe(200);
    expect((await readFile(join(h.sessionRoot, id, "a.bin"))).equals(data)).toBe(true);
    const declared = { "content-length": String(data.length) };
    expect((await h.raw("PUT", sess(id, "/b.bin"), { body: parts, headers: declared })).status).toBe(200);
    expect((await readFile(join(h.sessionRoot, id, "b.bin"))).equals(data)).toBe(true);

    const whole = await h.raw("GET", sess(id, "/b.bin"));
    expect(whole.status).toBe(200);
    expect(whole.body.equals(data)).toBe(true);
    for (const [a, b] of [
      [4097, data.length - 1],
      [5000, DIRECT_MIN + 2 * MiB + 3],
      [MiB - 1, data.length - 2],
      [0, DIRECT_MIN + 4095],
    ] as const) {
      const r = await h.raw("GET", sess(id, "/b.bin"), { headers: { range: `bytes=${a}-${b}` } });
      expect(r.status).toBe(206);
      expect(r.body.equals(data.subarray(a, b + 1))).toBe(true);
    }
    // Overwritten with a shorter body: truncated first, nothing of the old content left.
    const short = data.subarray(0, DIRECT_MIN + 10);
    expect((await h.raw("PUT", sess(id, "/b.bin"), { body: short })).status).toBe(200);
    expect((await readFile(join(h.sessionRoot, id, "b.bin"))).equals(short)).toBe(true);
  });

  for (const offset of [0, 8192, 7]) {
    it(`receiveBody with a direct descriptor at offset ${offset}, quota waits between chunks, lands exactly`, async () => {
      const dir = await mkdtemp(join(tmpdir(), "ce-direct-"));
      const fh = await open(join(dir, "f"), "w+");
      const d = await reopenDirect(fh, "w");
      try {
        const data = randomBytes(9 * MiB + 12_345);
        const src = new PassThrough();
        let asked = 0;
        const grow = (n: number) =>
          n - asked > 700_000 ? ((asked = n), quietPeriod(2, "the file grows while it is being sent")) : undefined;
        const done = receiveBody(src, fh, offset, 20 * MiB, "x", grow, d);
        for (let off = 0; off < data.length; off += 33_333) {
          if (!src.write(data.subarray(off, off + 33_333))) await new Promise((r) => src.once("drain", r));
        }
        src.end();
        expect(await done).toBe(data.length);
        const stored = await readFile(join(dir, "f"));
        expect(stored.length).toBe(offset + data.length);
        expect(stored.subarray(offset).equals(data)).toBe(true);
      } finally {
        await d?.close();
        await fh.close();
        await rm(dir, { recursive: true, force: true });
      }
    });
  }
});
