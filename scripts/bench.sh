#!/usr/bin/env bash
# `pnpm bench`: speed and memory figures (not tests). Each benchmark prints a final JSON line.
# bench/ce/active.bench.ts runs the whole CE with BENCH_ACTIVE_JOBS (default 100,000) waiting jobs;
# bench/ce/cache.bench.ts stages BENCH_CACHE_JOBS (100) × BENCH_CACHE_MB (100) MB with and without
# the input cache (~10 GB of session writes per run, removed after it); bench/ce/staging.bench.ts
# moves BENCH_STAGING_JOBS (100) × 11 × 10 MiB between the JEM, Apache (davs://) and xrootd
# (root://), and the same transfers by curl and xrdcp (~10 GB at the origin, ~20 GB of writes, removed).
# bench/ce/e2e.bench.ts: 5 × 100 /bin/true with a per-job timeline; bench/instr: instructions per operation.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ensure-system-deps.sh base storage bench
for b in apps/gateway/bench/*.bench.ts packages/x509/bench/*.bench.ts apps/jem/bench/*.bench.ts bench/ce/*.bench.ts; do
  [ -f "$b" ] || continue
  echo "== $b"
  node --import tsx "$b"
done
# Instructions per operation under valgrind (bench/README.md): the figures that hold on a busy machine.
echo "== bench/instr/main.ts"
node --import tsx bench/instr/main.ts
