#!/bin/bash
# Job wrapper body. The JEM writes <jobdir>/job.sh = a header of single-quoted settings
# (JEM_JOB_ID, JEM_SESSION_DIR, JEM_JOB_DIR, JEM_DIAG_FILE, JEM_DONE_FILE, JEM_EVENT_FILE, JEM_EXECUTABLE,
# JEM_ARGS=(), JEM_STDIN/STDOUT/STDERR, JEM_ENV=(NAME=value ...), JEM_RTE_NAMES=(),
# JEM_RTE_PATHS=(), JEM_RTE_OPTS_<i>=(), JEM_RTE_PARAMS_<i>=(KEY=value ...), JEM_EXEC_INPUTS=(),
# JEM_CREDENTIAL_FILE, JEM_TOKEN_FILE, JEM_LOCAL_SCRATCH) followed by
# this file. Back ends run it as is (fork) or inline it after their directives (slurm).
#
# It runs the executable in the session dir with the user's environment and RTE stages 1/2,
# measures it, and writes <jobdir>/diag and, last, <jobdir>/lrms_done = "<exitcode> <message>".
# Values are never eval'ed: arrays are expanded as "${X[@]}", variables exported as "NAME=value".
# No `set -e`/`-u`: RTE scripts are sourced into this shell and may rely on lax defaults.

# Nothing shared (lrms.sharedSession: false; the header then sets JEM_NODE_URL, JEM_NODE_CA,
# JEM_NODE_CAP, JEM_NODE_SCRATCH, none exported): the job works in a private node-local dir,
# `work/` for the session and `batch/` for what would be the batch dir, fetches its inputs from the
# CE and sends outputs, diag and lrms_done back (remote.sh-style helpers below, curl only). The
# capability goes to curl in a 0600 config file, never on a command line.
__jem_remote=""
if [[ -n ${JEM_NODE_URL:-} ]]; then
  __jem_remote=$(mktemp -d "${JEM_NODE_SCRATCH:-/tmp}/ce-$JEM_JOB_ID.XXXXXX") || { echo "jem-wrapper: cannot create a scratch dir in $JEM_NODE_SCRATCH" >&2; exit 1; }
  mkdir -m 0700 -- "$__jem_remote/work" "$__jem_remote/batch" || exit 1
  exec >>"$__jem_remote/batch/comment" 2>&1
  (umask 077; printf '%s' "$JEM_NODE_CA" >"$__jem_remote/batch/ca.pem"; printf 'header = "Authorization: Bearer %s"\n' "$JEM_NODE_CAP" >"$__jem_remote/batch/curl.cfg")
  unset JEM_NODE_CAP JEM_NODE_CA
  JEM_SESSION_DIR=$__jem_remote/work
  JEM_JOB_DIR=$__jem_remote/batch
  JEM_DIAG_FILE=$__jem_remote/batch/diag
  JEM_DONE_FILE=$__jem_remote/batch/lrms_done
  JEM_EVENT_FILE=""
  JEM_CREDENTIAL_FILE=""
fi
__jem_in_bytes=0 __jem_in_ms=0 __jem_out_bytes=0 __jem_out_ms=0

# Builtins instead of date/hostname: every fork counts when a node runs many short jobs.
__jem_now() { TZ=UTC0 printf -v "$1" '%(%Y%m%d%H%M%S)TZ' -1; } # VAR <- now, YYYYMMDDHHMMSSZ
__jem_start_s=${EPOCHSECONDS:-$(date +%s)}
__jem_now __jem_start
__jem_node=${HOSTNAME:-$(hostname 2>/dev/null || echo unknown)}
__jem_rtes=""
for __jem_n in "${JEM_RTE_NAMES[@]}"; do __jem_rtes+="$__jem_n;"; done
# A fixed name (no pid): the file is left in place rather than removed by an `rm` per job, and
# emptied at the start so a previous run's figures are never read as this run's.
__jem_timefile="$JEM_JOB_DIR/.time"
__jem_done=""
__jem_signal=""
__jem_pending=""
__jem_pid=""

__jem_log() { printf 'jem-wrapper: %s\n' "$*" >&2; }

