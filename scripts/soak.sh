#!/usr/bin/env bash
# `pnpm soak`: the exactly-once soak (tests/soak) — 1,000 fork and 400 Slurm jobs while the JEM is
# SIGKILLed every 3 s ten times. Not part of `pnpm test` (which runs a 100-job cut of it).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ensure-system-deps.sh base slurm
exec pnpm exec vitest run --config vitest.soak.config.ts "$@"
