import { stat } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { XMLParser } from "fast-xml-parser";
import { type Harness, OTHER, startHarness } from "./session-harness.js";

let h: Harness;
beforeAll(async () => {
  h = await startHarness(inject("redisUrl"), { gateway: { limits: { uploadBytes: 1024 * 1024 } } });
});
afterAll(async () => {
  await h?.close();
});

const sess = (id: string, rel = "") => `${h.base}/${id}/session${rel}`;
const put = (id: string, rel: string, body: string | Buffer, headers: Record<string, string> = {}) =>
  h.raw("PUT", sess(id, rel), { body, headers: { "content-length": String(Buffer.byteLength(body)), ...headers } });

describe("E6 files: PUT then GET/HEAD", () => {
  it("stores a file (If-None-Match ignored, exactly 200) and serves it back streamed", async () => {
    const id = await h.newJob();
    const res = await put(id, "/input.txt", "hello world\n", { "if-none-match": "*", expect: "100-continue" });
    expect(res.status).toBe(200);
    expect(res.body.length).toBe(0);
    const get = await h.raw("GET", sess(id, "/input.txt"));
    expect(get.status).toBe(200);
    expect(get.headers["content-type"]).toBe("application/octet-stream");
    expect(get.headers["content-length"]).toBe("12");
    expect(new Date(get.headers["last-modified"]!).getTime()).toBeGreaterThan(0);
    expect(get.text).toBe("hello world\n");
    const head = await h.raw("HEAD", sess(id, "/input.txt"));
    expect(head.status).toBe(200);
    expect(head.headers["content-length"]).toBe("12");
    expect(head.body.length).toBe(0);
  });

  it("creates missing parent directories and truncates on re-upload", async () => {
    const id = await h.newJob();
    expect((await put(id, "/a/b/c.txt", "long content here")).status).toBe(200);
    expect((await put(id, "/a/b/c.txt", "short")).status).toBe(200);
    expect((await h.raw("GET", sess(id, "/a/b/c.txt"))).text).toBe("short");
  });

  it("writes at the Content-Range offset without truncating", async () => {
    const id = await h.newJob();
    await put(id, "/f", "0123456789");
    expect((await put(id, "/f", "AB", { "content-range": "bytes 3-4/10" })).status).toBe(200);
    expect((await h.raw("GET", sess(id, "/f"))).text).toBe("012AB56789");
    expect((await put(id, "/f", "AB", { "content-range": "bytes 5-3/10" })).status).toBe(400);
  });

  it("accepts a zero-length chunked PUT (what arcsub sends for an empty file) and creates an empty file", async () => {
    const id = await h.newJob();
    const res = await h.raw("PUT", sess(id, "/empty.dat"), { headers: { "transfer-encoding": "chunked", "if-none-match": "*" } });
    expect(res.status).toBe(200);
    const st = await stat(join(h.services.control.sessionDir(id), "empty.dat"));
    expect(st.isFile() && st.size === 0).toBe(true);
    const get = await h.raw("GET", sess(id, "/empty.dat"));
    expect(get.status).toBe(200);
    expect(get.headers["content-length"]).toBe("0");
  });

  it("streams a chunked body of several pieces", async () => {
    const id = await h.newJob();
    const parts = [Buffer.alloc(70_000, "a"), Buffer.alloc(70_000, "b"), Buffer.from("end")];
    const res = await h.raw("PUT", sess(id, "/big"), { body: parts, headers: { "transfer-encoding": "chunked" } });
    expect(res.status).toBe(200);
    const get = await h.raw("GET", sess(id, "/big"));
    expect(get.body.equals(Buffer.concat(parts))).toBe(true);
  });

  it("accepts an absolute-form request target (ARC client)", async () => {
    const id = await h.newJob();
    await put(id, "/x", "abs");
    const res = await h.raw("GET", `http://127.0.0.1:${h.port}${sess(id, "/x")}`);
    expect(res.status).toBe(200);
    expect(res.text).toBe("abs");
  });

  it("enforces gateway.limits.uploadBytes (declared length and streamed chunks)", async () => {
    const id = await h.newJob();
    const big = Buffer.alloc(1024 * 1024 + 1, 1);
    expect((await put(id, "/too-big", big)).status).toBe(413);
    const chunked = await h
      .raw("PUT", sess(id, "/too-big-2"), {
        body: [big.subarray(0, 600_000), big.subarray(600_000)],
        headers: { "transfer-encoding": "chunked" },
      })
      .catch(() => ({ status: 413 }));
    expect(chunked.status).toBe(413);
    expect((await put(id, "/off", "x", { "content-range": `bytes ${1024 * 1024}-${1024 * 1024}/${1024 * 1024 + 1}` })).status).toBe(413);
  });

  it("PUT onto a directory or the session root is 409 with a reason", async () => {
    const id = await h.newJob();
    await put(id, "/d/f", "x");
    const res = await put(id, "/d", "x", { accept: "application/json" });
    expect(res.status).toBe(409);
    expect(JSON.parse(res.text).reason).toMatch(/directory/);
    expect((await put(id, "/", "x")).status).toBe(409);
    expect((await put(id, "/d/f/g", "x")).status).toBe(409); // f is a file, not a directory
  });
});

