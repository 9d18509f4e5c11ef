#!/usr/bin/env bash
# A private single-host Grid Engine (Debian gridengine-master/-exec 8.1.x) for tests and development:
# its own SGE_ROOT and cell under DIR, classic (flat file) spooling under DIR, qmaster and execd on
# the ports given, started by hand (never the packaged services, which use the shared cell
# /var/lib/gridengine/default). Prints the environment the clients need (source DIR/env.sh).
#
#   start-sge.sh DIR       SGE_QMASTER_PORT, SGE_EXECD_PORT (required: free ports),
#                          SGE_QUEUES ("main"), SGE_SLOTS (4), SGE_START_TIMEOUT (60 s)
#   stop-sge.sh DIR [--purge]
#
# Host names. Grid Engine names every host by what its resolver makes of it and compares names,
# not addresses: the execd announces the name gethostname() resolves to ("vm" here), while the
# qmaster names a connection by the reverse lookup of its peer address (127.0.0.1 → "localhost").
# On a host whose own name resolves to a loopback address (Debian's /etc/hosts, containers) those
# differ and the qmaster refuses the execd ("... not an execution host", "denied: host ... is
# neither submit nor admin host"). So the cell gets a host_aliases file naming one primary name,
# the reverse name of 127.0.0.1, with every other name this host answers to (gethostname(), its
# resolved name, `hostname -f`) as aliases: all of them become the same host to every daemon and
# client of the cell, whatever /etc/hosts says, and nothing outside DIR is changed.
#
# Loopback only. Grid Engine has no bind-address setting (its daemons listen on the wildcard
# address), so both daemons run with loopback-bind.c, compiled here with the system cc into DIR and
# preloaded, which turns their wildcard binds into 127.0.0.1 (test-only; see its header). The cell
# also admits only its own host (the one admin, submit and execution host); security_mode none
# means any local account may submit, as on a stock Debian install.
set -euo pipefail
DIR=${1:?usage: start-sge.sh DIR}
: "${SGE_QMASTER_PORT:?set SGE_QMASTER_PORT}" "${SGE_EXECD_PORT:?set SGE_EXECD_PORT}"
QUEUES=${SGE_QUEUES:-main}
SLOTS=${SGE_SLOTS:-4}
TIMEOUT=${SGE_START_TIMEOUT:-60}
PKG_ROOT=/var/lib/gridengine
UTIL=/usr/lib/gridengine
[[ -x $UTIL/sge_qmaster && -x $UTIL/sge_execd ]] || { echo "Grid Engine not installed (scripts/ensure-system-deps.sh sge)" >&2; exit 1; }
CC=${CC:-cc}
command -v "$CC" >/dev/null || { echo "no C compiler ($CC) for loopback-bind.c (scripts/ensure-system-deps.sh sge)" >&2; exit 1; }

mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
ROOT=$DIR/root CELL=ce
COMMON=$ROOT/$CELL/common
[[ -e $COMMON/bootstrap ]] && { echo "$DIR already holds a cell; stop-sge.sh $DIR --purge first" >&2; exit 1; }
mkdir -p "$COMMON" "$DIR/spool/qmaster/job_scripts" "$DIR/spool/execd" "$DIR/tmpl"
SHIM=$DIR/loopback-bind.so
"$CC" -shared -fPIC -O2 -Wall -o "$SHIM" "$(dirname "${BASH_SOURCE[0]}")/loopback-bind.c" -ldl
# SGE_ROOT: the packaged binaries, libraries and util scripts by link, our own cell.
for d in bin lib utilbin util; do ln -sfn "$PKG_ROOT/$d" "$ROOT/$d"; done

