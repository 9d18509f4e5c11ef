import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, inject, it, vi } from "vitest";
import { JobStore, Keys } from "@ce/store";
import { startTestGateway, XRSL, xmlAll, type J, type TestGateway } from "./harness.js";

let t: TestGateway;
let mine: string[] = [];
let bobs: string;
beforeAll(async () => {
  t = await startTestGateway(inject("redisUrl"), { gateway: { limits: { idsPerRequest: 20, idListBytes: 4096 } } });
  const r = await t.request("POST", `${t.rest}/1.1/jobs?action=new&instances=3`, {
    body: XRSL("bulk", "(rerun=2)"),
    accept: "application/json",
  });
  mine = r.json().job.map((j: J) => j.id);
  const b = await t.request("POST", `${t.rest}/1.0/jobs?action=new`, { body: XRSL("bob"), accept: "application/json", as: "bob" });
  bobs = b.json().job[0].id;
});
afterAll(async () => t?.close());

const xmlIds = (ids: string[]) => `<jobs>${ids.map((i) => `<job><id>${i}</id></job>`).join("")}</jobs>`;
const bulk = (v: string, action: string, body: string, o: { ct?: string; accept?: string } = {}) =>
  t.request("POST", `${t.rest}/${v}/jobs?action=${action}`, {
    body,
    accept: o.accept ?? "application/json",
    headers: o.ct ? { "content-type": o.ct } : {},
  });

describe.each(["1.0", "1.1"])("E5 bulk under %s", (v) => {
  it("status: XML body without Content-Type, order kept, others' and unknown ids → 404 None", async () => {
    const ghost = randomUUID();
    const r = await bulk(v, "status", xmlIds([mine[1]!, bobs, ghost, mine[0]!]), { accept: "text/xml" });
    expect(r.status).toBe(201);
    expect(xmlAll(r.text, "id")).toEqual([mine[1], bobs, ghost, mine[0]]);
    expect(xmlAll(r.text, "status-code")).toEqual(["200", "404", "404", "200"]);
    expect(xmlAll(r.text, "state")).toEqual(["ACCEPTING", "None", "None", "ACCEPTING"]);
    expect(xmlAll(r.text, "reason")[1]).toBe("Job not found");
  });
  it("info: GLUE2 ComputingActivity with arcrest state; JSON shape", async () => {
    const x = await bulk(v, "info", xmlIds([mine[0]!]), { accept: "text/xml" });
    expect(x.text).toContain("<info_document><ComputingActivity");
    expect(x.text).toContain("<State>arcrest:ACCEPTING</State>");
    expect(x.text).toContain(`<Owner>${t.pki.dn.alice}</Owner>`);
    const j = await bulk(v, "info", JSON.stringify({ job: { id: mine[0] } }), { ct: "application/json" });
    const item = j.json().job[0];
    expect(item["status-code"]).toBe("200");
    expect(item.info_document.ComputingActivity.State).toContain("arcrest:ACCEPTING");
    expect(item.info_document.ComputingActivity.SubmissionTime).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    const missing = await bulk(v, "info", JSON.stringify({ job: [{ id: bobs }] }), { ct: "application/json" });
    expect(missing.json().job[0]).toEqual({ "status-code": "404", reason: "Job not found", id: bobs, info_document: "" });
  });
  it("delegations: ids as repeated elements", async () => {
    const r = await bulk(v, "delegations", xmlIds([mine[0]!]), { accept: "text/xml" });
    expect(r.status).toBe(201);
    expect(xmlAll(r.text, "status-code")).toEqual(["200"]);
  });
});

