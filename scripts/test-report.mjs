// Reads a vitest JSON report for scripts/test.sh.
//
//   node scripts/test-report.mjs failed-files REPORT      repo-relative paths of the files that failed
//   node scripts/test-report.mjs failures REPORT          one line per failed test: file, name, first line of the reason
//
// Written here rather than with jq because jq is not on every machine the suite runs on, and the
// report is vitest's own format (Jest-compatible: testResults[].assertionResults[]).
import { readFileSync } from "node:fs";
import { relative } from "node:path";

const [what, reportPath] = process.argv.slice(2);
if (!what || !reportPath) {
  console.error("usage: test-report.mjs failed-files|failures REPORT");
  process.exit(2);
}

let report;
try {
  report = JSON.parse(readFileSync(reportPath, "utf8"));
} catch (err) {
  // No report means vitest failed before running files (config, global setup): nothing to rerun.
  console.error(`test-report: cannot read ${reportPath}: ${err.message}`);
  process.exit(1);
}

const files = (report.testResults ?? []).filter((f) => f.status === "failed");
const rel = (p) => relative(process.cwd(), p);

if (what === "failed-files") {
  for (const f of files) console.log(rel(f.name));
} else if (what === "failures") {
  for (const f of files) {
    const tests = (f.assertionResults ?? []).filter((t) => t.status === "failed");
    if (tests.length === 0) {
      // A file fails without a failed test when its hooks or imports throw.
      const reason = (f.message ?? "").split("\n")[0] || "the file failed outside its tests";
      console.log(`${rel(f.name)} :: (file) :: ${reason}`);
    }
    for (const t of tests) {
      const reason = (t.failureMessages?.[0] ?? "").split("\n")[0];
      console.log(`${rel(f.name)} :: ${t.fullName} :: ${reason}`);
    }
  }
} else {
  console.error(`test-report: unknown request ${what}`);
  process.exit(2);
}