# One primary name (the reverse lookup of 127.0.0.1, what the qmaster sees on every loopback
# connection) and every other name of this host as its aliases (see above).
resolved() { "$UTIL/$1" "$2" 2>/dev/null | sed -n 's/^Hostname: *//p' | head -n1; }
PRIMARY=$(resolved gethostbyaddr 127.0.0.1)
[[ -n $PRIMARY ]] || PRIMARY=localhost
aliases=()
for n in "$(hostname)" "$(hostname -f 2>/dev/null || true)" "$(resolved gethostbyname "$(hostname)")" localhost; do
  [[ -n $n && $n != "$PRIMARY" && " ${aliases[*]} " != *" $n "* ]] && aliases+=("$n")
done
echo "$PRIMARY ${aliases[*]}" >"$COMMON/host_aliases"
echo "$PRIMARY" >"$COMMON/act_qmaster"

cat >"$COMMON/bootstrap" <<EOF
admin_user              none
default_domain          none
ignore_fqdn             true
spooling_method         classic
spooling_lib            libspoolc
spooling_params         $COMMON;$DIR/spool/qmaster
binary_path             $ROOT/bin
qmaster_spool_dir       $DIR/spool/qmaster
security_mode           none
listener_threads        2
worker_threads          2
scheduler_threads       1
EOF

# Global configuration: the Debian defaults with this cell's spool, jobs of any uid (the CE's mapped
# accounts; root only in development), no mail, fast load reports and the accounting file written
# at once (poll reads finished jobs from it with qacct).
sed -e "s|^execd_spool_dir .*|execd_spool_dir        $DIR/spool/execd|" \
    -e 's|^min_uid .*|min_uid                0|' -e 's|^min_gid .*|min_gid                0|' \
    -e 's|^mailer .*|mailer                 /bin/true|' \
    -e 's|^load_report_time .*|load_report_time       00:00:05|' \
    -e 's|^max_unheard .*|max_unheard            00:01:00|' \
    -e 's|^execd_params .*|execd_params           ENABLE_ADDGRP_KILL=true|' \
    -e 's|^reporting_params .*|reporting_params       accounting=true reporting=false flush_time=00:00:01 accounting_flush_time=00:00:00 joblog=false sharelog=00:00:00|' \
    /usr/share/gridengine/default-configuration >"$DIR/tmpl/configuration"
printf 'hostname %s\n' "$PRIMARY" >"$DIR/tmpl/host"
mkdir -p "$DIR/tmpl/hosts" && cp "$DIR/tmpl/host" "$DIR/tmpl/hosts/$PRIMARY"

export SGE_ROOT=$ROOT SGE_CELL=$CELL SGE_QMASTER_PORT SGE_EXECD_PORT
unset SGE_DEBUG_LEVEL
(
  cd "$DIR"
  "$UTIL/spoolinit" classic libspoolc "$COMMON;$DIR/spool/qmaster" init
  "$UTIL/spooldefaults" configuration "$DIR/tmpl/configuration"
  "$UTIL/spooldefaults" complexes /usr/share/gridengine/util/resources/centry
  "$UTIL/spooldefaults" usersets /usr/share/gridengine/util/resources/usersets
  "$UTIL/spooldefaults" managers root
  "$UTIL/spooldefaults" adminhosts "$DIR/tmpl/hosts"
  "$UTIL/spooldefaults" submithosts "$DIR/tmpl/hosts"
) >"$DIR/init.log" 2>&1 || { cat "$DIR/init.log" >&2; exit 1; }

cat >"$DIR/env.sh" <<EOF
export SGE_ROOT='$ROOT' SGE_CELL='$CELL' SGE_QMASTER_PORT='$SGE_QMASTER_PORT' SGE_EXECD_PORT='$SGE_EXECD_PORT'
EOF

# Each daemon forks into the background itself and writes its pid file.
( cd "$DIR" && LD_PRELOAD=$SHIM "$UTIL/sge_qmaster" ) >"$DIR/qmaster.out" 2>&1
QM_PID_FILE=$DIR/spool/qmaster/qmaster.pid
deadline=$((SECONDS + TIMEOUT))
until "$UTIL/qstat" -g c >/dev/null 2>&1; do
  if (( SECONDS > deadline )); then
    echo "sge_qmaster did not answer within ${TIMEOUT}s:" >&2
    cat "$DIR/qmaster.out" "$DIR/spool/qmaster/messages" >&2 2>/dev/null
    exit 1
  fi
  sleep 0.2