describe("E6 ranges", () => {
  let id: string;
  beforeAll(async () => {
    id = await h.newJob();
    await put(id, "/r", "0123456789");
  });
  const get = (range: string) => h.raw("GET", sess(id, "/r"), { headers: { range } });

  it("bytes=a-b and bytes=a- give 206 with Content-Range", async () => {
    const a = await get("bytes=2-4");
    expect(a.status).toBe(206);
    expect(a.headers["content-range"]).toBe("bytes 2-4/10");
    expect(a.text).toBe("234");
    const b = await get("bytes=7-");
    expect(b.status).toBe(206);
    expect(b.headers["content-range"]).toBe("bytes 7-9/10");
    expect(b.text).toBe("789");
    expect((await get("bytes=8-100")).text).toBe("89");
  });

  it("suffix ranges serve the last N bytes", async () => {
    const s = await get("bytes=-3");
    expect(s.status).toBe(206);
    expect(s.headers["content-range"]).toBe("bytes 7-9/10");
    expect(s.text).toBe("789");
    expect((await get("bytes=-50")).text).toBe("0123456789");
  });

  it("a start beyond the end is 416 with bytes */size; several ranges give the whole file", async () => {
    const r = await get("bytes=10-");
    expect(r.status).toBe(416);
    expect(r.headers["content-range"]).toBe("bytes */10");
    const m = await get("bytes=0-1,4-5");
    expect(m.status).toBe(200);
    expect(m.text).toBe("0123456789");
    expect((await get("items=0-1")).status).toBe(200);
  });

  it("HEAD with a range reports the partial length", async () => {
    const r = await h.raw("HEAD", sess(id, "/r"), { headers: { range: "bytes=1-2" } });
    expect(r.status).toBe(206);
    expect(r.headers["content-length"]).toBe("2");
  });
});

describe("E6 directory listing (decisions #13)", () => {
  let id: string;
  beforeAll(async () => {
    id = await h.newJob();
    await put(id, "/stdout.txt", "out");
    await put(id, "/a%20b.txt", "spaced");
    await put(id, "/sub/inner.txt", "12345");
  });

  it("XML <list> with file sizes and dirs, for the root with and without slash", async () => {
    for (const p of ["", "/"]) {
      const res = await h.raw("GET", sess(id, p), { headers: { accept: "application/xml" } });
      expect(res.status).toBe(200);
      expect(res.headers["content-type"]).toBe("application/xml");
      expect(res.text).toContain('<file size="3">stdout.txt</file>');
      expect(res.text).toContain('<file size="6">a b.txt</file>');
      expect(res.text).toContain("<dir>sub</dir>");
    }
  });

  it("JSON forced arrays, also for a single entry and an empty directory", async () => {
    const sub = await h.raw("GET", sess(id, "/sub"), { headers: { accept: "application/json" } });
    expect(JSON.parse(sub.text)).toEqual({ file: ["inner.txt"], dir: [] });
    const root = JSON.parse((await h.raw("GET", sess(id), { headers: { accept: "application/json" } })).text);
    expect(root.file.sort()).toEqual(["a b.txt", "stdout.txt"]);
    expect(root.dir).toEqual(["sub"]);
  });

  it("HTML page links every entry to its URL so a browser can navigate", async () => {
    const res = await h.raw("GET", sess(id, "/"), { headers: { accept: "text/html" } });
    expect(res.headers["content-type"]).toMatch(/^text\/html/);
    // Files open as text in the browser (pages/fileview.ts); the plain URL is the download.
    expect(res.text).toContain(`<a href="${sess(id, "/stdout.txt")}?view=text">stdout.txt</a>`);
    expect(res.text).toContain(`<a href="${sess(id, "/a%20b.txt")}?view=text">a b.txt</a>`);
    expect(res.text).toContain(`<a href="${sess(id, "/sub/")}">sub</a>`);
    const sub = await h.raw("GET", sess(id, "/sub/"), { headers: { accept: "text/html" } });
    expect(sub.text).toContain(`<a href="${sess(id, "/sub/inner.txt")}?view=text">inner.txt</a>`);
    const file = await h.raw("GET", sess(id, "/a%20b.txt"));
    expect(file.text).toBe("spaced");
  });

  it("HEAD on a directory has the listing's length and no body", async () => {
    const get = await h.raw("GET", sess(id), { headers: { accept: "application/json" } });
    const head = await h.raw("HEAD", sess(id), { headers: { accept: "application/json" } });
    expect(head.status).toBe(200);
    expect(head.headers["content-length"]).toBe(String(get.body.length));
    expect(head.body.length).toBe(0);
  });

  it("missing path is 404", async () => {
    expect((await h.raw("GET", sess(id, "/nope"))).status).toBe(404);
    expect((await h.raw("GET", sess(id, "/stdout.txt/x"))).status).toBe(404);
  });
});

