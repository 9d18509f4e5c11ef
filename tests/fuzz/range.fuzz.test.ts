/**
 * Byte ranges. `Range` (downloads) and `Content-Range` (partial uploads): random, grammar-built
 * and mutated headers never throw anything but the designed 400/416, and what they return is what
 * the header says. Upload bookkeeping (the capped range list in Redis, one Lua script): random PUT
 * sequences against a reference model (a set of received bytes) — the stored list is exactly the
 * coalesced set, completion is reported exactly when [0,total) is covered, and a PUT that would
 * need more than the cap of disjoint ranges is refused and changes nothing.
 */
import { randomBytes } from "node:crypto";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { UploadRanges } from "@ce/store";
import { CeError } from "../../apps/gateway/src/errors.js";
import { parseRange } from "../../apps/gateway/src/services/session/download.js";
import { parseContentRange } from "../../apps/gateway/src/services/session/accounting.js";
import { fc, fuzz } from "@ce/testing/fuzz";
import { mutated, rawText } from "./arbitraries.js";

const num = fc.oneof(
  fc.nat({ max: 100 }),
  fc.nat(),
  fc.constantFrom(0, 1, 2 ** 53 - 1, 2 ** 53, 1e21),
  fc.bigInt({ min: 0n, max: 10n ** 30n }),
);
const digits = num.map(String);
const ws = fc.constantFrom("", " ", "  ", "\t");

const rangeHeader = fc.oneof(
  fc
    .tuple(
      ws,
      fc.constantFrom("bytes", "BYTES", "Bytes", "items"),
      ws,
      fc.oneof(digits, fc.constant("")),
      ws,
      fc.oneof(digits, fc.constant("")),
    )
    .map(([a, u, b, x, c, y]) => `${a}${u}${b}=${c}${x}-${y}`),
  fc.array(fc.tuple(digits, digits), { minLength: 2, maxLength: 4 }).map((l) => `bytes=${l.map(([a, b]) => `${a}-${b}`).join(",")}`),
);
const contentRangeHeader = fc
  .tuple(
    ws,
    fc.constantFrom("bytes", "BYTES", "octets"),
    fc.constantFrom(" ", "  ", ""),
    digits,
    digits,
    fc.oneof(digits, fc.constant("*")),
    ws,
  )
  .map(([a, u, s, x, y, t, b]) => `${a}${u}${s}${x}-${y}/${t}${b}`);

/** The numbers a header names, for comparing with what the parser made of it. */
const ints = (h: string) => [...h.matchAll(/\d+/g)].map((m) => BigInt(m[0]));

describe("Range (downloads)", () => {
  it("never throws but 416; a returned range lies inside the file and is the one the header names", async () => {
    await fuzz(
      "range-header",
      fc.tuple(fc.oneof(rangeHeader, mutated(rangeHeader), rawText), fc.oneof(fc.nat({ max: 1000 }), fc.nat())),
      ([h, size]) => {
        let r;
        try {
          r = parseRange(h, size);
        } catch (e) {
          expect(e).toBeInstanceOf(CeError);
          expect((e as CeError).status).toBe(416);
          return;
        }
        if (!r) return;
        expect(Number.isSafeInteger(r.start) && Number.isSafeInteger(r.end)).toBe(true);
        expect(0 <= r.start && r.start <= r.end && r.end < size).toBe(true);
        const m = /^\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*$/i.exec(h);
        expect(m).not.toBeNull();
        const [, a = "", b = ""] = m!;
        if (a === "") {
          expect(r.end).toBe(size - 1);
          expect(BigInt(r.start)).toBe(BigInt(size) - BigInt(b) > 0n ? BigInt(size) - BigInt(b) : 0n);
        } else {
          expect(BigInt(r.start)).toBe(BigInt(a));
          if (b !== "") expect(BigInt(r.end)).toBe(BigInt(b) < BigInt(size - 1) ? BigInt(b) : BigInt(size - 1));
          else expect(r.end).toBe(size - 1);
        }
      },
    );
  });
});

