#!/usr/bin/env bash
# `pnpm bench:arex`: our CE side by side with the reference A-REX (bench/arex/main.ts).
# Installs what it needs when missing (Debian packages of A-REX and the ARC client, Redis), makes a
# throw-away test PKI with the reference's setup-creds.sh, runs both servers one after the other
# with the same client, prints the table and writes bench/results/arex-*.json.
# BENCH_AREX_DIR keeps the PKI/state in a directory of your choice (default: a fresh one, removed).
set -euo pipefail
cd "$(dirname "$0")/../.."
REF="${AREX_REF_DIR:-$PWD/../shared/tools/arex-ref}"
[ -x "$REF/arex-start.sh" ] || [ -f "$REF/arex-start.sh" ] || { echo "bench:arex: no reference A-REX scripts in $REF" >&2; exit 2; }
bash scripts/ensure-system-deps.sh base
want=(nordugrid-arc-arex nordugrid-arc-client nordugrid-arc-plugins-arcrest nordugrid-arc-plugins-needed
  nordugrid-arc-plugins-internal nordugrid-arc-arcctl nordugrid-arc-arcctl-service nordugrid-arc-hed)
missing=()
for p in "${want[@]}"; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "bench:arex: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq >&2
  # policy-rc.d keeps the packaged services from starting; we start A-REX by hand on loopback.
  $SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >&2
fi
if [ -n "${BENCH_AREX_DIR:-}" ]; then DIR="$BENCH_AREX_DIR"; mkdir -p "$DIR"; KEEP=1; else DIR=$(mktemp -d /tmp/bench-arex.XXXXXX); KEEP=0; fi
cleanup() {
  save_dh 2>/dev/null || true
  bash "$REF/arex-stop.sh" "$DIR" >/dev/null 2>&1 || true
  [ "$KEEP" = 1 ] || rm -rf "$DIR"
}
trap cleanup EXIT
bash "$REF/setup-creds.sh" "$DIR" >/dev/null 2>&1
# arex-start.sh makes 2048-bit DH parameters once per directory (minutes on a busy machine);
# they are not part of what is measured, so one set is kept between runs.
CACHE=node_modules/.cache/bench-arex
mkdir -p "$CACHE" "$DIR/arex/control"
[ -s "$CACHE/dhparam.pem" ] && [ ! -s "$DIR/arex/control/dhparam.pem" ] && install -m 600 "$CACHE/dhparam.pem" "$DIR/arex/control/dhparam.pem"
save_dh() { [ -s "$DIR/arex/control/dhparam.pem" ] && [ ! -s "$CACHE/dhparam.pem" ] && install -m 600 "$DIR/arex/control/dhparam.pem" "$CACHE/dhparam.pem"; return 0; }
node --import tsx bench/arex/main.ts "$DIR"
