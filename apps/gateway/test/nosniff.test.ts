import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { startTestGateway, XRSL, type TestGateway } from "./harness.js";

/**
 * `X-Content-Type-Options: nosniff` on every answer (docs/security.md, "Content sniffing"): a
 * job writes its session files and part of its diagnose files, so a browser must take each as
 * the type it is sent with (octet-stream, text/plain) and never guess HTML or a script from the
 * bytes. Session downloads are written to the socket past the middleware (download.ts), so they
 * are checked on their own, full and ranged, as are HEAD, the pages and error answers.
 */
let t: TestGateway;
let id: string;

beforeAll(async () => {
  t = await startTestGateway(inject("redisUrl"));
  const r = await t.request("POST", `${t.rest}/1.1/jobs?action=new`, {
    body: XRSL("sniff"),
    accept: "application/json",
    headers: { "content-type": "application/rsl" },
  });
  id = r.json().job[0].id;
  const html = "<html><script>alert(document.domain)</script></html>";
  const put = await t.request("PUT", `${t.rest}/1.1/jobs/${id}/session/page.txt`, { body: html });
  expect(put.status).toBe(200);
});
afterAll(async () => t?.close());

describe("X-Content-Type-Options: nosniff", () => {
  it("session downloads (whole, ranged, HEAD) and the directory listing", async () => {
    const file = `${t.rest}/1.1/jobs/${id}/session/page.txt`;
    for (const [method, headers] of [
      ["GET", {}],
      ["GET", { range: "bytes=0-5" }],
      ["HEAD", {}],
    ] as const) {
      const r = await t.request(method, file, { accept: "*/*", headers });
      expect(r.status, `${method} ${JSON.stringify(headers)}`).toBeLessThan(300);
      expect(r.headers["content-type"]).toBe("application/octet-stream");
      expect(r.headers["x-content-type-options"], `${method} ${JSON.stringify(headers)}`).toBe("nosniff");
    }
    const listing = await t.request("GET", `${t.rest}/1.1/jobs/${id}/session/`, { accept: "application/json" });
    expect(listing.headers["x-content-type-options"]).toBe("nosniff");
  });

  it("diagnose files, from the control directory and rendered from the record", async () => {
    for (const type of ["description", "status", "xml", "input"]) {
      const r = await t.request("GET", `${t.rest}/1.1/jobs/${id}/diagnose/${type}`, { accept: "*/*" });
      expect(r.status, type).toBe(200);
      expect(r.headers["x-content-type-options"], type).toBe("nosniff");
    }
  });

  it("structured answers, pages and errors", async () => {
    const answers = [
      await t.request("GET", `${t.rest}/1.1/jobs`, { accept: "application/json" }),
      await t.request("GET", `${t.rest}/1.1/jobs/${id}`, { accept: "text/html" }),
      await t.request("GET", `${t.rest}/1.1/jobs/${id}/session/absent`, { accept: "*/*" }),
      await t.request("POST", `${t.rest}/1.1/jobs?action=bogus`, { accept: "application/xml", body: "<jobs/>" }),
      await t.request("GET", `${t.rest}/1.1/info`, { accept: "application/xml", as: "none" }),
    ];
    for (const r of answers) expect(r.headers["x-content-type-options"], `${r.status} ${r.headers["content-type"]}`).toBe("nosniff");
  });
});
