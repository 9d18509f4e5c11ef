// Reads a vitest JSON report for scripts/test.sh.
//
//   node scripts/test-report.mjs failed-files REPORT [LOG]   repo-relative paths of the files that failed
//   node scripts/test-report.mjs failures REPORT [LOG]       one line per failure: file, test, first line of the reason
//
// LOG is what vitest printed. An error thrown outside any test (an unhandled rejection from a
// server a test started, say) fails the run without failing a file in the report; vitest names
// the file that was running in the log, and that file counts as failed too.
//
// Written here rather than with jq because jq is not on every machine the suite runs on, and the
// report is vitest's own format (Jest-compatible: testResults[].assertionResults[]).
import { readFileSync } from "node:fs";
import { relative } from "node:path";

const [what, reportPath, logPath] = process.argv.slice(2);
if (!what || !reportPath) {
  console.error("usage: test-report.mjs failed-files|failures REPORT [LOG]");
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

/** Files vitest names as running when an error outside any test came (vitest's own wording). */
function unhandledIn(path) {
  if (!path) return [];
  let log;
  try {
    log = readFileSync(path, "utf8");
  } catch {
    return [];
  }
  // Colour codes stand between the words when vitest believed it wrote to a terminal.
  const plain = log.replace(/\u001b\[[0-9;]*m/g, "");
  const named = [...plain.matchAll(/This error originated in "([^"]+)" test file/g)].map((m) => m[1]);
  return [...new Set(named)];
}
const unhandled = unhandledIn(logPath).filter((f) => !files.some((r) => rel(r.name) === f));

if (what === "failed-files") {
  for (const f of files) console.log(rel(f.name));
  for (const f of unhandled) console.log(f);
} else if (what === "failures") {
  for (const f of unhandled) console.log(`${f} :: (unhandled error while it ran) :: see the error above in the log`);
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
