import { afterAll, beforeAll, describe, expect, it, inject } from "vitest";
import { startTestGateway, XRSL, type TestGateway } from "../../test/harness.js";
import { STREAM_MIN_JOBS, renderJobList } from "../services/joblist.js";

/** A list long enough to be streamed: same bytes, same headers (Content-Length, no chunking), HEAD alike. */
let t: TestGateway;
beforeAll(async () => {
  t = await startTestGateway(inject("redisUrl"));
  const body = Array.from({ length: 1000 }, (_, i) => `(${XRSL(`l${i}`)})`).join("");
  for (let n = 0; n < STREAM_MIN_JOBS + 1; n += 1000) {
    const r = await t.request("POST", `${t.rest}/1.1/jobs?action=new`, { body: `+${body}`, accept: "application/json" });
    expect(r.status).toBe(201);
  }
}, 120_000);
afterAll(async () => t?.close());

describe("GET /jobs streamed", () => {
  it.each([
    ["application/json", "json"],
    ["application/xml", "xml"],
  ] as const)("%s: the rendered list's bytes with their Content-Length", async (accept, fmt) => {
    for (const q of ["", "?state=ACCEPTING,ACCEPTED,PREPARING"]) {
      const g = await t.request("GET", `${t.rest}/1.1/jobs${q}`, { accept });
      // The items as the client reads them, rendered whole again (nothing changes them meanwhile).
      const items: { id: string; state?: string }[] =
        fmt === "json"
          ? g.json().job
          : [...g.text.matchAll(/<job><id>([^<]*)<\/id>(?:<state>([^<]*)<\/state>)?<\/job>/g)].map((m) =>
              m[2] ? { id: m[1]!, state: m[2] } : { id: m[1]! },
            );
      expect(items.length).toBeGreaterThan(STREAM_MIN_JOBS);
      if (q) expect(items.every((j) => j.state)).toBe(true);
      expect(g.status).toBe(200);
      expect(g.headers["transfer-encoding"]).toBeUndefined();
      expect(g.headers["content-type"]).toBe(accept);
      expect(g.text).toBe(renderJobList(items, fmt));
      expect(g.headers["content-length"]).toBe(String(Buffer.byteLength(g.text)));
      const h = await t.request("HEAD", `${t.rest}/1.1/jobs${q}`, { accept });
      expect(h.status).toBe(200);
      expect(h.text).toBe("");
      expect(h.headers["content-length"]).toBe(g.headers["content-length"]);
    }
  });
});
