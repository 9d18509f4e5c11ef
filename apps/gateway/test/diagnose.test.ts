import { symlink, writeFile } from "node:fs/promises";
import { DIAGNOSE_FILES } from "@ce/controldir";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { type Harness, OTHER, startHarness } from "./session-harness.js";

let h: Harness;
let id: string;
beforeAll(async () => {
  h = await startHarness(inject("redisUrl"));
  id = await h.newJob();
  await h.services.control.write(id, "errors", "2026-01-01T00:00:00Z Job state change UNDEFINED -> ACCEPTED   Reason: new\n");
  // A stale file must not be what is served: xml comes from the record.
  await h.services.control.write(id, "xml", "<ComputingActivity/>");
  await h.services.control.write(id, "description", "&(executable=/bin/true)");
  await h.services.control.write(id, "proxy", "-----BEGIN PRIVATE KEY-----\nsecret\n");
  await h.services.control.write(id, "spec", '{"secret":true}');
});
afterAll(async () => {
  await h?.close();
});

const diag = (type: string, job = id) => `${h.base}/${job}/diagnose/${type}`;

describe("E7 diagnose files", () => {
  it("serves an allowed file as text/plain with its length", async () => {
    const res = await h.raw("GET", diag("errors"));
    expect(res.status).toBe(200);
    expect(res.headers["content-type"]).toBe("text/plain; charset=utf-8");
    expect(res.text).toMatch(/Job state change UNDEFINED -> ACCEPTED/);
    expect(res.headers["content-length"]).toBe(String(res.body.length));
    expect(res.headers["last-modified"]).toBeDefined();
  });

  it("xml is the job's GLUE2 ComputingActivity rendered from its record, as application/xml", async () => {
    const res = await h.raw("GET", diag("xml"));
    expect(res.status).toBe(200);
    expect(res.headers["content-type"]).toBe("application/xml");
    expect(res.text).toMatch(/^<\?xml/);
    expect(res.text).toContain(`<ID>urn:caid:localhost:org.nordugrid.arcrest:${id}</ID>`);
    expect(res.text).toContain("arcrest:ACCEPTING");
    expect(res.headers["content-length"]).toBe(String(res.body.length));
    const head = await h.raw("HEAD", diag("xml"));
    expect(head.headers["content-length"]).toBe(String(res.body.length));
  });

  it("status is the record's state in the status file's words, whatever file is on disk", async () => {
    await h.services.control.write(id, "status", "FINISHED"); // stale: the record is the truth
    const res = await h.raw("GET", diag("status"));
    expect([res.status, res.headers["content-type"], res.text]).toEqual([200, "text/plain; charset=utf-8", "ACCEPTED"]);
    const pending = await h.newJob({ state: "INLRMS", pending: true, rest: "RUNNING" });
    expect((await h.raw("GET", diag("status", pending))).text).toBe("PENDING:INLRMS");
    const wiped = await h.newJob({ state: "DELETED", rest: "WIPED" });
    expect((await h.raw("GET", diag("status", wiped))).text).toBe("DELETED");
    expect((await h.raw("HEAD", diag("status"))).headers["content-length"]).toBe("8");
  });

  it("HEAD gives the length without a body; ranges as for session files", async () => {
    const head = await h.raw("HEAD", diag("description"));
    expect(head.status).toBe(200);
    expect(head.headers["content-length"]).toBe("23");
    expect(head.body.length).toBe(0);
    const part = await h.raw("GET", diag("description"), { headers: { range: "bytes=2-11" } });
    expect(part.status).toBe(206);
    expect(part.headers["content-range"]).toBe("bytes 2-11/23");
    expect(part.text).toBe("executable");
    expect((await h.raw("GET", diag("description"), { headers: { range: "bytes=-4" } })).text).toBe("rue)");
    const bad = await h.raw("GET", diag("description"), { headers: { range: "bytes=23-" } });
    expect(bad.status).toBe(416);
    expect(bad.headers["content-range"]).toBe("bytes */23");
  });

  it("every allowed type that is absent is 404 Not found", async () => {
    // input/output are rendered from spec (present here), status from the record: not read from files.
    const present = new Set(["errors", "xml", "description", "input", "output", "status"]);
    for (const t of DIAGNOSE_FILES) {
      const res = await h.raw("GET", diag(t), { headers: { accept: "application/json" } });
      if (present.has(t)) expect(res.status, t).toBe(200);
      else {
        expect(res.status, t).toBe(404);
        expect(JSON.parse(res.text).reason).toBe("Not found");
      }
    }
  });

  it("input and output are A-REX's file lists rendered from the stored description; no spec → 404", async () => {
    const job = await h.newJob();
    await h.services.control.write(
      job,
      "spec",
      JSON.stringify({ inputFiles: [{ name: "in 1.txt", source: "https://x/a" }, { name: "up.dat" }], outputFiles: [{ name: "out.txt" }] }),
    );
    const input = await h.raw("GET", diag("input", job));
    expect(input.status).toBe(200);
    expect(input.headers["content-type"]).toBe("text/plain; charset=utf-8");
    expect(input.text).toBe("/in\\ 1.txt https://x/a\n/up.dat\n");
    expect(input.headers["content-length"]).toBe(String(input.body.length));
    expect((await h.raw("GET", diag("output", job))).text).toBe("/out.txt\n");
    expect((await h.raw("HEAD", diag("output", job))).headers["content-length"]).toBe("9");
    const bare = await h.newJob();
    for (const t of ["input", "output"]) expect((await h.raw("GET", diag(t, bare))).status).toBe(404);
    await h.services.control.write(bare, "spec", "null");
    expect((await h.raw("GET", diag("input", bare))).status).toBe(404);
  });

  it("private control files and unknown names are 'Diagnostic item not found'", async () => {
    for (const t of ["proxy", "spec", "grami", "status.tmp", "..", "%2e%2e", "ERRORS", "errors/x", "errors%2Fx", ""]) {
      const res = await h.raw("GET", diag(t), { headers: { accept: "application/json" } });
      expect(res.status, t).toBe(404);
      expect(res.text).not.toContain("PRIVATE KEY");
      expect(res.text).not.toContain("secret");
      if (t !== ".." && t !== "%2e%2e") expect(JSON.parse(res.text).reason, t).toBe("Diagnostic item not found");
    }
  });

  it("a symlink in the control directory is not followed", async () => {
    const j = await h.newJob();
    await symlink("/etc/passwd", h.services.control.file(j, "comment"));
    const res = await h.raw("GET", diag("comment", j));
    expect(res.status).toBe(404);
    expect(res.text).not.toContain("root:");
  });

  it("other methods are 405 with Allow (unknown types stay 404 first)", async () => {
    for (const m of ["POST", "PUT", "DELETE", "PROPFIND"]) {
      const res = await h.raw(m, diag("errors"), { body: "" });
      expect(res.status, m).toBe(405);
      expect(res.headers.allow).toBe("GET, HEAD");
    }
    expect((await h.raw("PUT", diag("proxy"), { body: "" })).status).toBe(404);
  });

  it("another owner's job and a missing job are 404 alike; scope compute.read is required", async () => {
    const other = await h.newJob({}, OTHER);
    await h.services.control.write(other, "errors", "theirs");
    const a = await h.raw("GET", diag("errors", other), { headers: { accept: "application/json" } });
    const b = await h.raw("GET", diag("errors", "00000000-0000-4000-8000-000000000000"), { headers: { accept: "application/json" } });
    expect(a.status).toBe(404);
    expect(a.text).toBe(b.text);
    // xml, input and output are rendered (from the record, from spec): the same ownership check,
    // nothing of theirs leaks.
    await h.services.control.write(
      other,
      "spec",
      JSON.stringify({ inputFiles: [{ name: "in", source: "https://secret.example/theirs" }] }),
    );
    for (const type of ["xml", "input", "output"]) {
      for (const id of [other, "00000000-0000-4000-8000-000000000000", "..%2F..%2Fetc", "x".repeat(5000)]) {
        const x = await h.raw("GET", diag(type, id), { headers: { accept: "application/json" } });
        expect(x.status, `${type} ${id.slice(0, 40)}`).toBe(404);
        expect(x.text).not.toContain(other);
        expect(x.text).not.toContain("secret.example");
      }
    }
    expect((await h.raw("GET", diag("input"), { headers: { "x-test-scopes": "compute.modify" } })).status).toBe(403);
    expect((await h.raw("GET", diag("xml"), { headers: { "x-test-scopes": "compute.modify" } })).status).toBe(403);
    expect((await h.raw("GET", diag("errors"), { headers: { "x-test-scopes": "compute.modify" } })).status).toBe(403);
    expect((await h.raw("GET", diag("errors"), { headers: { "x-test-scopes": "compute.read" } })).status).toBe(200);
  });

  it("a WIPED job still serves what is left of its control files", async () => {
    const j = await h.newJob({ state: "DELETED", rest: "WIPED" });
    await writeFile(h.services.control.file(j, "failed"), "expired\n");
    expect((await h.raw("GET", diag("failed", j))).text).toBe("expired\n");
  });
});
