import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { bulkResultsDoc, render } from "@ce/glue2";
import { JobStore, Keys, runScript } from "@ce/store";
import type { Identity, Services } from "../context.js";
import { ActivityCache, renderActivityText } from "./activity-cache.js";
import { bulkInfo, bulkInfoText, infoBulkItems } from "./bulkinfo.js";

// bulkInfoText against the real Redis: what it answers from its kept texts must always be what
// rendering the records afresh (the element tree) gives.
let redis: Redis;
let s: Services;
const prefix = `{bulkinfo-test-${process.pid}}`;
const jane: Identity = { subject: "/DC=org/CN=Jane", kind: "x509" } as Identity;
const bob: Identity = { subject: "/DC=org/CN=Bob", kind: "x509" } as Identity;

const t0 = Date.UTC(2026, 4, 1, 9);
const fresh = JobStore.newRecord(
  {
    id: "0b7c1f6e-1111-4222-8333-944445555666",
    owner: jane.subject,
    queue: "main",
    backend: "fork",
    language: "nordugrid:xrsl",
    jobName: "j <&>",
    delegations: ["d1"],
    mainDelegation: "d1",
    rerun: 1,
    lifetime: 60,
    summary: { stdout: "out.txt", wallTime: 600, slots: 2, rtes: ["ENV/PROXY", "APPS/X-1.2"] },
    localUser: { account: "grid001", uid: 1001, gid: 1001, groups: [1001], rule: "test" },
    fqans: ["/atlas", "/atlas/Role=pilot"],
  },
  t0,
);
const odd = {
  ...fresh,
  id: 'f"é\\<x>',
  jobName: '"CreationTime":"x" CreationTime="y"',
  summary: undefined,
  localUser: undefined,
  fqans: undefined,
};
const bobs = { ...fresh, id: "b0b", owner: bob.subject, ownerKey: JobStore.newRecord({ ...fresh, owner: bob.subject }).ownerKey };

beforeAll(async () => {
  redis = new Redis(inject("redisUrl"));
  const jobs = new JobStore(redis, prefix);
  s = { jobs, config: { endpoint: { url: "https://ce.example.org:443/arex" } } } as unknown as Services;
  expect(await jobs.create([fresh, odd, bobs], 100)).toBe(3);
});
afterAll(async () => {
  const found = await redis.keys(`${prefix}*`);
  if (found.length) await redis.del(...found);
  redis.disconnect();
});

/** The answer rendered afresh from the records, through the element tree. */
const afresh = async (ids: string[], who: Identity, fmt: "json" | "xml", now: Date) =>
  render(bulkResultsDoc(infoBulkItems(await bulkInfo(s, ids, who, now))), fmt);

describe("bulkInfoText", () => {
  const ids = [fresh.id, "missing", odd.id, bobs.id, fresh.id];

  it.each(["json", "xml"] as const)(
    "%s: byte-identical to the element-tree rendering, first read and from its kept texts, at each request's time",
    async (fmt) => {
      for (const now of [new Date(t0 + 1500), new Date(t0 + 86_400_000)]) {
        expect(await bulkInfoText(s, ids, jane, fmt, now)).toBe(await afresh(ids, jane, fmt, now));
      }
      expect(await bulkInfoText(s, [], jane, fmt)).toBe(await afresh([], jane, fmt, new Date()));
    },
  );

  it.each(["json", "xml"] as const)(
    "%s: shows every change to a record (update, request, delegation expiry) and its removal",
    async (fmt) => {
      const now = new Date(t0 + 5000);
      const one = [fresh.id];
      await bulkInfoText(s, one, jane, fmt, now);
      const rec = (await s.jobs.get(fresh.id))!;
      const moved = await s.jobs.update(rec, {
        state: "FINISHING",
        failure: `exit 3 in ${fmt}`,
        failedState: "INLRMS",
        exitCode: 3,
        endedAt: t0 + 9000,
        usedWallSeconds: 12,
      });
      expect(moved).toBeDefined();
      const after = await bulkInfoText(s, one, jane, fmt, now);
      expect(after).toContain(`exit 3 in ${fmt}`);
      expect(after).toBe(await afresh(one, jane, fmt, now));
      // A kill request is not shown in the activity, but changes the record: read afresh, same text.
      await s.jobs.request([{ action: "kill", jobId: fresh.id }]);
      expect(await bulkInfoText(s, one, jane, fmt, now)).toBe(after);
      await runScript(redis, "ceDelegExpiry", [new Keys(prefix).job(fresh.id)], ["d1", String(t0 + 7_200_000)]);
      expect(await bulkInfoText(s, one, jane, fmt, now)).toBe(await afresh(one, jane, fmt, now));
      expect(await bulkInfoText(s, one, jane, fmt, now)).toContain("2026-05-01T11:00:00Z");
      await s.jobs.remove(odd.id);
      expect(await bulkInfoText(s, [odd.id], jane, fmt, now)).toBe(await afresh([odd.id], jane, fmt, now));
      expect(await bulkInfoText(s, [odd.id], jane, fmt, now)).toContain("404");
    },
  );

  it("answers another owner's job as missing, even when its text is kept", async () => {
    const now = new Date(t0);
    await bulkInfoText(s, [bobs.id], bob, "json", now); // now kept, for Bob
    const asJane = await bulkInfoText(s, [bobs.id], jane, "json", now);
    expect(JSON.parse(asJane)).toEqual({ job: [{ "status-code": "404", reason: "Job not found", id: bobs.id, info_document: "" }] });
    expect(await bulkInfoText(s, [bobs.id], bob, "json", now)).toBe(await afresh([bobs.id], bob, "json", now));
  });
});

describe("ActivityCache", () => {
  it("keeps at most its budget, least recently used out first", async () => {
    const [r] = await s.jobs.getManyFields([bobs.id], ["jobName"]);
    const input = { id: "x", hostname: "h", now: new Date(), states: ["arcrest:ACCEPTING"], owner: r!.owner };
    const text = renderActivityText(input, "json", 1, r!.owner);
    const one = text.pre.length + text.post.length + 2 + r!.owner.length + 64;
    const c = new ActivityCache(one * 2 + 10);
    c.put("json", "a", text);
    c.put("json", "b", text);
    c.touch("json", "a", c.peek("json", "a")!);
    c.put("json", "c", text);
    expect([c.peek("json", "a"), c.peek("json", "b"), c.peek("json", "c")].map(Boolean)).toEqual([true, false, true]);
    expect(c.peek("xml", "a")).toBeUndefined();
    expect(c.size).toBeLessThanOrEqual(one * 2 + 10);
  });
});
