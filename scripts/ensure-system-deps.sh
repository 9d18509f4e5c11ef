#!/usr/bin/env bash
# Installs the Debian packages the CE and its tests run for real (idempotent; only what is missing).
# Redis (server, tools, sentinel: tests/ha) and the ARC client are always needed for tests; Slurm/munge for the Slurm back end;
# chromium for the browser checks; apache2 (mod_dav) and xrootd for the staging tests against real storage;
# prometheus (promtool and the server) for the alert-rule tests of deploy/monitoring; postgresql for
# the accounting database tests; mariadb-server and slurmdbd for Slurm's accounting storage (tests
# of VO placement by Slurm account/QOS and of usage taken from sacct); a C++ tool chain because better-sqlite3 is compiled at install
# (its prebuilt binaries come from outside the npm registry).
# Grid Engine (sge) for the third batch-system back end: tests start a private qmaster + execd from it
# (packages/testing/src/gridengine.ts), never the packaged services; gcc compiles the preload shim
# that keeps those daemons on loopback (scripts/gridengine/loopback-bind.c).
# bubblewrap runs the payload of an ENV/CONTAINER job in its image, and mmdebstrap builds the test's image.
# systemd (systemd-analyze) verifies the units of the Debian package (scripts/package-deb.test.ts); nothing starts it.
# valgrind (group bench, not in the default list: benchmarks only) counts instructions for bench/instr.
# Pass package groups: base build slurm slurmdbd sge arc browser storage monitoring db container package bench (default: all but bench).
set -euo pipefail
groups=("$@"); [ ${#groups[@]} -eq 0 ] && groups=(base build slurm slurmdbd sge arc browser storage monitoring db container package)
want=()
for g in "${groups[@]}"; do
  case "$g" in
    base) want+=(redis-server redis-tools redis-sentinel openssl time procps python3) ;;
    slurm) want+=(slurm-wlm munge) ;;
    slurmdbd) want+=(slurmdbd mariadb-server) ;;
    sge) want+=(gridengine-master gridengine-exec gridengine-client gcc libc6-dev) ;;
    # nordugrid-arc-arex: only for its stock RTEs (/usr/share/arc/rte), which the RTE tests run unmodified.
    arc) want+=(nordugrid-arc-client nordugrid-arc-plugins-arcrest nordugrid-arc-plugins-needed voms-clients nordugrid-arc-arex) ;;
    browser) want+=(chromium) ;;
    storage) want+=(apache2 xrootd-client xrootd-server) ;;
    monitoring) want+=(prometheus) ;;
    build) want+=(make g++ python3) ;;
    db) want+=(postgresql) ;;
    container) want+=(bubblewrap mmdebstrap) ;;
    package) want+=(systemd) ;;
    bench) want+=(valgrind) ;;
    *) echo "unknown group $g" >&2; exit 2 ;;
  esac
done
missing=()
for p in "${want[@]}"; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p"); done
[ ${#missing[@]} -eq 0 ] && exit 0
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
echo "installing: ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
# The packaged services (redis, slurm, mariadb, postgresql, apache2, xrootd, gridengine, prometheus)
# are never started by the install: the tests start their own, on loopback and free ports. Where the
# machine has no policy-rc.d of its own, a deny-all one stands for the length of the install.
if [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
  $SUDO chmod 755 /usr/sbin/policy-rc.d
  trap '$SUDO rm -f /usr/sbin/policy-rc.d' EXIT
fi
$SUDO apt-get update -qq >&2
$SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >&2
