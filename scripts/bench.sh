#!/usr/bin/env bash
# `pnpm bench`: speed and memory figures (not tests). Each benchmark prints a final JSON line.
# bench/ce/active.bench.ts runs the whole CE with BENCH_ACTIVE_JOBS (default 100,000) waiting jobs.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ensure-system-deps.sh base
for b in apps/gateway/bench/*.bench.ts packages/x509/bench/*.bench.ts apps/jem/bench/*.bench.ts bench/ce/*.bench.ts; do
  [ -f "$b" ] || continue
  echo "== $b"
  node --import tsx "$b"
done
