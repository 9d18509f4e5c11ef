import { randomBytes } from "node:crypto";
import { mkdtemp, open, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { receiveBody } from "../src/services/session-body.js";
import { closeFd, DIRECT_MIN, reopenDirect } from "../src/services/session-direct.js";
import { type Harness, startHarness } from "./session-harness.js";

/**
 * Large session transfers through O_DIRECT (services/session-direct.ts): whole aligned blocks
 * through the direct descriptor, the partial last block (and any unaligned start) through the
 * ordinary one; downloads read whole aligned blocks and send only the range asked for.
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

describe("session transfers with O_DIRECT", () => {
  it("the temp file system takes O_DIRECT (else these tests would only cover the fallback)", async () => {
    const dir = await mkdtemp(join(tmpdir(), "ce-direct-"));
    const fh = await open(join(dir, "f"), "w+");
    try {
      const d = await reopenDirect(fh.fd, "w");
      expect(d).toBeTypeOf("number");
      closeFd(d);
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
    for (const [a, b] of [[4097, data.length - 1], [5000, DIRECT_MIN + 2 * MiB + 3], [MiB - 1, data.length - 2], [0, DIRECT_MIN + 4095]] as const) {
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
      const d = await reopenDirect(fh.fd, "w");
      try {
        const data = randomBytes(9 * MiB + 12_345);
        const src = new PassThrough();
        let asked = 0;
        const grow = (n: number) => (n - asked > 700_000 ? ((asked = n), new Promise<void>((r) => setTimeout(r, 2))) : undefined);
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
        closeFd(d);
        await fh.close();
        await rm(dir, { recursive: true, force: true });
      }
    });
  }
});
