#!/usr/bin/env bash
# Stops the private Grid Engine of start-sge.sh DIR: deletes its jobs, then TERM (KILL after 10 s)
# to the execd and the qmaster by their pid files, and to the shepherds of jobs still running
# (their pids are in the execd's active_jobs directory). --purge removes DIR, and since nothing
# of the spool is kept the grace is 2 s (sge_qmaster takes seconds to write its state on TERM).
set -uo pipefail
DIR=${1:?usage: stop-sge.sh DIR [--purge]}
[[ -d $DIR ]] || exit 0
DIR=$(cd "$DIR" && pwd)
UTIL=/usr/lib/gridengine
if [[ -f $DIR/env.sh ]]; then
  # shellcheck source=/dev/null
  source "$DIR/env.sh"
  "$UTIL/qdel" -f -u '*' >/dev/null 2>&1 || true
fi

# pid_alive PID NAME: the pid is a process of that program (a reused pid is left alone).
pid_alive() { [[ $1 =~ ^[0-9]+$ ]] && [[ $(cat "/proc/$1/comm" 2>/dev/null) == "$2"* ]]; }
pids=()
for f in "$DIR"/spool/execd/*/active_jobs/*/pid; do
  [[ -f $f ]] || continue
  p=$(<"$f"); pid_alive "$p" sge_shepherd && pids+=("$p")
done
for f in "$DIR"/spool/execd/*/execd.pid; do
  [[ -f $f ]] || continue
  p=$(<"$f"); pid_alive "$p" sge_execd && pids+=("$p")
done
f=$DIR/spool/qmaster/qmaster.pid
[[ -f $f ]] && { p=$(<"$f"); pid_alive "$p" sge_qmaster && pids+=("$p"); }
(( ${#pids[@]} )) && kill -TERM "${pids[@]}" 2>/dev/null
grace=50; [[ ${2:-} == --purge ]] && grace=10
for _ in $(seq "$grace"); do
  alive=()
  for p in "${pids[@]}"; do [[ -d /proc/$p ]] && alive+=("$p"); done
  (( ${#alive[@]} )) || break
  sleep 0.2
done
(( ${#alive[@]} )) && kill -KILL "${alive[@]}" 2>/dev/null
[[ ${2:-} == --purge ]] && rm -rf -- "$DIR"
exit 0