# Atomic replace, for lrms_done only: the JEM's scan and the poll scripts read it at any time and
# an empty one means exit code 0. diag is written in place (one write, no `mv` per write): it is
# read for the job's figures only once lrms_done is there, which is renamed in after it.
__jem_write() { # FILE CONTENT
  local tmp="$1.tmp.$$"
  printf '%s' "$2" >"$tmp" && mv -f -- "$tmp" "$1"
}

__jem_secs() { # VAR 1m2.500s -> VAR=62.50 (rounded; bash arithmetic, no awk)
  local t=$2 m s f
  m=${t%%m*}; s=${t#*m}; s=${s%s}
  f=${s#*.}; [[ $s == *.* ]] || f=""
  f=${f}000; f=${f:0:3}
  local cs=$(( ((10#$m * 60 + 10#${s%%.*}) * 1000 + 10#$f + 5) / 10 ))
  printf -v "$1" '%d.%02d' $((cs / 100)) $((cs % 100))
}

__jem_diag() { # [extra lines]
  local d
  d="runtimeenvironments=$__jem_rtes"$'\n'"nodename=$__jem_node"$'\n'"LRMSStartTime=$__jem_start"$'\n'
  [[ -n $SLURM_JOB_ID ]] && d+="Processors=${SLURM_NPROCS:-${SLURM_CPUS_ON_NODE:-1}}"$'\n'
  printf '%s' "$d$1" >"$JEM_DIAG_FILE"
}

__jem_oom() { # true when the job's cgroup (JOB_OOM_FILE, fork) counted an OOM kill
  local k v
  [[ -n ${JOB_OOM_FILE:-} && -r $JOB_OOM_FILE ]] || return 1
  while read -r k v; do [[ $k == oom_kill && $v =~ ^[0-9]+$ ]] && (( v > 0 )) && return 0; done <"$JOB_OOM_FILE"
  return 1
}

# Node-local scratch (RTE stage 0 set RUNTIME_LOCAL_SCRATCH_DIR): the session's files go back.
__jem_scratch=""
__jem_scratch_back() {
  [[ -n $__jem_scratch ]] || return 0
  local d=$__jem_scratch f ok=0
  __jem_scratch=""
  cd -- "$JEM_SESSION_DIR" || return 1
  for f in "$d"/* "$d"/.[!.]* "$d"/..?*; do
    [[ -e $f || -L $f ]] || continue
    mv -f -- "$f" "$JEM_SESSION_DIR/" || ok=1
  done
  rm -rf -- "$d"
  return $ok
}

# --- nothing shared: transfers with the CE (the gateway's node route) ---
__jem_curl() {
  curl -sS --fail --retry 3 --retry-delay 2 --connect-timeout 30 --proto =https \
    --cacert "$__jem_remote/batch/ca.pem" -K "$__jem_remote/batch/curl.cfg" "$@"
}
__jem_urlenc() { # REPLY <- PATH percent-encoded byte by byte (slashes kept)
  local LC_ALL=C s=$1 c i out=""
  for ((i = 0; i < ${#s}; i++)); do
    c=${s:i:1}
    case $c in [A-Za-z0-9._~/-]) out+=$c ;; *) printf -v c '%%%02X' "'$c"; out+=$c ;; esac
  done
  REPLY=$out
}
__jem_add_xfer() { # DIRECTION "<bytes> <seconds>" from curl -w
  local b=${2%% *} t=${2#* } sec frac ms
  [[ $b =~ ^[0-9]+$ ]] || b=0
  if [[ $t =~ ^([0-9]+)(\.([0-9]*))?$ ]]; then sec=${BASH_REMATCH[1]}; frac=${BASH_REMATCH[3]}000; else sec=0 frac=000; fi
  ms=$(( 10#$sec * 1000 + 10#${frac:0:3} ))
  if [[ $1 == in ]]; then (( __jem_in_bytes += b, __jem_in_ms += ms )); else (( __jem_out_bytes += b, __jem_out_ms += ms )); fi
}
__jem_fetch_inputs() {
  local list=$JEM_JOB_DIR/inputs f w
  __jem_curl -o "$list" "$JEM_NODE_URL/files" || return 1
  while IFS= read -r -d '' f; do
    [[ $f == */* ]] && { mkdir -p -- "$JEM_SESSION_DIR/${f%/*}" || return 1; }
    __jem_urlenc "$f"
    w=$(__jem_curl -o "$JEM_SESSION_DIR/$f" -w '%{size_download} %{time_total}' "$JEM_NODE_URL/session/$REPLY") || return 1
    __jem_add_xfer in "$w"
  done <"$list"
  # What is newer than this when the job ends is sent back.
  : >"$JEM_JOB_DIR/inputs.done"
}
__jem_send_outputs() {
  local f w ok=0
  [[ -e $JEM_JOB_DIR/inputs.done ]] || return 0
  while IFS= read -r -d '' f; do
    f=${f#./}
    __jem_urlenc "$f"
    if w=$(__jem_curl -T "$JEM_SESSION_DIR/$f" -o /dev/null -w '%{size_upload} %{time_total}' "$JEM_NODE_URL/session/$REPLY"); then
      __jem_add_xfer out "$w"
    else
      __jem_log "could not send $f to the CE"; ok=1
    fi
  done < <(cd -- "$JEM_SESSION_DIR" && find . -type f -newer "$JEM_JOB_DIR/inputs.done" -print0)
  return $ok
}
__jem_send_fact() { # NAME
  [[ -f $JEM_JOB_DIR/$1 ]] && __jem_curl -T "$JEM_JOB_DIR/$1" -o /dev/null "$JEM_NODE_URL/batch/$1"
}

__jem_finish() { # CODE MESSAGE
  local code=$1 msg=$2 end_s end extra user kernel line
  __jem_done=1
  if ! __jem_scratch_back; then
    (( code == 0 )) && code=1
    msg="Could not move the job's files back from local scratch${msg:+; $msg}"
  fi
  if [[ -n $__jem_remote ]] && ! __jem_send_outputs; then
    (( code == 0 )) && code=1
    msg="Could not send the job's outputs to the CE${msg:+; $msg}"
  fi
  end_s=${EPOCHSECONDS:-$(date +%s)}
  extra="WallTime=$((end_s - __jem_start_s))s"$'\n'
  if [[ -s $__jem_timefile ]]; then
    while IFS= read -r line; do
      [[ $line == *=* ]] && extra+="$line"$'\n' # skips GNU time's "Command exited with ..." lines
    done <"$__jem_timefile"
  else
    # No /usr/bin/time (or it was killed): children's CPU times from the `times` builtin.
    # `times` must run in this shell (a subshell has no children of its own), so via a file.
    times >"$__jem_timefile"
    { read -r _ _; read -r user kernel; } <"$__jem_timefile"
    if [[ $user =~ ^[0-9]+m[0-9]+(\.[0-9]+)?s$ && $kernel =~ ^[0-9]+m[0-9]+(\.[0-9]+)?s$ ]]; then
      __jem_secs user "$user"; __jem_secs kernel "$kernel"
      extra+="UserTime=${user}s"$'\n'"KernelTime=${kernel}s"$'\n'
    fi
  fi
  __jem_now end
  [[ -n $__jem_remote ]] &&
    extra+="NodeInputBytes=$__jem_in_bytes"$'\n'"NodeInputMs=$__jem_in_ms"$'\n'"NodeOutputBytes=$__jem_out_bytes"$'\n'"NodeOutputMs=$__jem_out_ms"$'\n'
  extra+="LRMSEndTime=$end"$'\n'"exitcode=$code"$'\n'
  # The kernel killed a process for the job's memory limit (fork's cgroup counts it): say so.
  (( code != 0 )) && __jem_oom && msg="Memory exceeded: the job used more memory than it asked for"
  __jem_diag "$extra"
  __jem_write "$JEM_DONE_FILE" "$code $msg"$'\n'
  # Ring the JEM's doorbell (best effort: the JEM's periodic scan finds lrms_done anyway).
  [[ -n ${JEM_EVENT_FILE:-} ]] && : >"$JEM_EVENT_FILE" 2>/dev/null
  if [[ -n $__jem_remote ]]; then
    # lrms_done last (the gateway rings the doorbell for it); the scratch goes whatever happened.
    __jem_send_fact comment; __jem_send_fact diag; __jem_send_fact lrms_done || __jem_log "could not send lrms_done to the CE"
    cd / && rm -rf -- "$__jem_remote"
  fi
  exit "$code"
}

# An RTE that calls `exit` must not leave the job without lrms_done.
trap 'rc=$?; [[ -z $__jem_done ]] && __jem_finish "$rc" "Job wrapper exited early"' EXIT
__jem_on_signal() {
  __jem_signal=$1
  __jem_pending=1
  [[ -n $__jem_pid ]] && kill "-$1" "$__jem_pid" 2>/dev/null
}
trap '__jem_on_signal TERM' TERM
trap '__jem_on_signal INT' INT

# Files the job creates stay readable and writable for the CE's group (mapped accounts: the
# session dir is <account>:<CE group> 2770) and for nobody else.
umask 0007
[[ -s $__jem_timefile ]] && : >"$__jem_timefile"
__jem_diag ""
cd -- "$JEM_SESSION_DIR" || __jem_finish 1 "Cannot enter session directory"
if [[ -n $__jem_remote ]] && ! __jem_fetch_inputs; then
  __jem_finish 1 "Could not fetch the job's input files from the CE"
fi
: "${PATH:=/usr/local/bin:/usr/bin:/bin}"
export PATH

for __jem_kv in "${JEM_ENV[@]}"; do export "$__jem_kv"; done
export RUNTIME_JOB_DIR="$JEM_SESSION_DIR"
export RUNTIME_JOB_DIAG="$JEM_DIAG_FILE"
export RUNTIME_JOB_STDIN="${JEM_STDIN:-/dev/null}"
export RUNTIME_JOB_STDOUT="${JEM_STDOUT:-/dev/null}"
export RUNTIME_JOB_STDERR="${JEM_STDERR:-/dev/null}"
if [[ -n $JEM_CREDENTIAL_FILE && -r $JEM_CREDENTIAL_FILE ]]; then export X509_USER_PROXY="$JEM_CREDENTIAL_FILE"; fi

for __jem_f in "${JEM_EXEC_INPUTS[@]}"; do chmod +x -- "$__jem_f" 2>/dev/null; done

# Node-local scratch: `$VAR`/`${VAR}` (+ `/rest`) is expanded by name, never eval'ed; the session's
# files move to <scratch>/<job id> and the job runs there (ARC's RUNTIME_LOCAL_SCRATCH_DIR).
if [[ -n ${JEM_LOCAL_SCRATCH:-} ]]; then
  __jem_base=$JEM_LOCAL_SCRATCH
  if [[ $__jem_base =~ ^\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?(/.*)?$ ]]; then
    __jem_var=${BASH_REMATCH[1]}
    __jem_base="${!__jem_var}${BASH_REMATCH[2]}"
  fi
  if [[ $__jem_base == /* && -d $__jem_base ]]; then
    __jem_d="$__jem_base/$JEM_JOB_ID"
    rm -rf -- "$__jem_d"
    mkdir -p -m 0700 -- "$__jem_d" || __jem_finish 1 "Cannot create local scratch directory $__jem_d"
    __jem_scratch=$__jem_d
    for __jem_f in ./* ./.[!.]* ./..?*; do
      [[ -e $__jem_f || -L $__jem_f ]] || continue
      # The token stays in the session, where the JEM replaces it on renewal (BEARER_TOKEN_FILE).
      [[ -n ${JEM_TOKEN_FILE:-} && $JEM_SESSION_DIR/${__jem_f#./} == "$JEM_TOKEN_FILE" ]] && continue
      mv -f -- "$__jem_f" "$__jem_d/" || __jem_finish 1 "Cannot move the session to local scratch $__jem_d"
    done
    cd -- "$__jem_d" || __jem_finish 1 "Cannot enter local scratch $__jem_d"
    export RUNTIME_JOB_DIR="$__jem_d"
  else
    __jem_log "local scratch $JEM_LOCAL_SCRATCH is not a directory on this node; the job runs in the session directory"
  fi
fi

# An RTE's site parameters (ceadm rte params), set as plain variables before each of its stages.
__jem_params() { # INDEX
  local -n __jem_pl="JEM_RTE_PARAMS_$1"
  local __jem_pkv
  for __jem_pkv in "${__jem_pl[@]}"; do printf -v "${__jem_pkv%%=*}" '%s' "${__jem_pkv#*=}"; done
}

# RTE stage 1: sourced, so RTEs can export variables for the executable.
for __jem_i in "${!JEM_RTE_PATHS[@]}"; do
  __jem_params "$__jem_i"
  declare -n __jem_opts="JEM_RTE_OPTS_$__jem_i"
  if ! source "${JEM_RTE_PATHS[$__jem_i]}" 1 "${__jem_opts[@]}"; then
    __jem_finish 1 "Runtime environment ${JEM_RTE_NAMES[$__jem_i]} failed in stage 1"
  fi
  unset -n __jem_opts
done

__jem_in=${JEM_STDIN:-/dev/null}
__jem_out=${JEM_STDOUT:-/dev/null}
__jem_err=${JEM_STDERR:-/dev/null}
for __jem_f in "$__jem_out" "$__jem_err"; do
  [[ $__jem_f == */* && $__jem_f != /dev/null ]] && mkdir -p -- "${__jem_f%/*}"
done
# With pre/post-executables everything appends to stdout/stderr, emptied once here, so what the
# pre-executables print is not lost when the executable starts.
__jem_append=""
if (( ${#JEM_PRE_CODES[@]} + ${#JEM_POST_CODES[@]} > 0 )); then
  __jem_append=1
  for __jem_f in "$__jem_out" "$__jem_err"; do [[ $__jem_f != /dev/null ]] && : >"$__jem_f"; done
fi

# exec: the background subshell becomes the command, so $! is the process we signal and wait for.
__jem_run() {
  if [[ -n $__jem_append ]]; then
    if [[ $__jem_err == "$__jem_out" && $__jem_out != /dev/null ]]; then
      exec "$@" <"$__jem_in" >>"$__jem_out" 2>&1
    else
      exec "$@" <"$__jem_in" >>"$__jem_out" 2>>"$__jem_err"
    fi
  elif [[ $__jem_err == "$__jem_out" && $__jem_out != /dev/null ]]; then
    exec "$@" <"$__jem_in" >"$__jem_out" 2>&1
  else
    exec "$@" <"$__jem_in" >"$__jem_out" 2>"$__jem_err"
  fi
}

# Waits for the child $__jem_pid into __jem_code; a signal to the wrapper is passed on to it.
__jem_wait() {
  while :; do
    wait "$__jem_pid"
    __jem_code=$?
    [[ -n $__jem_pending ]] || break
    # A signal interrupted wait(): wait again for the real status, but only while the child
    # exists (bash 5.2 answers -1 for a child it already reaped).
    __jem_pending=""
    kill -0 "$__jem_pid" 2>/dev/null || break
  done
  (( __jem_code >= 0 && __jem_code <= 255 )) || __jem_code=$((128 + 15))
  __jem_pid=""
}

# `$VAR/rest` executables (e.g. set by an RTE) are expanded by name, never eval'ed.
__jem_expand() { # VAR PATH
  local __jem_v=$2
  if [[ $__jem_v =~ ^\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?(/.*)?$ ]]; then
    local __jem_name=${BASH_REMATCH[1]} __jem_rest=${BASH_REMATCH[2]}
    __jem_v="${!__jem_name}$__jem_rest"
  fi
  [[ $__jem_v == ./* && -f $__jem_v && ! -x $__jem_v ]] && chmod +x -- "$__jem_v" 2>/dev/null
  printf -v "$1" '%s' "$__jem_v"
}

# ADL Pre/PostExecutable (JEM_PRE_<i>/JEM_POST_<i> = (executable args...), expected codes in
# JEM_PRE_CODES/JEM_POST_CODES): in order, in the session dir, stdin /dev/null. The first that is
# missing or ends with another code than its expected one stops the list: __jem_aux_msg says which
# and __jem_aux_rc is its status. The job's exit code is that status, unless it would read as the
# executable's success code.
__jem_aux_msg=""
__jem_aux() { # PRE|POST Label
  local -n __jem_codes="JEM_$1_CODES"
  local __jem_k __jem_x
  for __jem_k in "${!__jem_codes[@]}"; do
    local -n __jem_cmd="JEM_$1_$__jem_k"
    __jem_expand __jem_x "${__jem_cmd[0]}"
    if [[ $__jem_x == */* && ! -e $__jem_x ]]; then
      __jem_aux_rc=127 __jem_aux_msg="$2 $((__jem_k + 1)) (${__jem_cmd[0]}) not found"
      return 1
    fi
    ( __jem_in=/dev/null; __jem_run "$__jem_x" "${__jem_cmd[@]:1}" ) &
    __jem_pid=$!
    __jem_wait
    [[ -n $__jem_signal ]] && __jem_finish "$__jem_code" "Job was terminated by SIG$__jem_signal in $2 $((__jem_k + 1))"
    if (( __jem_code != __jem_codes[__jem_k] )); then
      __jem_aux_rc=$__jem_code
      __jem_aux_msg="$2 $((__jem_k + 1)) (${__jem_cmd[0]}) exited with code $__jem_code, expected ${__jem_codes[__jem_k]}"
      return 1
    fi
    unset -n __jem_cmd
  done
  return 0
}
__jem_aux_fail() {
  local c=$__jem_aux_rc
  (( c == JEM_SUCCESS_CODE )) && { c=1; (( JEM_SUCCESS_CODE == 1 )) && c=2; }
  __jem_finish "$c" "$__jem_aux_msg"
}

# Cancelled (time limit, scancel) before the executable even started.
[[ -n $__jem_signal ]] && __jem_finish 143 "Job was terminated by SIG$__jem_signal before it started"

__jem_aux PRE Pre-executable || __jem_aux_fail

if [[ -z $JEM_EXECUTABLE ]]; then
  __jem_log "no executable; nothing to run"
  __jem_aux POST Post-executable || __jem_aux_fail
  __jem_finish 0 ""
fi

__jem_expand __jem_exe "$JEM_EXECUTABLE"
if [[ $__jem_exe == */* && ! -e $__jem_exe ]]; then
  __jem_finish 127 "Executable $JEM_EXECUTABLE not found"
fi
[[ -r $__jem_in ]] || __jem_finish 1 "Standard input file $JEM_STDIN not found"

# Background + wait so a TERM (cancel, time limit) runs the trap at once instead of after the child.
# JEM_TIME_BIN (tests) overrides the GNU time path; empty = measure without it.
__jem_time=${JEM_TIME_BIN-/usr/bin/time}
if [[ -n $__jem_time && -x $__jem_time ]]; then
  __jem_run "$__jem_time" -o "$__jem_timefile" \
    -f $'UserTime=%Us\nKernelTime=%Ss\nMaxResidentMemory=%MkB\nCPUUsage=%P\nMajorPageFaults=%F\nMinorPageFaults=%R\nForcedSwitches=%c\nWaitSwitches=%w\nInputs=%I\nOutputs=%O' \
    -- "$__jem_exe" "${JEM_ARGS[@]}" &
else
  __jem_run "$__jem_exe" "${JEM_ARGS[@]}" &
fi
__jem_pid=$!
__jem_wait
__jem_main_code=$__jem_code

if [[ -n $__jem_signal ]]; then
  __jem_finish "$__jem_code" "Job was terminated by SIG$__jem_signal"
fi

# Post-executables run whatever the executable's code; one that fails decides the job's end only
# when the executable succeeded (otherwise the executable's failure is the one to report).
if ! __jem_aux POST Post-executable; then
  (( __jem_main_code == JEM_SUCCESS_CODE )) && __jem_aux_fail
  __jem_log "$__jem_aux_msg"
fi
__jem_code=$__jem_main_code

# RTE stage 2 runs after the executable whatever its exit code.
for __jem_i in "${!JEM_RTE_PATHS[@]}"; do
  __jem_params "$__jem_i"
  declare -n __jem_opts="JEM_RTE_OPTS_$__jem_i"
  if ! source "${JEM_RTE_PATHS[$__jem_i]}" 2 "${__jem_opts[@]}"; then
    (( __jem_code == 0 )) && __jem_finish 1 "Runtime environment ${JEM_RTE_NAMES[$__jem_i]} failed in stage 2"
    __jem_log "runtime environment ${JEM_RTE_NAMES[$__jem_i]} failed in stage 2"
  fi
  unset -n __jem_opts
done

# The batch system may signal the executable and the wrapper together; when the child's death is
# reaped before this shell runs its trap, the signal still shows in the exit status (128+N).
if (( __jem_code > 128 && __jem_code < 128 + 65 )); then
  __jem_sig=$(kill -l $((__jem_code - 128)) 2>/dev/null || echo $((__jem_code - 128)))
  # SIGXCPU: the CPU time limit (RLIMIT_CPU) was reached.
  [[ $__jem_sig == XCPU ]] && __jem_finish "$__jem_code" "CPU time exceeded: the job used all the CPU time it asked for (SIGXCPU)"
  __jem_finish "$__jem_code" "Job was terminated by SIG$__jem_sig"
fi
__jem_finish "$__jem_code" ""
