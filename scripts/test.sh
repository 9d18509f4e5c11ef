#!/usr/bin/env bash
# `pnpm test`: every test of the project against real Redis, Slurm, ARC client and TLS.
#
# Two passes. Most files start their own servers (Redis prefixes, Slurm clusters, storage servers)
# on free loopback ports, so they run side by side: much of their time is spent waiting for a
# batch system or a timer, not computing. Files named `*.serial.test.ts` need the machine to
# themselves (they measure CPU or latency, SIGKILL or SIGSTOP processes against deadlines, or
# count free batch slots) and run one at a time afterwards.
#
# A file that fails is run once more on its own (CE_TEST_RERUN=0 turns that off). A pass is green
# only if every file passed, first time or on the rerun; every failure of a first run is printed
# again at the end and kept in tests/artifacts/flaky.txt, so a file that passes only on its rerun
# is visible in every log, not hidden. Why rerun at all: many suites race real daemons (Slurm,
# Apache, the ARC client) on a loaded two-core machine, and one lost race should not hide the
# result of the other two thousand tests.
#
# With arguments (`pnpm test apps/jem`), one pass over what they select, as `vitest run` takes them.
# CE_TEST_WORKERS: files run at once in the first pass (default 2).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ensure-system-deps.sh
if [ $# -gt 0 ]; then exec pnpm exec vitest run "$@"; fi
workers="${CE_TEST_WORKERS:-2}"
rerun="${CE_TEST_RERUN:-1}"
artifacts=tests/artifacts
mkdir -p "$artifacts"
rm -f "$artifacts/flaky.txt" "$artifacts"/pass-*

# pass NAME VITEST-ARGS...: one vitest run, then the files that failed once more on their own.
pass() {
  local name=$1
  shift
  local report="$artifacts/pass-$name.json" log="$artifacts/pass-$name.log"
  if pnpm exec vitest run "$@" --reporter=default --reporter=json --outputFile.json="$report" 2>&1 | tee "$log"; then
    return 0
  fi
  local failed
  failed=$(node scripts/test-report.mjs failed-files "$report" "$log") || return 1
  if [ -z "$failed" ] || [ "$rerun" = 0 ]; then return 1; fi
  node scripts/test-report.mjs failures "$report" "$log" | sed "s/^/first run ($name): /" >>"$artifacts/flaky.txt"
  echo "test: pass $name: rerunning the files that failed:" $failed
  local -a files
  mapfile -t files <<<"$failed"
  pnpm exec vitest run --maxWorkers=1 --minWorkers=1 --reporter=default \
    --reporter=json --outputFile.json="$artifacts/pass-$name-rerun.json" "${files[@]}"
}

status=0
pass main --maxWorkers="$workers" --minWorkers=1 --exclude '**/*.serial.test.ts' || status=$?
pass serial --maxWorkers=1 --minWorkers=1 --passWithNoTests .serial.test.ts || status=$?
if [ -s "$artifacts/flaky.txt" ]; then
  echo "test: failures of a first run (each file was run again; the status above says how that went):"
  cat "$artifacts/flaky.txt"
fi
exit "$status"
