#!/usr/bin/env bash
# `pnpm test`: every test of the project against real Redis, Slurm, ARC client and TLS.
#
# Two passes. Most files start their own servers (Redis prefixes, Slurm clusters, storage servers)
# on free loopback ports, so they run side by side: much of their time is spent waiting for a
# batch system or a timer, not computing. Files named `*.serial.test.ts` need the machine to
# themselves (they measure CPU or latency, SIGKILL or SIGSTOP processes against deadlines, or
# count free batch slots) and run one at a time afterwards.
#
# With arguments (`pnpm test apps/jem`), one pass over what they select, as `vitest run` takes them.
# CE_TEST_WORKERS: files run at once in the first pass (default 2).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ensure-system-deps.sh
if [ $# -gt 0 ]; then exec pnpm exec vitest run "$@"; fi
workers="${CE_TEST_WORKERS:-2}"
status=0
pnpm exec vitest run --maxWorkers="$workers" --minWorkers=1 --exclude '**/*.serial.test.ts' || status=$?
pnpm exec vitest run --maxWorkers=1 --minWorkers=1 --passWithNoTests .serial.test.ts || status=$?
exit "$status"