describe("Content-Range (partial uploads)", () => {
  it("never throws but 400 BAD_CONTENT_RANGE; a result is consistent and carries the header's numbers", async () => {
    await fuzz("content-range-header", fc.oneof(contentRangeHeader, mutated(contentRangeHeader), rawText), (h) => {
      let r;
      try {
        r = parseContentRange(h);
      } catch (e) {
        expect(e).toBeInstanceOf(CeError);
        expect((e as CeError).status).toBe(400);
        expect((e as CeError).code).toBe("BAD_CONTENT_RANGE");
        return;
      }
      expect(r).toBeDefined();
      expect(Number.isSafeInteger(r!.start) && Number.isSafeInteger(r!.end) && r!.start <= r!.end).toBe(true);
      if (r!.total !== undefined) expect(r!.end < r!.total).toBe(true);
      const n = ints(h);
      expect(n.slice(0, 2)).toEqual([BigInt(r!.start), BigInt(r!.end)]);
      if (r!.total === undefined) expect(h).toMatch(/\/\*\s*$/);
      else expect(n[2]).toBe(BigInt(r!.total));
    });
  });

  it("an absent header is a whole-file PUT", () => {
    expect(parseContentRange(undefined)).toBeUndefined();
  });
});

/** Reference: the disjoint, coalesced intervals [s,e) of a set of byte offsets. */
function intervals(bytes: ReadonlySet<number>, total: number): [number, number][] {
  const out: [number, number][] = [];
  for (let i = 0; i < total; i++) {
    if (!bytes.has(i)) continue;
    const last = out[out.length - 1];
    if (last && last[1] === i) last[1] = i + 1;
    else out.push([i, i + 1]);
  }
  return out;
}

describe("upload range bookkeeping (Redis, capped)", () => {
  const MAX_RANGES = 4;
  let redis: Redis;
  const prefix = `{f${randomBytes(5).toString("hex")}}`;
  beforeAll(() => {
    redis = new Redis(inject("redisUrl"));
  });
  afterAll(async () => {
    const keys = await redis.keys(`${prefix}*`);
    if (keys.length) await redis.del(...keys);
    redis.disconnect();
  });

  const put = fc.record({ start: fc.nat({ max: 40 }), len: fc.integer({ min: 1, max: 12 }), total: fc.constantFrom(40, 40, 40, 40, 30) });

  it("the stored list equals the model; completion exactly at full cover; over the cap refused without change", async () => {
    let job = 0;
    await fuzz(
      "upload-ranges",
      fc.array(put, { minLength: 1, maxLength: 25 }),
      async (puts) => {
        const store = new UploadRanges(redis, prefix, { maxRanges: MAX_RANGES, maxFiles: 10, ttlMs: 60_000 });
        const id = `job${job++}`;
        let model = new Set<number>();
        let modelTotal: number | undefined;
        for (const p of puts) {
          if (p.start >= p.total) continue; // the route refuses these (end >= total) before bookkeeping
          const end = Math.min(p.start + p.len, p.total);
          const base = modelTotal === p.total ? model : new Set<number>();
          const next = new Set(base);
          for (let i = p.start; i < end; i++) next.add(i);
          const want = intervals(next, p.total);
          const res = await store.add(id, "/f", p.start, end, p.total);
          if (want.length === 1 && want[0]![0] === 0 && want[0]![1] === p.total) {
            expect(res).toBe("complete");
            model = new Set();
            modelTotal = undefined;
          } else if (want.length > MAX_RANGES) {
            expect(res).toBe("too-many-ranges");
          } else {
            expect(res).toBe("recorded");
            model = next;
            modelTotal = p.total;
          }
          const stored = await store.ranges(id, "/f");
          if (modelTotal === undefined) expect(stored).toBeUndefined();
          else expect(stored).toEqual({ total: modelTotal, ranges: intervals(model, modelTotal) });
        }
      },
      100,
    );
  });

  it("refuses partial bookkeeping for more files than the per-job cap", async () => {
    const store = new UploadRanges(redis, prefix, { maxRanges: MAX_RANGES, maxFiles: 3, ttlMs: 60_000 });
    for (const f of ["/a", "/b", "/c"]) expect(await store.add("capped", f, 0, 1, 10)).toBe("recorded");
    expect(await store.add("capped", "/d", 0, 1, 10)).toBe("too-many-files");
    expect(await store.add("capped", "/a", 1, 2, 10)).toBe("recorded"); // a known file still progresses
    expect(await store.add("capped", "/a", 2, 10, 10)).toBe("complete");
    expect(await store.add("capped", "/d", 0, 1, 10)).toBe("recorded");
  });
});
