import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { Keys } from "@ce/store";
import { startTestGateway, XRSL, type TestGateway } from "./harness.js";

// Issue 36: the batch system's reason a job waits, as the JEM's poll leaves it on the record, on
// the job's page, in the landing page's per-share summary and in the job's info (OtherInfo
// `LRMSReason=`, OtherMessages `LRMS: …`, which `arcstat -l` prints). The reason is text from
// outside the CE: never markup. The poll itself is pinned on real Slurm (apps/jem/test/lrms-reason.test.ts).

let t: TestGateway;
let redis: Redis;
let id: string;
const REASON = "JobHeldAdmin <b>x</b>";

beforeAll(async () => {
  t = await startTestGateway(inject("redisUrl"));
  redis = new Redis(inject("redisUrl"));
  const r = await t.request("POST", `${t.rest}/1.1/jobs?action=new`, { body: XRSL("held"), accept: "application/json" });
  id = r.json().job[0].id as string;
  // What the JEM's poll leaves (states/transition.ts setLrmsSubstate): INLRMS, HELD, the reason; the
  // record's indexes moved as the JEM's scripts move them.
  const k = new Keys(t.prefix);
  const rec = await redis.hgetall(k.job(id));
  await redis
    .multi()
    .hset(k.job(id), { state: "INLRMS", pending: "0", lrms: "HELD", lrmsReason: REASON, rest: "HELD", localId: "42", hold: "" })
    .smove(k.internal(rec.state as never), k.internal("INLRMS"), id)
    .exec();
});
afterAll(async () => {
  await redis?.quit();
  await t?.close();
});

describe("the batch system's reason for a waiting job", () => {
  it("is a line of the job's page, escaped", async () => {
    const page = await t.request("GET", `${t.rest}/1.1/jobs/${id}`, { accept: "text/html" });
    expect(page.status).toBe(200);
    expect(page.text).toContain("Waiting in the batch system because");
    expect(page.text).toContain("JobHeldAdmin &lt;b&gt;x&lt;/b&gt;");
    expect(page.text).not.toContain("<b>x</b>");
  });

  it("is summed per queue, VO and reason on the landing page", async () => {
    const landing = await t.request("GET", `${t.rest}/1.1`);
    expect(landing.status).toBe(200);
    expect(landing.text).toContain("Why jobs wait in the batch system");
    expect(landing.text).toMatch(/<td class="mono">JobHeldAdmin &lt;b&gt;x&lt;\/b&gt;<\/td>\s*<td class="num">1<\/td>/);
  });

  it("is in the job's info document: OtherInfo LRMSReason= and OtherMessages LRMS:", async () => {
    const r = await t.request("POST", `${t.rest}/1.1/jobs?action=info`, {
      body: `<jobs><job><id>${id}</id></job></jobs>`,
      accept: "text/xml",
      headers: { "content-type": "application/xml" },
    });
    expect(r.status).toBe(201);
    expect(r.text).toContain("<OtherInfo>LRMSReason=JobHeldAdmin &lt;b&gt;x&lt;/b&gt;</OtherInfo>");
    expect(r.text).toContain("<OtherMessages>LRMS: JobHeldAdmin &lt;b&gt;x&lt;/b&gt;</OtherMessages>");
  });
});