describe("kill / clean / restart", () => {
  it("kill → 202 Queued for killing and one command each; final job → 202 without a command", async () => {
    const s = t.gw.services;
    const done = randomUUID();
    const rec = JobStore.newRecord({
      id: done,
      owner: t.pki.dn.alice,
      queue: "main",
      backend: "fork",
      language: "nordugrid:xrsl",
      delegations: [],
      rerun: 0,
      lifetime: 60,
    });
    await s.jobs.create([{ ...rec }], 1e6);
    const cur = (await s.jobs.get(done))!;
    await s.jobs.update({ ...cur, state: "FINISHING" }, { state: "FINISHED", outcome: "success" });
    const due = new Keys(s.config.redis.prefix).advanceDue();
    await s.redis.zrem(due, mine[0]!, done, bobs);
    const r = await bulk("1.0", "kill", xmlIds([mine[0]!, done, bobs]), { accept: "text/xml" });
    expect(r.status).toBe(201);
    expect(xmlAll(r.text, "status-code")).toEqual(["202", "202", "404"]);
    expect(xmlAll(r.text, "reason")[0]).toBe("Queued for killing");
    // Only the job the kill applies to is due for a look (the ended one and bob's are not).
    expect(await s.redis.zscore(due, mine[0]!)).not.toBeNull();
    expect(await s.redis.zscore(due, done)).toBeNull();
    expect(await s.redis.zscore(due, bobs)).toBeNull();
    // The 202 means the request is on the record (the JEM's truth).
    expect((await s.jobs.get(mine[0]!))?.killRequested).toBe(true);
    expect((await s.jobs.get(done))?.killRequested).toBeFalsy();
    expect(await s.jobs.openRequests()).toContain(mine[0]);
  });
  it("clean → 202 Queued for cleaning", async () => {
    const r = await bulk("1.1", "clean", JSON.stringify({ job: [{ id: mine[2] }] }), { ct: "application/json" });
    expect(r.json().job[0]).toEqual({ "status-code": "202", reason: "Queued for cleaning", id: mine[2] });
    expect((await t.gw.services.jobs.get(mine[2]!))?.cleanRequested).toBe(true);
  });
  it("restart: 409 unless failed with reruns left", async () => {
    const s = t.gw.services;
    const notFailed = await bulk("1.0", "restart", xmlIds([mine[1]!]));
    expect(notFailed.json().job[0]).toMatchObject({ "status-code": "409", reason: "Job has not failed" });
    const cur = (await s.jobs.get(mine[1]!))!;
    await s.jobs.update({ ...cur, state: "FINISHING" }, { state: "FINISHED", outcome: "failed", failedState: "INLRMS" });
    const ok = await bulk("1.0", "restart", xmlIds([mine[1]!]));
    expect(ok.json().job[0]).toMatchObject({ "status-code": "202", reason: "Queued for restarting" });
    const again = (await s.jobs.get(mine[1]!))!;
    expect(again.restartRequested).toBe(true);
    await s.jobs.update(again, { rerun: 0 });
    const none = await bulk("1.0", "restart", xmlIds([mine[1]!]));
    expect(none.json().job[0]).toMatchObject({ "status-code": "409", reason: "No more restarts allowed" });
  });
});

describe("id list parsing and limits", () => {
  it("JSON numbers are accepted as strings; empty list → 201 {job:[]}", async () => {
    const r = await bulk("1.1", "status", '{"job":[{"id":123}]}', { ct: "application/json" });
    expect(r.json().job[0]).toMatchObject({ id: "123", "status-code": "404" });
    const e = await bulk("1.1", "status", '{"job":[]}', { ct: "application/json" });
    expect(e.status).toBe(201);
    expect(e.json()).toEqual({ job: [] });
    const x = await bulk("1.0", "status", "<jobs/>", { accept: "application/json" });
    expect(x.json()).toEqual({ job: [] });
  });
  it("malformed XML / JSON → 400 naming the problem; empty body → 400", async () => {
    const a = await bulk("1.0", "status", "<jobs><job><id>x</id></jobs>");
    expect(a.status).toBe(400);
    expect(a.json().reason).toMatch(/Malformed XML/);
    const b = await bulk("1.0", "status", '{"job":[', { ct: "application/json" });
    expect(b.status).toBe(400);
    expect(b.json().reason).toMatch(/Malformed JSON/);
    expect((await bulk("1.0", "status", '{"jobs":[]}', { ct: "application/json" })).status).toBe(400);
    expect((await bulk("1.0", "status", "")).status).toBe(400);
    expect((await bulk("1.0", "status", "<!DOCTYPE x><jobs/>")).status).toBe(400);
    expect((await bulk("1.0", "status", "<jobs/>", { ct: "image/png" })).status).toBe(415);
  });
  it("too many ids → 413; too large a body → 413", async () => {
    const ids = Array.from({ length: 21 }, () => "x");
    expect((await bulk("1.0", "status", xmlIds(ids))).status).toBe(413);
    expect((await bulk("1.0", "status", xmlIds(["y".repeat(5000)]))).status).toBe(413);
  });
});

