#!/usr/bin/env bash
# `pnpm test`: every test of the project against real Redis, Slurm, ARC client and TLS.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ensure-system-deps.sh
exec pnpm exec vitest run "$@"