done

# The scheduler looks at pending jobs every second (the stock 15 s would dominate a test's time).
sed -e 's|^schedule_interval .*|schedule_interval                0:0:1|' \
    -e 's|^flush_submit_sec .*|flush_submit_sec                 1|' -e 's|^flush_finish_sec .*|flush_finish_sec                 1|' \
    /usr/share/gridengine/util/install_modules/inst_schedd_high.conf >"$DIR/tmpl/sconf"
"$UTIL/qconf" -Msconf "$DIR/tmpl/sconf" >/dev/null
for q in $QUEUES; do
  [[ $q =~ ^[A-Za-z][A-Za-z0-9_.-]*$ ]] || { echo "bad queue name $q" >&2; exit 1; }
  cat >"$DIR/tmpl/queue.$q" <<EOF
qname                 $q
hostlist              $PRIMARY
seq_no                0
load_thresholds       NONE
suspend_thresholds    NONE
nsuspend              1
suspend_interval      00:05:00
priority              0
min_cpu_interval      00:05:00
processors            UNDEFINED
qtype                 BATCH INTERACTIVE
ckpt_list             NONE
pe_list               NONE
rerun                 FALSE
slots                 $SLOTS
tmpdir                /tmp
shell                 /bin/bash
prolog                NONE
epilog                NONE
shell_start_mode      unix_behavior
starter_method        NONE
suspend_method        NONE
resume_method         NONE
terminate_method      NONE
notify                00:00:60
owner_list            NONE
user_lists            NONE
xuser_lists           NONE
subordinate_list      NONE
complex_values        NONE
projects              NONE
xprojects             NONE
calendar              NONE
initial_state         default
s_rt                  INFINITY
h_rt                  INFINITY
s_cpu                 INFINITY
h_cpu                 INFINITY
s_fsize               INFINITY
h_fsize               INFINITY
s_data                INFINITY
h_data                INFINITY
s_stack               INFINITY
h_stack               INFINITY
s_core                INFINITY
h_core                INFINITY
s_rss                 INFINITY
h_rss                 INFINITY
s_vmem                INFINITY
h_vmem                INFINITY
EOF
  "$UTIL/qconf" -Aq "$DIR/tmpl/queue.$q" >/dev/null
done

( cd "$DIR" && LD_PRELOAD=$SHIM "$UTIL/sge_execd" ) >"$DIR/execd.out" 2>&1
# Ready when the execd has reported: the queue instance is no longer in state u(nknown).
q1=${QUEUES%% *}
# qstat -f: "queue@host qtype resv/used/tot load arch [states]"; no states = ready.
ready() { out=$("$UTIL/qstat" -f -q "$q1" 2>/dev/null) && awk -v q="$q1@" 'index($1, q) == 1 && NF == 5 { ok = 1 } END { exit !ok }' <<<"$out"; }
until ready; do
  if (( SECONDS > deadline )); then
    echo "sge_execd did not register within ${TIMEOUT}s:" >&2
    echo "$out" >&2
    cat "$DIR/execd.out" "$DIR/spool/execd/$PRIMARY/messages" "$DIR/spool/qmaster/messages" >&2 2>/dev/null
    exit 1
  fi
  sleep 0.2
done
echo "SGE_ROOT=$ROOT SGE_CELL=$CELL SGE_QMASTER_PORT=$SGE_QMASTER_PORT SGE_EXECD_PORT=$SGE_EXECD_PORT SGE_HOST=$PRIMARY"
echo "qmaster pid $(<"$QM_PID_FILE"), execd pid $(cat "$DIR/spool/execd/$PRIMARY/execd.pid" 2>/dev/null || echo '?')"