describe("E3 list", () => {
  it.each(["1.0", "1.1"])("lists only the caller's jobs (%s), XML and JSON, HEAD", async (v) => {
    const x = await t.request("GET", `${t.rest}/${v}/jobs`, { accept: "text/xml" });
    expect(x.status).toBe(200);
    const ids = xmlAll(x.text, "id");
    expect(ids).toEqual(expect.arrayContaining(mine));
    expect(ids).not.toContain(bobs);
    const j = await t.request("GET", `${t.rest}/${v}/jobs`, { accept: "application/json" });
    expect(j.json().job.map((i: J) => i.id)).toEqual(ids);
    const h = await t.request("HEAD", `${t.rest}/${v}/jobs`, { accept: "application/json" });
    expect(h.text).toBe("");
    expect(h.headers["content-length"]).toBe(String(Buffer.byteLength(j.text)));
  });
  it("state filter adds state; unknown state → 400 naming it", async () => {
    const r = await t.request("GET", `${t.rest}/1.1/jobs?state=ACCEPTING,RUNNING`, { accept: "application/json" });
    expect(r.json().job.every((i: J) => i.state === "ACCEPTING")).toBe(true);
    const none = await t.request("GET", `${t.rest}/1.1/jobs?state=RUNNING`, { accept: "application/json" });
    expect(none.json()).toEqual({ job: [] });
    const bad = await t.request("GET", `${t.rest}/1.1/jobs?state=RUNNING,Bogus`, { accept: "application/json" });
    expect(bad.status).toBe(400);
    expect(bad.json().reason).toContain("Bogus");
  });
  it('an empty list is {"job":[]} for a user with no jobs', async () => {
    const r = await t.request("GET", `${t.rest}/1.0/jobs`, { accept: "application/json", as: "aliceCert" });
    expect(r.json().job.length).toBeGreaterThan(0);
  });
  it("GET /jobs/<id> is not a resource → 404 (a browser gets the job page: docs/pages.md)", async () => {
    for (const accept of ["application/json", "application/xml"])
      expect((await t.request("GET", `${t.rest}/1.0/jobs/${mine[0]}`, { accept })).status).toBe(404);
    expect((await t.request("GET", `${t.rest}/1.0/jobs/${mine[0]}`)).status).toBe(200);
  });
});

describe("strictSpecCodes", () => {
  it("bulk non-info actions answer 200, info 201", async () => {
    const strict = await startTestGateway(inject("redisUrl"), { compat: { strictSpecCodes: true } });
    try {
      const body = xmlIds([randomUUID()]);
      for (const [a, code] of [
        ["status", 200],
        ["kill", 200],
        ["clean", 200],
        ["restart", 200],
        ["delegations", 200],
        ["info", 201],
      ] as const) {
        const r = await strict.request("POST", `${strict.rest}/1.0/jobs?action=${a}`, { body });
        expect(r.status, a).toBe(code);
      }
    } finally {
      await strict.close();
    }
  });
});

describe("repeated ids", () => {
  it("one request per job however often a list repeats its id; every item still answered", async () => {
    const s = t.gw.services;
    const request = vi.spyOn(s.jobs, "request");
    const r = await bulk("1.1", "clean", JSON.stringify({ job: Array(15).fill({ id: mine[1] }) }), { ct: "application/json" });
    expect(r.json().job).toHaveLength(15);
    expect(new Set(r.json().job.map((j: { "status-code": unknown }) => String(j["status-code"])))).toEqual(new Set(["202"]));
    expect((await s.jobs.get(mine[1]!))?.cleanRequested).toBe(true);
    // One request recorded (one script), not fifteen.
    expect(request.mock.calls.map(([reqs]) => reqs.length)).toEqual([1]);
    request.mockRestore();
  });
});
