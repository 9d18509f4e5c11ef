import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startPostgres, type PostgresHandle } from "@ce/testing/postgres";
import { usageRecord } from "../record.js";
import { AccountingDb, databaseLocation } from "./index.js";

// One schema, two databases: the same behaviour on SQLite (a file) and a real PostgreSQL server.
let pg: PostgresHandle;
let dir: string;
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "acctdb-"));
  pg = await startPostgres();
}, 90_000);
afterAll(async () => {
  await pg?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const rec = (id: string, over: Record<string, string> = {}) =>
  usageRecord(
    "1-0",
    {
      id,
      recordId: `${id}/0`,
      owner: "/DC=t/CN=A",
      queue: "q",
      localId: "7",
      created: "1000",
      startedAt: String(Date.UTC(2026, 0, 31, 23)),
      endedAt: String(Date.UTC(2026, 1, 1, 1)),
      usedWallSeconds: "7200",
      usedCpuSeconds: "3600",
      fqans: JSON.stringify(["/atlas"]),
      ...over,
    },
    { vomslessVo: "vomsless" },
  );

describe("databaseLocation", () => {
  it("reads the setting: postgres URL, sqlite: prefix, bare path, default under the state dir", () => {
    expect(databaseLocation("postgresql://h/db", "/s")).toEqual({ kind: "postgres", url: "postgresql://h/db" });
    expect(databaseLocation("sqlite:/x/a.db", "/s")).toEqual({ kind: "sqlite", path: "/x/a.db" });
    expect(databaseLocation(undefined, "/s")).toEqual({ kind: "sqlite", path: "/s/accounting/accounting.db" });
  });
});

describe.each(["sqlite", "postgres"] as const)("%s", (kind) => {
  const open = () => AccountingDb.open(kind === "postgres" ? pg.url : join(dir, "a.db"), dir);

  it("migrates once (a second open finds the schema current), stores each record id once, sums by VO, user and month", async () => {
    // Two openers at once: PostgreSQL's migration lock; SQLite's transactions taken in turn in one process.
    const [a, b] = await Promise.all([open(), open()]);
    expect(await a.migrate()).toBe(1);
    expect(a.kind).toBe(kind);
    expect(
      (
        await a.insert([
          { record: rec("j1"), streamId: "1-0" },
          { record: rec("j2", { fqans: JSON.stringify(["/cms"]), owner: "/DC=t/CN=B" }), streamId: "1-1" },
        ])
      ).length,
    ).toBe(2);
    // The same record again (a redelivered entry), from another connection: no second row.
    expect((await b.insert([{ record: rec("j1"), streamId: "1-9" }])).length).toBe(0);
    expect(await b.count()).toBe(2);
    expect(await b.totals("vo")).toEqual([
      { key: "atlas", jobs: 1, wallSeconds: 7200, cpuSeconds: 3600 },
      { key: "cms", jobs: 1, wallSeconds: 7200, cpuSeconds: 3600 },
    ]);
    expect((await b.totals("month")).map((t) => [t.key, t.jobs])).toEqual([["2026-02", 2]]);
    expect((await b.totals("user")).map((t) => t.key)).toEqual(["/DC=t/CN=A", "/DC=t/CN=B"]);
    expect((await b.job("j1"))[0]).toMatchObject({ recordId: "j1/0", vo: "atlas", fqans: ["/atlas"], wallSeconds: 7200, batchId: "7" });
    expect((await b.unsent("t", 10)).length).toBe(2);
    await b.markSent("t", ["j1/0"], "m1");
    await b.markSent("t", ["j1/0"], "m2");
    expect((await b.unsent("t", 10)).map((r) => r.recordId)).toEqual(["j2/0"]);
    await Promise.all([a.close(), b.close()]);
  });
});
