import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

// scripts/test.sh reruns what scripts/test-report.mjs names, so it is checked against a report
// that vitest itself wrote for a small suite: a failing test, a passing file, a file that throws
// before any of its tests run, and one whose test passes while a timer it started throws (vitest
// fails the run for it but marks no file failed: only its log names the file).
const run = promisify(execFile);
const root = fileURLToPath(new URL("..", import.meta.url));
const vitest = join(root, "node_modules", ".bin", "vitest");
const reportTool = join(root, "scripts", "test-report.mjs");

describe("test-report.mjs on a real vitest report", () => {
  let dir: string;
  let report: string;
  let log: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "test-report-"));
    await writeFile(join(dir, "vitest.config.mjs"), "export default { test: { include: ['*.check.ts'] } };\n");
    await writeFile(
      join(dir, "mixed.check.ts"),
      'import { it, expect } from "vitest";\nit("adds", () => expect(1 + 1).toBe(2));\nit("breaks", () => expect("got").toBe("wanted"));\n',
    );
    await writeFile(join(dir, "fine.check.ts"), 'import { it } from "vitest";\nit("passes", () => {});\n');
    await writeFile(join(dir, "broken.check.ts"), 'throw new Error("cannot load the fixture");\n');
    await writeFile(
      join(dir, "late.check.ts"),
      'import { it } from "vitest";\nit("passes, but leaves a timer that throws", async () => {\n' +
        '  setTimeout(() => { throw new Error("thrown by a timer"); }, 10);\n  await new Promise((r) => setTimeout(r, 200));\n});\n',
    );
    report = join(dir, "report.json");
    log = join(dir, "vitest.log");
    const args = ["run", "--root", dir, "--reporter=default", "--reporter=json", `--outputFile.json=${report}`];
    const result = await run(vitest, args, { cwd: dir }).then(
      (r) => ({ status: 0, out: r.stdout + r.stderr }),
      (e: { code?: number; stdout?: string; stderr?: string }) => ({ status: e.code ?? -1, out: (e.stdout ?? "") + (e.stderr ?? "") }),
    );
    await writeFile(log, result.out);
    expect(result.status).toBe(1); // the suite has failures: otherwise this test proves nothing
  }, 60_000);

  afterAll(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  const tool = async (what: string, withLog = true) =>
    (await run("node", [reportTool, what, report, ...(withLog ? [log] : [])], { cwd: dir })).stdout.trim().split("\n");

  it("names exactly the files that failed, relative to where it runs", async () => {
    expect((await tool("failed-files", false)).sort()).toEqual(["broken.check.ts", "mixed.check.ts"]);
  });

  it("with the log, also names the file during which an error outside any test came", async () => {
    expect((await tool("failed-files")).sort()).toEqual(["broken.check.ts", "late.check.ts", "mixed.check.ts"]);
    expect(await tool("failures")).toContainEqual(expect.stringMatching(/^late\.check\.ts :: \(unhandled error while it ran\)/));
  });

  it("gives one line per failed test, and a file that failed outside its tests, with the first line of the reason", async () => {
    const lines = await tool("failures", false);
    expect(lines).toHaveLength(2);
    expect(lines).toContainEqual(expect.stringMatching(/^mixed\.check\.ts :: breaks :: AssertionError: expected 'got' to be 'wanted'/));
    expect(lines).toContainEqual(expect.stringMatching(/^broken\.check\.ts :: \(file\) :: .*cannot load the fixture/));
  });

  it("fails without a report instead of naming nothing (a run that died before testing is not rerun as green)", async () => {
    const missing = await run("node", [reportTool, "failed-files", join(dir, "absent.json")]).then(
      () => 0,
      (e: { code?: number }) => e.code ?? -1,
    );
    expect(missing).toBe(1);
  });
});
