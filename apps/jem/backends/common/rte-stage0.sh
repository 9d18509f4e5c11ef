# Stage 0 of a job's runtime environments, ARC's contract: on the front end, before the batch
# script is made, each RTE is sourced with `0` and its options in one shell that holds the job's
# options as joboption_* variables (the `grami` file); what the RTEs leave in joboption_* (and
# RUNTIME_*) is what the job becomes. The JEM runs this text with `bash -c` as the job's account,
# in the session dir.
#
# argv: BATCH_ENV GRAMI, then per RTE: NAME PATH NPARAMS KEY=value... NOPTS OPTION...
# fd 1: the result, NUL-separated: `NAME=value` per variable, then `__jem_end`; or
#       `__jem_failed` NAME CODE when an RTE failed. Everything the RTEs print goes to stderr.
exec 3>&1 1>&2 </dev/null
source "$1" || exit 1
source "$2" || exit 1
shift 2
# ARC 6 RTEs (ENV/PROXY) read the job's credential as <controldir>/job.<id>.proxy.
if [[ -n ${JOB_CREDENTIAL_FILE:-} && -n $joboption_controldir && $joboption_gridid =~ ^[0-9a-f-]+$ ]]; then
  ln -sfn -- "$JOB_CREDENTIAL_FILE" "$joboption_controldir/job.$joboption_gridid.proxy" 2>/dev/null
fi
while (( $# >= 3 )); do
  __jem_name=$1 __jem_path=$2 __jem_n=$3
  shift 3
  # Parameters are plain assignments (never evaluated), made before the RTE runs, as ARC's params file.
  while (( __jem_n-- > 0 )); do printf -v "${1%%=*}" '%s' "${1#*=}"; shift; done
  __jem_n=$1
  shift
  __jem_opts=("${@:1:__jem_n}")
  shift "$__jem_n"
  source "$__jem_path" 0 "${__jem_opts[@]}"
  __jem_rc=$?
  if (( __jem_rc != 0 )); then
    printf '__jem_failed\0%s\0%s\0' "$__jem_name" "$__jem_rc" >&3
    exit 1
  fi
done
for __jem_v in "${!joboption_@}" "${!RUNTIME_@}"; do printf '%s=%s\0' "$__jem_v" "${!__jem_v}" >&3; done
printf '__jem_end\0' >&3
