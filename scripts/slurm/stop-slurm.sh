#!/usr/bin/env bash
# Stop the single-node Slurm started by start-slurm.sh DIR.
#
#   scripts/slurm/stop-slurm.sh DIR [--purge]
#
# Cancels all jobs first (slurmd does not kill running jobs when it exits), then sends SIGTERM
# to slurmd, slurmctld, slurmdbd, mariadbd (accounting storage, when started) and munged using their pid files under DIR (never by name), SIGKILL after
# 10 s. --purge also removes DIR.
set -uo pipefail

DIR=${1:?usage: stop-slurm.sh DIR [--purge]}
PURGE=0
[[ ${2:-} == --purge ]] && PURGE=1
[[ -d $DIR ]] || exit 0
DIR=$(cd "$DIR" && pwd -P)
export SLURM_CONF=$DIR/etc/slurm.conf

pid_of() { # pid_of NAME: pid from DIR/run/NAME.pid if that process is alive and named NAME
  local f=$DIR/run/$1.pid pid stat state
  pid=$(cat "$f" 2>/dev/null) || return 1
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  stat=$(cat "/proc/$pid/stat" 2>/dev/null) || return 1
  state=${stat##*) }; state=${state%% *}
  [[ $state != Z && $state != X ]] || return 1
  [[ $(cat "/proc/$pid/comm" 2>/dev/null) == "$1" ]] || return 1
  echo "$pid"
}

if pid_of slurmctld >/dev/null && [[ -f $SLURM_CONF ]]; then
  mapfile -t ids < <(squeue -h -o %i 2>/dev/null)
  if (( ${#ids[@]} )); then
    scancel "${ids[@]}" 2>/dev/null
    # Wait (≤ 15 s) for the jobs to leave RUNNING/COMPLETING so no job outlives slurmd.
    for _ in $(seq 1 75); do
      [[ -z $(squeue -h -t running,completing,suspended,configuring -o %i 2>/dev/null) ]] && break
      sleep 0.2
    done
  fi
fi

for d in slurmd slurmctld slurmdbd mariadbd munged; do
  pid=$(pid_of "$d") || continue
  kill -TERM "$pid" 2>/dev/null
  for _ in $(seq 1 50); do pid_of "$d" >/dev/null || break; sleep 0.2; done
  pid_of "$d" >/dev/null && kill -KILL "$pid" 2>/dev/null
done

if (( PURGE )); then
  rm -rf -- "$DIR"
fi
exit 0
