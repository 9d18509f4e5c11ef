#!/usr/bin/env bash
# `pnpm soak`: the soaks of tests/soak, not part of `pnpm test`. exactly-once: 1,000 fork and 400
# Slurm jobs while the JEM is SIGKILLed every 3 s ten times (`pnpm test` runs a 100-job cut).
# kill-clean: 20 rounds of 500 upload-waiting jobs, bulk status from 8 clients, bulk kill, bulk
# clean, counting JEM exits and EBADF lines, then the same with the JEM SIGKILLed once per round
# (SOAK_KC_ROUNDS, SOAK_KC_JOBS, SOAK_KC_LOOP_S). One soak: `pnpm soak tests/soak/kill-clean.soak.ts`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ensure-system-deps.sh base slurm
exec pnpm exec vitest run --config vitest.soak.config.ts "$@"
