#!/usr/bin/env bash
# Start (or repair) a single-node Slurm for tests and development, all state under DIR.
#
#   scripts/slurm/start-slurm.sh DIR        e.g. /tmp/ce-slurm-1 (keep it short: unix sockets ≤ 108 bytes)
#
# Runs munged, slurmctld and slurmd by hand (no systemd), everything bound to 127.0.0.1, and
# waits until the node is idle. Idempotent: only dead daemons are (re)started, a changed
# slurm.conf is applied with `scontrol reconfigure`, a down/drained node is resumed.
# Prints `export SLURM_CONF=...` (also written to DIR/env.sh); every client call needs it.
#
# Knobs: SLURM_CPUS (8, oversubscribed on purpose: trivial jobs pass at ~CPUs jobs/s),
# SLURM_MEM_MB (0.9 x MemTotal), SLURMCTLD_PORT (6817), SLURMD_PORT (6818),
# SLURM_NODE (localhost), SLURM_MIN_JOB_AGE (3600), SLURM_START_TIMEOUT (60 s),
# SLURM_SCHED_PARAMS (batch_sched_delay=0), SLURM_GPUS (0: GPUs of the node, stand-in device files, no hardware).
# Accounting storage: SLURMDBD_PORT (empty: none, jobs are only in the completion log) starts a
# private MariaDB (port SLURM_DB_PORT) and slurmdbd on that port (start-slurmdbd.sh), registers the
# cluster, and makes slurmctld enforce associations, limits and QOS (accounts, users and QOS are
# then the caller's to create with sacctmgr); jobacct_gather/linux samples every
# SLURM_ACCT_GATHER_SECONDS (30) for sacct's MaxRSS.
set -euo pipefail

DIR=${1:?usage: start-slurm.sh DIR}
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd -P)

CPUS=${SLURM_CPUS:-8}
GPUS=${SLURM_GPUS:-0}
[[ $GPUS =~ ^[0-9]+$ ]] || { echo "SLURM_GPUS must be a number" >&2; exit 2; }
MEM_MB=${SLURM_MEM_MB:-$(awk '/^MemTotal:/ { printf "%d", $2 * 0.9 / 1024 }' /proc/meminfo)}
CTLD_PORT=${SLURMCTLD_PORT:-6817}
SLURMD_PORT=${SLURMD_PORT:-6818}
NODE=${SLURM_NODE:-localhost}
MIN_JOB_AGE=${SLURM_MIN_JOB_AGE:-3600}
TIMEOUT=${SLURM_START_TIMEOUT:-60}
SCHED_PARAMS=${SLURM_SCHED_PARAMS:-batch_sched_delay=0}
DBD_PORT=${SLURMDBD_PORT:-}
GATHER_SECONDS=${SLURM_ACCT_GATHER_SECONDS:-30}
[[ -z $DBD_PORT || $DBD_PORT =~ ^[0-9]+$ ]] || { echo "SLURMDBD_PORT must be a port number" >&2; exit 2; }
[[ $GATHER_SECONDS =~ ^[0-9]+$ ]] || { echo "SLURM_ACCT_GATHER_SECONDS must be a number" >&2; exit 2; }

