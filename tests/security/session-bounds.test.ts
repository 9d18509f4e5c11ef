/**
 * Bounded session work through the real gateway: a directory with more entries than
 * `gateway.limits.listingEntries` (a job can create millions) is a 507 naming the limit for GET and
 * PROPFIND instead of a response that grows with it, while normal listings (arcget) still work;
 * partial uploads scattered into more disjoint ranges than `gateway.limits.uploadRanges` are refused
 * with a 409 naming it, while ordinary chunked uploads (adjacent ranges) complete; a 5,000-deep
 * tree the job made is deleted without running out of stack or descriptors.
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { startTestGateway, XRSL, type TestGateway } from "../../apps/gateway/test/harness.js";

const LISTING = 10;
let t: TestGateway;
let id: string;

beforeAll(async () => {
  t = await startTestGateway(inject("redisUrl"), { gateway: { limits: { listingEntries: LISTING, uploadRanges: 3 } } });
  const r = await t.request("POST", `${t.rest}/1.1/jobs?action=new`, {
    body: XRSL(),
    accept: "application/json",
    headers: { "content-type": "application/rsl" },
  });
  id = r.json().job[0].id;
});
afterAll(async () => {
  await t?.close();
});

const sess = (rel = "") => `${t.rest}/1.1/jobs/${id}/session${rel}`;
/** What the job itself would create in its session directory. */
function jobCreates(dir: string, n: number): void {
  const root = join(t.gw.services.control.sessionDir(id), dir);
  mkdirSync(root, { recursive: true });
  for (let i = 0; i < n; i++) writeFileSync(join(root, `f${String(i).padStart(3, "0")}`), "x");
}

describe("listings are capped", () => {
  beforeAll(() => {
    jobCreates("ok", LISTING);
    jobCreates("many", LISTING + 1);
  });

  it("a directory at the limit is listed whole (GET and PROPFIND Depth 1)", async () => {
    const get = await t.request("GET", sess("/ok/"), { accept: "application/json" });
    expect(get.status).toBe(200);
    expect(get.json().file).toHaveLength(LISTING);
    const dav = await t.request("PROPFIND", sess("/ok"), { headers: { depth: "1" } });
    expect(dav.status).toBe(207);
    expect(dav.text.match(/<d:response>/g)).toHaveLength(LISTING + 1);
  });

  it("one entry more is a 507 naming gateway.limits.listingEntries, for GET and PROPFIND", async () => {
    const get = await t.request("GET", sess("/many/"), { accept: "application/json" });
    expect(get.status).toBe(507);
    expect(get.json().reason).toMatch(/more than 10 entries.*gateway\.limits\.listingEntries/);
    const dav = await t.request("PROPFIND", sess("/many"), { headers: { depth: "1" }, accept: "application/json" });
    expect(dav.status).toBe(507);
    expect(dav.text).toMatch(/gateway\.limits\.listingEntries/);
    // The collection itself (Depth 0, what arcget asks first) and its files stay reachable.
    expect((await t.request("PROPFIND", sess("/many"), { headers: { depth: "0" } })).status).toBe(207);
    expect((await t.request("GET", sess("/many/f010"))).text).toBe("x");
  });
});

describe("upload range bookkeeping is capped", () => {
  const put = (rel: string, body: string, range: string) =>
    t.request("PUT", sess(rel), { body, accept: "application/json", headers: { "content-range": range } });

  it("adjacent ranges merge: a file sent in 50 sequential pieces completes", async () => {
    for (let i = 0; i < 50; i++) expect((await put("/seq", "ab", `bytes ${2 * i}-${2 * i + 1}/100`)).status).toBe(200);
    expect((await t.request("GET", sess("/seq"))).text).toBe("ab".repeat(50));
    expect(await t.gw.services.redis.hexists(t.gw.services.jobs.keys.uploads(id), "/seq")).toBe(0);
  });

  it("a fourth disjoint range is a 409 naming gateway.limits.uploadRanges; filling the gaps completes", async () => {
    for (const at of [0, 10, 20]) expect((await put("/holes", "h", `bytes ${at}-${at}/30`)).status).toBe(200);
    const over = await put("/holes", "h", "bytes 25-25/30");
    expect(over.status).toBe(409);
    expect(over.json().reason).toMatch(/more than 3 disjoint byte ranges \(gateway\.limits\.uploadRanges\)/);
    expect((await put("/holes", "x".repeat(30), "bytes 0-29/30")).status).toBe(200);
    expect(await t.gw.services.redis.hexists(t.gw.services.jobs.keys.uploads(id), "/holes")).toBe(0);
  });

  it("a Content-Range total beyond the upload limit is refused up front (413)", async () => {
    const r = await put("/huge", "h", `bytes 0-0/${2 ** 50}`);
    expect(r.status).toBe(413);
    expect(r.json().reason).toMatch(/Content-Range total/);
  });
});

describe("deletion", () => {
  it("DELETE of a 5,000-deep tree the job made succeeds (iterative, one descriptor at a time)", async () => {
    const root = t.gw.services.control.sessionDir(id);
    // Far deeper than PATH_MAX allows to name at once: built by descending one level at a time.
    execFileSync("python3", [
      "-c",
      "import os,sys\nos.chdir(sys.argv[1])\nfor i in range(5000):\n os.mkdir('d'); os.chdir('d')\nopen('leaf','w').write('x')",
      root,
    ]);
    const r = await t.request("DELETE", sess("/d"));
    expect(r.status).toBe(202);
    expect(existsSync(join(root, "d"))).toBe(false);
    expect((await t.request("GET", sess("/ok/f000"))).status).toBe(200);
  }, 60_000);
});
