import { describe, expect, it } from "vitest";
import { bulkResultsDoc, render } from "@ce/glue2";
import { activityInputFor, JobStore } from "@ce/store";
import { infoBulkItems, renderBulkInfo, type InfoItem } from "./bulkinfo.js";

const now = new Date(Date.UTC(2026, 4, 1, 10, 0, 0, 500));
const fresh = JobStore.newRecord(
  { id: "0b7c1f6e-1111-4222-8333-944445555666", owner: "/DC=org/CN=Jane", queue: "main", backend: "fork", language: "nordugrid:xrsl", jobName: "j <&>", delegations: [], rerun: 1, lifetime: 60, summary: { stdout: "out.txt", wallTime: 600, slots: 2, rtes: ["ENV/PROXY", "APPS/X-1.2"] }, localUser: { account: "grid001", uid: 1001, gid: 1001, groups: [1001], rule: "test" }, fqans: ["/atlas", "/atlas/Role=pilot"] },
  Date.UTC(2026, 4, 1, 9),
);
const failed = { ...fresh, id: "f\"é\\", state: "FINISHED" as const, outcome: "failed" as const, rest: "FAILED" as const, failedState: "INLRMS" as const, failure: "exit 3\r\nsecond line <b>\n\n", exitCode: 3, localId: "123", nodes: "n1,n2", startedAt: fresh.created + 10, endedAt: fresh.created + 1000, cleanupAt: fresh.created + 9e6, usedWallSeconds: 10.6, usedCpuSeconds: 3, usedMemoryMB: 12, clientHost: "192.0.2.1", delegationExpires: fresh.created + 3.6e6 };
const item = (r: typeof fresh, hostname = "ce.example.org"): InfoItem => ({ statusCode: 200, reason: "OK", id: r.id, activity: activityInputFor(r, { hostname, now }) });
const missing = (id: string): InfoItem => ({ statusCode: 404, reason: "Job not found", id, activity: null });

describe("renderBulkInfo", () => {
  const cases: InfoItem[][] = [
    [],
    [item(fresh)],
    [missing("gone")],
    [item(fresh), missing("x\r\u0001<"), item(failed, "h&<"), item({ ...fresh, summary: undefined, localUser: undefined, fqans: undefined, jobName: undefined })],
  ];
  it.each(cases.map((c) => [c]))("matches the element-tree rendering for %#", (items) => {
    for (const fmt of ["json", "xml"] as const) expect(renderBulkInfo(items, fmt)).toBe(render(bulkResultsDoc(infoBulkItems(items)), fmt));
  });
});
