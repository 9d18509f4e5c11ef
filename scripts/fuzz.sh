#!/usr/bin/env bash
# `pnpm fuzz`: every *.fuzz.test.ts target with a long budget (default 100,000 cases each),
# then one table of cases, cases/s and findings. CE_FUZZ_RUNS overrides the budget.
set -euo pipefail
cd "$(dirname "$0")/.."
report=$(mktemp)
export CE_FUZZ_RUNS=${CE_FUZZ_RUNS:-100000} CE_FUZZ_REPORT=$report
status=0
pnpm exec vitest run --testTimeout=0 --hookTimeout=600000 "${@:-.fuzz.test.ts}" || status=$?
node -e '
const lines = require("fs").readFileSync(process.argv[1], "utf8").trim().split("\n").filter(Boolean).map(JSON.parse);
const pad = (s, n) => String(s).padEnd(n);
console.log("\n" + pad("target", 44) + pad("cases", 10) + pad("cases/s", 10) + "findings");
for (const l of lines) console.log(pad(l.name, 44) + pad(l.runs, 10) + pad(l.perSec, 10) + l.findings);
' "$report"
rm -f "$report"
exit $status
