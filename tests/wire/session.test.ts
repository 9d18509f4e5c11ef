/**
 * Wire contract: E6 "Session directory files". Written from the interface text; see wire.ts.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { startTestGateway, type TestGateway } from "../../apps/gateway/test/harness.js";
import { ACCEPT, VERSIONS, errorOf, expectFormat, kids, local, newJobs, parseXml } from "./wire.js";

let t: TestGateway;
beforeAll(async () => {
  t = await startTestGateway(inject("redisUrl"));
});
afterAll(async () => t?.close());

const sessionOf = (version: string, id: string, path = "") => `${t.rest}/${version}/jobs/${id}/session${path ? `/${path}` : ""}`;

describe("E6 session directory files", () => {
  for (const version of VERSIONS) {
    it(`${version}: PUT stores a file (200, Deviation #14), GET returns its content, HEAD its length without a body`, async () => {
      const [id] = await newJobs(t, 1, '&(executable="/bin/cat")(arguments="in.txt")(inputfiles=("in.txt" ""))');
      const body = "line one\nline two\n";
      const put = await t.request("PUT", sessionOf(version, id!, "in.txt"), { body });
      expect(put.status).toBe(200);
      const get = await t.request("GET", sessionOf(version, id!, "in.txt"));
      expect(get.status).toBe(200);
      expect(get.text).toBe(body);
      const head = await t.request("HEAD", sessionOf(version, id!, "in.txt"));
      expect(head.status).toBe(200);
      expect(head.text).toBe("");
      expect(Number(head.headers["content-length"])).toBe(Buffer.byteLength(body));
    });
  }
  it("GET on a directory lists what is stored: JSON file/dir arrays, XML list of file and dir (Deviation #13)", async () => {
    const [id] = await newJobs(t, 1);
    expect((await t.request("PUT", sessionOf("1.1", id!, "a.txt"), { body: "a" })).status).toBe(200);
    // Deviation #14: missing parent directories are created.
    expect((await t.request("PUT", sessionOf("1.1", id!, "sub/b.txt"), { body: "bb" })).status).toBe(200);
    const j = await t.request("GET", sessionOf("1.1", id!), { accept: ACCEPT.json });
    expect(j.status).toBe(200);
    expectFormat(j, "json");
    const doc = j.json();
    expect(doc.file).toContain("a.txt");
    expect(doc.dir).toEqual(["sub"]);
    const x = await t.request("GET", sessionOf("1.1", id!, "sub"), { accept: ACCEPT.xml });
    expect(x.status).toBe(200);
    const root = parseXml(x.text);
    expect(local(root.name)).toBe("list");
    const files = kids(root, "file");
    expect(files.map((f) => [f.text, f.attrs.size])).toEqual([["b.txt", "2"]]);
    const head = await t.request("HEAD", sessionOf("1.1", id!, "sub"), { accept: ACCEPT.json });
    expect(head.status).toBe(200); // "HEAD same path: supported for files and directories"
  });
  it("PUT is not supported for a directory → 409 naming it (Deviation #14)", async () => {
    const [id] = await newJobs(t, 1);
    await t.request("PUT", sessionOf("1.1", id!, "d/x"), { body: "x" });
    const r = await t.request("PUT", sessionOf("1.1", id!, "d"), { body: "y", accept: ACCEPT.json });
    expect(r.status).toBe(409);
    expect(errorOf(r, "json").code).toBe("409");
  });
  it("DELETE removes a file; on a directory the whole directory (202, Deviation #15)", async () => {
    const [id] = await newJobs(t, 1);
    await t.request("PUT", sessionOf("1.0", id!, "f.txt"), { body: "f" });
    await t.request("PUT", sessionOf("1.0", id!, "d/g.txt"), { body: "g" });
    expect((await t.request("DELETE", sessionOf("1.0", id!, "f.txt"))).status).toBe(202);
    expect((await t.request("GET", sessionOf("1.0", id!, "f.txt"))).status).toBe(404);
    expect((await t.request("DELETE", sessionOf("1.0", id!, "d"))).status).toBe(202);
    expect((await t.request("GET", sessionOf("1.0", id!, "d/g.txt"))).status).toBe(404);
    expect((await t.request("GET", sessionOf("1.0", id!, "d"), { accept: ACCEPT.json })).status).toBe(404);
  });
  it("POST is not supported → 405 with Allow (Deviation #8)", async () => {
    const [id] = await newJobs(t, 1);
    const r = await t.request("POST", sessionOf("1.1", id!, "x"), { body: "x", accept: ACCEPT.json });
    expect(r.status).toBe(405);
    expect(String(r.headers.allow)).toContain("PUT");
  });
  it("Authentication 1: another user's job, or an unknown job, answers 404", async () => {
    const [id] = await newJobs(t, 1);
    await t.request("PUT", sessionOf("1.1", id!, "secret.txt"), { body: "s" });
    expect((await t.request("GET", sessionOf("1.1", id!, "secret.txt"), { as: "bob" })).status).toBe(404);
    expect((await t.request("PUT", sessionOf("1.1", id!, "x.txt"), { as: "bob", body: "x" })).status).toBe(404);
    expect((await t.request("GET", sessionOf("1.1", "00000000-0000-4000-8000-000000000000", "a"))).status).toBe(404);
  });
  it("a path leaving the session directory → 400 naming the problem (Deviation #23)", async () => {
    const [id] = await newJobs(t, 1);
    const r = await t.request("GET", `${sessionOf("1.1", id!)}/..%2F..%2Fetc%2Fpasswd`, { accept: ACCEPT.json });
    expect(r.status).toBe(400);
  });
});