SOCKET=$DIR/munge/munge.socket
if (( ${#SOCKET} > 100 )); then
  echo "start-slurm: DIR too long for a unix socket path: $SOCKET" >&2
  exit 2
fi
for bin in munged mungekey slurmctld slurmd sinfo scontrol; do
  command -v "$bin" >/dev/null || { echo "start-slurm: $bin not installed (apt-get install slurm-wlm munge)" >&2; exit 2; }
done

mkdir -p "$DIR"/{etc,munge,state,spool,log,run}
# 0711: mapped accounts submit through the socket (the key inside stays 0600, like /run/munge).
chmod 711 "$DIR/munge"
CONF=$DIR/etc/slurm.conf
export SLURM_CONF=$CONF

# alive PIDFILE COMM: true when the pid file names a live (non-zombie) process with that comm.
# kill -0 is not enough: PID 1 here reaps orphans late, and kill -0 succeeds on zombies.
alive() {
  local pidfile=$1 comm=$2 pid stat state
  pid=$(cat "$pidfile" 2>/dev/null) || return 1 # the daemon removes it when it exits
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  stat=$(cat "/proc/$pid/stat" 2>/dev/null) || return 1
  state=${stat##*) }; state=${state%% *}
  [[ $state != Z && $state != X ]] || return 1
  [[ $(cat "/proc/$pid/comm" 2>/dev/null) == "$comm" ]]
}

dead() { ! alive "$@"; }

port_taken() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

wait_for() { # wait_for SECONDS DESCRIPTION CMD...
  local deadline=$((SECONDS + $1)) what=$2; shift 2
  until "$@"; do
    if (( SECONDS >= deadline )); then echo "start-slurm: timed out waiting for $what" >&2; return 1; fi
    sleep 0.2
  done
}

# --- munge: own key and socket, --force because /tmp is world-writable ---
if ! alive "$DIR/run/munged.pid" munged; then
  [[ -s $DIR/munge/munge.key ]] || mungekey --create --keyfile="$DIR/munge/munge.key" 2>/dev/null \
    || dd if=/dev/urandom of="$DIR/munge/munge.key" bs=1024 count=1 status=none
  chmod 600 "$DIR/munge/munge.key"
  rm -f "$SOCKET" "$SOCKET.lock"
  munged --force --key-file="$DIR/munge/munge.key" --socket="$SOCKET" \
    --pid-file="$DIR/run/munged.pid" --log-file="$DIR/log/munged.log" --seed-file="$DIR/munge/munge.seed"
  wait_for 10 munged test -S "$SOCKET"
  wait_for 10 "munged pid file" alive "$DIR/run/munged.pid" munged
fi

# --- accounting storage (optional): MariaDB + slurmdbd ---
[[ -n $DBD_PORT ]] && bash "$(dirname "${BASH_SOURCE[0]}")/start-slurmdbd.sh" "$DIR" "$SOCKET"

# --- slurm.conf ---
CLUSTER=ce$(printf '%s' "$DIR" | cksum | cut -c1-6)
ACCOUNTING=$'JobAcctGatherType=jobacct_gather/none\nAccountingStorageType=accounting_storage/none'
if [[ -n $DBD_PORT ]]; then
  ACCOUNTING=$(printf '%s\n' "JobAcctGatherType=jobacct_gather/linux" "JobAcctGatherFrequency=task=$GATHER_SECONDS" \
    "AccountingStorageType=accounting_storage/slurmdbd" "AccountingStorageHost=127.0.0.1" "AccountingStoragePort=$DBD_PORT" "AccountingStoragePass=$SOCKET" \
    "AccountingStorageEnforce=associations,limits,qos")
fi
GRES_TYPES="" NODE_GRES=" "
if ((GPUS > 0)); then GRES_TYPES=$'\nGresTypes=gpu'; NODE_GRES=" Gres=gpu:$GPUS "; fi
NEW_CONF=$(cat <<EOF
# Generated by scripts/slurm/start-slurm.sh; edits are overwritten.
ClusterName=$CLUSTER
SlurmctldHost=$NODE(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$SOCKET
CommunicationParameters=NoInAddrAny,NoCtldInAddrAny
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
$ACCOUNTING
JobCompType=jobcomp/filetxt
JobCompLoc=$DIR/log/jobcomp.log
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
SchedulerParameters=$SCHED_PARAMS
EnforcePartLimits=ALL
MinJobAge=$MIN_JOB_AGE
KillWait=5
ReturnToService=2
MailProg=/bin/true
MpiDefault=none$GRES_TYPES
NodeName=$NODE NodeAddr=127.0.0.1 NodeHostname=$NODE CPUs=$CPUS RealMemory=$MEM_MB${NODE_GRES}State=UNKNOWN
PartitionName=main Nodes=$NODE Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
PartitionName=debug Nodes=$NODE Default=NO MaxTime=INFINITE State=UP
EOF
)
# GPUs without hardware: Slurm drops a GPU without a device file, so empty stand-in files (no
# device is ever opened: TaskPlugin=task/none). Enough for Slurm to place and hold back GPU jobs.
if ((GPUS > 0)); then
  mkdir -p "$DIR/dev"
  for ((i = 0; i < GPUS; i++)); do : >"$DIR/dev/gpu$i"; done
  printf 'Name=gpu File=%s/dev/gpu[0-%s]\n' "$DIR" "$((GPUS - 1))" >"$DIR/etc/gres.conf"
else rm -f "$DIR/etc/gres.conf"; fi
CONF_CHANGED=0
if [[ ! -f $CONF ]] || [[ $(<"$CONF") != "$NEW_CONF" ]]; then
  printf '%s\n' "$NEW_CONF" >"$CONF.tmp" && mv "$CONF.tmp" "$CONF"
  CONF_CHANGED=1
fi

stop_daemon() { # NAME: TERM by pid file, KILL after 10 s
  local f=$DIR/run/$1.pid pid
  alive "$f" "$1" || return 0
  pid=$(cat "$f" 2>/dev/null) || return 0
  kill -TERM "$pid" 2>/dev/null
  wait_for 10 "$1 to stop" dead "$f" "$1" || kill -KILL "$pid" 2>/dev/null
}

# Node changes (CPUs, memory) cannot be reconfigured live: restart both daemons then.
if (( CONF_CHANGED )) && alive "$DIR/run/slurmctld.pid" slurmctld; then
  if scontrol reconfigure >/dev/null 2>&1; then
    CONF_CHANGED=0
  else
    echo "start-slurm: slurm.conf changed; restarting slurmctld and slurmd" >&2
    stop_daemon slurmd
    stop_daemon slurmctld
  fi
fi

# --- slurmctld ---
if ! alive "$DIR/run/slurmctld.pid" slurmctld; then
  # With enforced associations the cluster must be known to slurmdbd before slurmctld registers.
  if [[ -n $DBD_PORT ]] && ! out=$(sacctmgr -i add cluster "$CLUSTER" 2>&1) && [[ $out != *"already exists"* ]]; then
    echo "start-slurm: sacctmgr add cluster $CLUSTER failed: $out" >&2; exit 1
  fi
  if port_taken "$CTLD_PORT"; then
    echo "start-slurm: port $CTLD_PORT is taken (another cluster?); set SLURMCTLD_PORT/SLURMD_PORT" >&2
    exit 1
  fi
  slurmctld -f "$CONF"
  CONF_CHANGED=0
  # The daemon writes its pid file after forking: give it a moment before judging it dead.
  wait_for 10 "slurmctld pid file" alive "$DIR/run/slurmctld.pid" slurmctld || { tail -n 20 "$DIR/log/slurmctld.log" >&2; exit 1; }
  wait_for "$TIMEOUT" slurmctld scontrol ping >/dev/null 2>&1 || {
    tail -n 20 "$DIR/log/slurmctld.log" >&2 || true; exit 1; }
fi

# --- slurmd ---
if ! alive "$DIR/run/slurmd.pid" slurmd; then
  if port_taken "$SLURMD_PORT"; then
    echo "start-slurm: port $SLURMD_PORT is taken; set SLURMD_PORT" >&2
    exit 1
  fi
  slurmd -f "$CONF" -N "$NODE"
  wait_for 10 "slurmd pid file" alive "$DIR/run/slurmd.pid" slurmd || { tail -n 20 "$DIR/log/slurmd.log" >&2; exit 1; }
fi

# --- wait until the node is idle (resume it when down/drained) ---
node_ready() {
  local st
  for d in munged slurmctld slurmd; do
    alive "$DIR/run/$d.pid" "$d" || { echo "start-slurm: $d died; see $DIR/log/$d.log" >&2; tail -n 20 "$DIR/log/$d.log" >&2 || true; exit 1; }
  done
  st=$(sinfo -h -n "$NODE" -o %T 2>/dev/null | head -n1) || return 1
  case $st in
    idle|mixed|allocated) return 0 ;;
    down*|drain*|fail*) scontrol update nodename="$NODE" state=resume >/dev/null 2>&1 || true; return 1 ;;
    *) return 1 ;;
  esac
}
wait_for "$TIMEOUT" "node $NODE idle" node_ready

printf 'export SLURM_CONF=%q\n' "$CONF" >"$DIR/env.sh"
cat "$DIR/env.sh"
