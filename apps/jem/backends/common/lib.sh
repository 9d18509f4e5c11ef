# Shared helpers for the shipped back ends (sourced, not executed).

# proc_state PID -> prints "<state> <starttime>" from /proc/PID/stat, fails when the pid is gone.
# The comm field may contain spaces and ')', so split after the last ')'.
proc_state() {
  local stat rest
  # `read` (a builtin), not $(cat ...): the fork poll calls this for every active job.
  { IFS= read -r stat <"/proc/$1/stat"; } 2>/dev/null || return 1
  rest=${stat##*) }
  read -r -a f <<<"$rest"
  # fields after comm start at field 3 (state); starttime is field 22
  printf '%s %s\n' "${f[0]}" "${f[19]}"
}

# proc_read PID -> sets PROC_S (state), PROC_SID (session) and PROC_T (start time) without a
# subshell; fails when gone.
proc_read() {
  local stat rest f
  { IFS= read -r stat <"/proc/$1/stat"; } 2>/dev/null || return 1
  rest=${stat##*) }
  read -r -a f <<<"$rest"
  PROC_S=${f[0]} PROC_SID=${f[3]} PROC_T=${f[19]}
}

# read_record FILE -> sets RECORD to the local id a submission recorded for its tag (FILE =
# <jobdir>/localid.<tag>, created O_EXCL by whoever started the job, then written: an empty file is a
# claim being written, read again a few times). Fails when there is no record.
read_record() {
  local i line
  for i in 1 2 3 4 5 6 7 8 9 10; do
    [[ -f $1 && ! -L $1 ]] || return 1
    line=""
    IFS= read -r line <"$1" 2>/dev/null
    if [[ $line =~ ^[A-Za-z0-9._:@+-]{1,128}$ ]]; then RECORD=$line; return 0; fi
    sleep 0.05
  done
  RECORD="0:0" # a claim never completed: its starter died before the payload could start
}

# done_line JOBDIR -> "<code> <message>" from the wrapper's lrms_done (empty file = 0), fails if absent.
done_line() {
  local f=$1/lrms_done line code msg
  [[ -f $f && ! -L $f ]] || return 1
  # The file is the job's (mapped account): never follow a link it planted, never block on a FIFO.
  IFS= read -r line < <(dd if="$f" iflag=nofollow,nonblock bs=4096 count=1 status=none 2>/dev/null) || true
  line=${line//$'\r'/}
  code=${line%% *}
  msg=${line#"$code"}; msg=${msg# }
  [[ -z $code ]] && code=0
  [[ $code =~ ^-?[0-9]+$ ]] || { code=-1; msg=$line; }
  printf '%s %s\n' "$code" "$msg"
}

# one_line TEXT -> TEXT with newlines and tabs replaced by blanks (poll output is line based).
one_line() { local s=${1//$'\n'/ }; printf '%s' "${s//$'\t'/ }"; }

# in_cgroup REL COUNT TRIES -> succeeds once COUNT lines of /proc/self/cgroup end in ":REL"
# (the JEM placed this process in every hierarchy), checking every 0.05 s up to TRIES times.
in_cgroup() {
  local i m t
  for ((i = 0; i < $3; i++)); do
    CG_TEXT=""
    IFS= read -r -d '' CG_TEXT </proc/self/cgroup
    m=0 t=$CG_TEXT
    while [[ $t == *":$1"$'\n'* ]]; do m=$((m + 1)); t=${t#*":$1"$'\n'}; done
    (( m >= $2 )) && return 0
    sleep 0.05
  done
  return 1
}
