import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createBackend, type Backend } from "./index.js";
import { makeConfig, silentLog, tempRoot } from "./testdata/harness.js";

// The shipped sge/usage script against accounting(5) files: a record as Debian's Grid Engine 8.1.9
// writes it, a rescheduled job's last run, a parallel job's slave-host tasks, hostile fields.

let acctFile: string;
let backend: Backend;

/** One accounting(5) line (45 ':'-separated fields) with the fields given (0-based index → value). */
function acct(set: Record<number, string | number>): string {
  const f: string[] = Array.from({ length: 45 }, () => "0");
  Object.assign(f, {
    0: "main",
    1: "n1",
    2: "g",
    3: "u",
    4: "name",
    6: "sge",
    31: "NONE",
    32: "defaultdepartment",
    33: "NONE",
    34: "1",
    35: "0",
    39: "NONE",
    41: "NONE",
  });
  for (const [i, v] of Object.entries(set)) f[Number(i)] = String(v);
  return f.join(":");
}
const run = (id: number, start: number, end: number, more: Record<number, string | number> = {}) =>
  acct({ 5: id, 9: start, 10: end, 13: end - start, ...more });
const usage = async (lines: string[], ids: number[]) => {
  writeFileSync(acctFile, ["# Version: 8.1.9", ...lines, ""].join("\n"));
  return backend.usage!(ids.map((id) => ({ jobId: `j${id}`, localId: String(id) })));
};

beforeAll(() => {
  const root = tempRoot("ce-sgeusage-");
  mkdirSync(join(root, "bin"));
  acctFile = join(root, "accounting");
  process.env.JEM_SGE_ACCOUNTING = acctFile;
  backend = createBackend(makeConfig(root, { backend: "sge", callsPerSecond: 1000, sge: { binPath: join(root, "bin") } }), silentLog);
});
afterAll(() => {
  delete process.env.JEM_SGE_ACCOUNTING;
});

describe("sge usage", () => {
  it("reads a record as Grid Engine 8.1.9 writes it (a category with ':' in it), rounding CPU times; a job without a record has none", async () => {
    const real =
      "main:localhost:root:root:sh:3:proj:0:1795827099:1795827099:1795827160:0:0:61:40.579378:10.494585:4636.000000:0:0:0:0:15608:0:0:0.000000:24:0:0:0:4230:2921:NONE:defaultdepartment:NONE:2:0:51.073963:0.000000:0.000000:-l h_rt=0:1:0,h_vmem=500M:0.000000:NONE:0.000000:0:0";
    const u = await usage([real], [3, 4]);
    expect(u.get("j3")).toEqual({
      source: "accounting",
      start: 1795827099,
      end: 1795827160,
      wall: 61,
      cpu: 51,
      cpuUser: 41,
      cpuSystem: 10,
      maxRssKb: 4636,
      processors: 2,
      nodeCount: 1,
      nodes: "localhost",
    });
    expect(u.has("j4")).toBe(false);
  });

  it("a rescheduled job gives its last run; a parallel job adds the CPU, memory and hosts of that run's slave-host tasks", async () => {
    const u = await usage(
      [
        run(10, 1000, 1100, { 36: 90 }),
        run(11, 1000, 1050, { 1: "n9", 36: 7, 41: "1.n9" }), // a task of an earlier run: not counted
        run(10, 2000, 2100, { 36: 99, 14: 80, 15: 19, 16: 1000 }),
        run(11, 2000, 2010, { 1: "n2", 36: 5, 14: 4, 15: 1, 16: 9000, 41: "1.n2" }),
        run(11, 2001, 2009, { 1: "n3", 36: 6, 14: 5, 15: 1, 16: 500, 41: "1.n3" }),
        run(11, 2002, 2008, { 1: "n2", 36: 1, 14: 1, 15: 0, 16: 100, 41: "2.n2" }),
        run(11, 2000, 2020, { 1: "n1", 34: 12, 36: 10, 14: 8, 15: 2, 16: 2000 }),
      ],
      [10, 11],
    );
    expect(u.get("j10")).toEqual({
      source: "accounting",
      start: 2000,
      end: 2100,
      wall: 100,
      cpu: 99,
      cpuUser: 80,
      cpuSystem: 19,
      maxRssKb: 1000,
      processors: 1,
      nodeCount: 1,
      nodes: "n1",
    });
    expect(u.get("j11")).toEqual({
      source: "accounting",
      start: 2000,
      end: 2020,
      wall: 20,
      cpu: 22,
      cpuUser: 18,
      cpuSystem: 4,
      maxRssKb: 9000,
      processors: 12,
      nodeCount: 3,
      nodes: "n1,n2,n3",
    });
  });

  it("hostile fields are dropped one by one; a job that never started has no start; no accounting file gives no figures", async () => {
    const u = await usage([run(20, 1000, 1010, { 1: "a b;rm -rf", 14: "1e9", 34: "x", 36: "-5" }), run(21, 0, 1500, { 13: 0 })], [20, 21]);
    expect(u.get("j20")).toStrictEqual({ source: "accounting", start: 1000, end: 1010, wall: 10, cpuSystem: 0 });
    expect(u.get("j21")).toMatchObject({ source: "accounting", end: 1500, wall: 0 });
    expect(u.get("j21")?.start).toBeUndefined();
    rmSync(acctFile);
    expect((await backend.usage!([{ jobId: "j20", localId: "20" }])).size).toBe(0);
  });
});