describe("E6 DELETE (decisions #15)", () => {
  it("removes a file, a directory recursively and the session root; 202; missing 404", async () => {
    const id = await h.newJob();
    await put(id, "/f", "x");
    await put(id, "/d/e/g", "y");
    expect((await h.raw("DELETE", sess(id, "/f"))).status).toBe(202);
    expect((await h.raw("GET", sess(id, "/f"))).status).toBe(404);
    expect((await h.raw("DELETE", sess(id, "/f"))).status).toBe(404);
    expect((await h.raw("DELETE", sess(id, "/d"))).status).toBe(202);
    expect((await h.raw("GET", sess(id, "/d"))).status).toBe(404);
    await put(id, "/again", "z");
    expect((await h.raw("DELETE", sess(id, "/"))).status).toBe(202);
    await expect(stat(h.services.control.sessionDir(id))).rejects.toThrow();
    expect((await h.raw("GET", sess(id))).status).toBe(404);
  });
});

describe("E6 job lookup, methods, scopes", () => {
  it("another owner's job is exactly like a missing one", async () => {
    const id = await h.newJob({}, OTHER);
    const mine = await h.raw("GET", sess(id), { headers: { accept: "application/json" } });
    const missing = await h.raw("GET", sess("00000000-0000-4000-8000-000000000000"), { headers: { accept: "application/json" } });
    expect(mine.status).toBe(404);
    expect(mine.text).toBe(missing.text);
    expect((await h.raw("PUT", sess(id, "/x"), { body: "x" })).status).toBe(404);
    expect((await h.raw("GET", sess("not-a-uuid"))).status).toBe(404);
  });

  it("a WIPED job has no session directory: 404 saying why", async () => {
    const id = await h.newJob({ state: "DELETED", rest: "WIPED" });
    const res = await h.raw("GET", sess(id), { headers: { accept: "application/json" } });
    expect(res.status).toBe(404);
    expect(JSON.parse(res.text).reason).toMatch(/removed after its lifetime expired/);
  });

  it("unsupported methods are 405 with Allow", async () => {
    const id = await h.newJob();
    for (const m of ["POST", "MKCOL", "PATCH", "OPTIONS"]) {
      const res = await h.raw(m, sess(id, "/x"));
      expect(res.status, m).toBe(405);
      expect(res.headers.allow).toBe("GET, HEAD, PUT, DELETE, PROPFIND");
    }
  });

  it("token scopes: compute.read reads and lists, compute.modify is needed to write and delete", async () => {
    const id = await h.newJob();
    await put(id, "/f", "x");
    const read = { "x-test-scopes": "compute.read" };
    expect((await h.raw("GET", sess(id, "/f"), { headers: read })).status).toBe(200);
    expect((await h.raw("GET", sess(id), { headers: read })).status).toBe(200);
    expect((await h.raw("PROPFIND", sess(id), { headers: read })).status).toBe(207);
    expect((await h.raw("PUT", sess(id, "/g"), { headers: read, body: "y" })).status).toBe(403);
    expect((await h.raw("DELETE", sess(id, "/f"), { headers: read })).status).toBe(403);
    const write = { "x-test-scopes": "compute.modify" };
    expect((await h.raw("GET", sess(id, "/f"), { headers: write })).status).toBe(403);
    expect((await h.raw("PUT", sess(id, "/g"), { headers: write, body: "y" })).status).toBe(200);
  });
});

