#!/usr/bin/env bash
# Validates deploy/ without a Docker engine: compose structure and references, Dockerfiles (COPY
# sources, pnpm filters, CMD = the apps' start command), the stack's config against the schema,
# and (unless --no-install) a replay of each image's `pnpm install` offline with its CMD's config
# check. Exit 0 when valid. Usage: deploy/validate.sh [--no-install]
set -euo pipefail
cd "$(dirname "$0")/.."
# The checker itself is typed; deploy/ is outside the root tsconfig, so it has its own.
pnpm exec tsc -p deploy/tsconfig.json
exec node --import tsx deploy/validate.ts "$@"
