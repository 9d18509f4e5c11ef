#!/usr/bin/env bash
# `./ce start` / `pnpm start`: the embedded development CE — local Redis (ACL users gateway/jem with
# passwords in .ce/secrets, `default` off; data under .ce/redis), the JEM with the fork back end, one
# gateway on https://localhost:8443/arex (by default). Development certificates and .ce/ce.yaml are
# generated on first start. scripts/dev/run.ts starts, watches and restarts the components;
# Ctrl-C stops what it started.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ensure-system-deps.sh base
exec node --import tsx scripts/dev/run.ts