describe("E6 upload-completion bookkeeping (docs/architecture.md, Job flow)", () => {
  const inputStatus = async (id: string) => (await h.services.control.read(id, "input_status")) ?? "";
  const isDue = async (id: string) => (await h.services.advance.scoreOf(id)).due !== undefined;
  /** As if a JEM had looked at the new job and left it waiting: off the due set. */
  const looked = async (id: string) => {
    const claimed = await h.services.advance.claim(10_000, 60_000);
    expect(claimed).toContain(id);
    await h.services.advance.release(claimed);
    expect(await isDue(id)).toBe(false);
  };

  it("a whole PUT appends /<path> to input_status and wakes the JEM", async () => {
    const id = await h.newJob();
    await looked(id);
    await put(id, "/./dir//in.txt", "data");
    expect(await inputStatus(id)).toBe("/dir/in.txt\n");
    expect(await isDue(id)).toBe(true);
  });

  it("partial PUTs count only once [0,total) is covered, across requests (ranges in Redis)", async () => {
    const id = await h.newJob();
    await put(id, "/p", "cd", { "content-range": "bytes 2-3/6" });
    await put(id, "/p", "ab", { "content-range": "bytes 0-1/6" });
    expect(await inputStatus(id)).toBe("");
    expect(await h.services.redis.hget(h.services.jobs.keys.uploads(id), "/p")).toBe("6|0,4"); // total|merged ranges
    await put(id, "/p", "ef", { "content-range": "bytes 4-5/6" });
    expect(await inputStatus(id)).toBe("/p\n");
    expect(await h.services.redis.hexists(h.services.jobs.keys.uploads(id), "/p")).toBe(0);
    expect((await h.raw("GET", sess(id, "/p"))).text).toBe("abcdef");
  });

  it("uploads after the job left PREPARING are stored but not reported", async () => {
    const id = await h.newJob({ state: "INLRMS", rest: "RUNNING" });
    await looked(id);
    expect((await put(id, "/late", "x")).status).toBe(200);
    expect(await inputStatus(id)).toBe("");
    expect(await isDue(id)).toBe(false);
  });
});

describe("E6 PROPFIND (WebDAV, what arcget/arcls use)", () => {
  let id: string;
  const parser = new XMLParser({ removeNSPrefix: true, ignoreAttributes: true, isArray: (n) => n === "response" });
  beforeAll(async () => {
    id = await h.newJob();
    await put(id, "/stdout.txt", "ARGS(2)\n");
    await put(id, "/a%20b.txt", "x");
    await put(id, "/out/res.dat", "12345");
  });

  /** What DataPointHTTP::List does with a Depth 1 answer: prefix origin, strip "<url>/", skip self. */
  function arcNames(requestUrl: string, xml: string): Array<{ name: string; dir: boolean; size?: number }> {
    const doc = parser.parse(xml);
    const out: Array<{ name: string; dir: boolean; size?: number }> = [];
    for (const r of doc.multistatus.response) {
      expect(String(r.propstat.status).split(" ")[1]).toBe("200");
      const href = String(r.href).startsWith("/") ? `https://localhost:443${r.href}` : String(r.href);
      const prefix = `${requestUrl}/`;
      const name = href.startsWith(prefix) ? href.slice(prefix.length) : href;
      if (name === "") continue;
      const dir = r.propstat.prop.resourcetype !== "" && r.propstat.prop.resourcetype?.collection !== undefined;
      out.push({ name: name.replace(/\/$/, ""), dir, ...(dir ? {} : { size: Number(r.propstat.prop.getcontentlength) }) });
    }
    return out;
  }

  it("Depth 0: the collection itself, href = request path + /", async () => {
    const res = await h.raw("PROPFIND", sess(id), {
      headers: { depth: "0", "content-type": "application/xml" },
      body: '<?xml version="1.0"?><d:propfind xmlns:d="DAV:"><d:prop><d:resourcetype/></d:prop></d:propfind>',
    });
    expect(res.status).toBe(207);
    expect(res.headers["content-type"]).toMatch(/^application\/xml/);
    expect(res.text.startsWith('<?xml version="1.0" encoding="utf-8"?>')).toBe(true);
    const doc = parser.parse(res.text);
    expect(doc.multistatus.response).toHaveLength(1);
    const self = doc.multistatus.response[0];
    expect(self.href).toBe(`${sess(id)}/`);
    expect(self.propstat.prop.displayname).toBe(id);
    expect(self.propstat.prop.resourcetype).toHaveProperty("collection");
    expect(self.propstat.status).toBe("HTTP/1.1 200 OK");
    expect(self.propstat.prop.getlastmodified).toMatch(/^\w{3}, \d{2} \w{3} \d{4} \d{2}:\d{2}:\d{2} GMT$/);
    expect(self.propstat.prop.creationdate).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/);
  });

  it("Depth 1: one response per entry, names as the ARC client derives them", async () => {
    const res = await h.raw("PROPFIND", sess(id), { headers: { depth: "1" } });
    expect(res.status).toBe(207);
    const names = arcNames(`https://localhost:443${sess(id)}`, res.text);
    expect(names).toEqual([
      { name: "out", dir: true },
      { name: "a b.txt", dir: false, size: 1 },
      { name: "stdout.txt", dir: false, size: 8 },
    ]);
    expect(res.text).toContain(`<d:href>${sess(id)}/out/</d:href>`);
    // Names are not percent-encoded (the ARC client encodes them itself when it GETs <url>/<name>).
    expect(res.text).toContain(`<d:href>${sess(id)}/a b.txt</d:href>`);
    expect((await h.raw("GET", sess(id, "/a%20b.txt"))).text).toBe("x");
    const sub = await h.raw("PROPFIND", sess(id, "/out"), { headers: { depth: "1" } });
    expect(arcNames(`https://localhost:443${sess(id, "/out")}`, sub.text)).toEqual([{ name: "res.dat", dir: false, size: 5 }]);
  });

  it("a directory whose name needs encoding: hrefs use the decoded request path", async () => {
    await put(id, "/my%20dir/f%25.txt", "pct");
    const res = await h.raw("PROPFIND", sess(id, "/my%20dir"), { headers: { depth: "1" } });
    expect(res.status).toBe(207);
    const r = parser.parse(res.text).multistatus.response;
    expect(r.map((x: { href: string }) => x.href)).toEqual([sess(id, "/my dir/"), sess(id, "/my dir/f%.txt")]);
    expect(arcNames(`https://localhost:443${sess(id, "/my dir")}`, res.text)).toEqual([{ name: "f%.txt", dir: false, size: 3 }]);
    await h.raw("DELETE", sess(id, "/my%20dir"));
  });

  it("absent Depth and infinity are answered as Depth 1; a bad Depth is 400", async () => {
    for (const depth of [undefined, "infinity"]) {
      const res = await h.raw("PROPFIND", sess(id, "/"), { headers: depth ? { depth } : {} });
      expect(parser.parse(res.text).multistatus.response).toHaveLength(4);
    }
    expect((await h.raw("PROPFIND", sess(id), { headers: { depth: "2" } })).status).toBe(400);
  });

  it("a file answers with itself (no trailing slash); a missing path is 404", async () => {
    const res = await h.raw("PROPFIND", sess(id, "/stdout.txt"), { headers: { depth: "1" } });
    expect(res.status).toBe(207);
    const r = parser.parse(res.text).multistatus.response;
    expect(r).toHaveLength(1);
    expect(r[0].href).toBe(sess(id, "/stdout.txt"));
    expect(r[0].propstat.prop.getcontentlength).toBe(8);
    expect((await h.raw("PROPFIND", sess(id, "/missing"))).status).toBe(404);
  });

  it("the request body is size-limited", async () => {
    const res = await h.raw("PROPFIND", sess(id), { body: Buffer.alloc(70 * 1024, 32), headers: { "content-length": String(70 * 1024) } });
    expect(res.status).toBe(413);
  });
});
