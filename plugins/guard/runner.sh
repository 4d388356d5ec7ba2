# veglia core.guard: the watcher beside a job, with the monitors' guards (see docs/monitors.md).
#
# Uploaded beside the job script as _veglia_guard.sh and read by the watcher's own shell
# (start.sh starts it). Every interval it reads the daemon's heartbeat file, runs the guards
# that act always, or all of them while the daemon is away, and when one says stop writes
# _veglia_guard.json, stops the job's process group and asks the batch system to end the job.
# It waits on the pipe from the job's shell: its end (the job over, or its shell killed)
# wakes it at once, and it stands down.

# Epoch seconds in _veglia_guard_now.
_veglia_guard_clock() {
    printf -v _veglia_guard_now '%(%s)T' -1
}

# A JSON string of $1 in _veglia_guard_js.
_veglia_guard_json() {
    local s=${1//\\/\\\\}
    s=${s//\"/\\\"}
    s=${s//$'\n'/\\n}
    s=${s//$'\t'/\\t}
    s=${s//[$'\001'-$'\037']/ }
    _veglia_guard_js="\"$s\""
}

# A line for _veglia_guard.log.
_veglia_guard_log() {
    local when
    printf -v when '%(%Y-%m-%dT%H:%M:%S%z)T' -1
    printf '%s %s\n' "$when" "$1" >>"$_veglia_guard_dir/_veglia_guard.log"
}

# When the daemon was last heard (the heartbeat's mtime) in _veglia_guard_heard, empty when
# never; _veglia_guard_away 1 when not heard for longer than away_after.
_veglia_guard_heartbeat() {
    _veglia_guard_heard=
    if [[ -e $VEGLIA_GUARD_HEARTBEAT ]]; then
        _veglia_guard_heard=$(stat -L -c %Y -- "$VEGLIA_GUARD_HEARTBEAT" 2>/dev/null </dev/null)
    fi
    if [[ -n $_veglia_guard_heard ]] && ((_veglia_guard_now - _veglia_guard_heard <= _veglia_guard_away_after)); then
        _veglia_guard_away=0
    else
        _veglia_guard_away=1
    fi
}

# The process group of pid $1 in _veglia_guard_pgid (empty when it is gone).
_veglia_guard_pgid_of() {
    _veglia_guard_pgid=
    local stat
    read -r stat 2>/dev/null <"/proc/$1/stat" || return 0
    stat=${stat##*) }
    read -r _ _ _veglia_guard_pgid _ <<<"$stat"
}

# The pids under $1 (its whole tree) in _veglia_guard_tree.
_veglia_guard_tree_of() {
    local f stat pid ppid
    local -A children=()
    for f in /proc/[0-9]*/stat; do
        read -r stat 2>/dev/null <"$f" || continue
        pid=${stat%% *}
        stat=${stat##*) }
        read -r _ ppid _ <<<"$stat"
        children[$ppid]+=" $pid"
    done
    local -a todo=("$1")
    _veglia_guard_tree=()
    while ((${#todo[@]})); do
        pid=${todo[0]}
        todo=("${todo[@]:1}")
        _veglia_guard_tree+=("$pid")
        # shellcheck disable=SC2206
        todo+=(${children[$pid]-})
    done
}

# Write the record, stop the job, ask the scheduler: $1 guard index, $2 the guard's output.
_veglia_guard_stop_job() {
    local i=$1 out=${2#"${2%%[![:space:]]*}"} reason heard=null away=false tmp record
    reason=${out%%$'\n'*}
    [[ -n $_veglia_guard_heard ]] && heard=$_veglia_guard_heard
    ((_veglia_guard_away)) && away=true
    record='{"version": 1'
    _veglia_guard_json "${_veglia_guard_names[i]}" && record+=", \"monitor\": $_veglia_guard_js"
    _veglia_guard_json "${_veglia_guard_eps[i]}" && record+=", \"entry_point\": $_veglia_guard_js"
    _veglia_guard_json "$reason" && record+=", \"message\": $_veglia_guard_js"
    record+=", \"at\": $_veglia_guard_now"
    _veglia_guard_json "${out%$'\n'}" && record+=", \"evidence\": $_veglia_guard_js"
    record+=", \"daemon_heard\": $heard, \"daemon_away\": $away}"
    tmp=$_veglia_guard_dir/_veglia_guard.json.tmp
    printf '%s\n' "$record" >"$tmp" && mv -f -- "$tmp" "$_veglia_guard_dir/_veglia_guard.json" </dev/null
    _veglia_guard_log "guard ${_veglia_guard_names[i]} stopped the job (daemon away: $away): $reason"
    # TERM reaches this watcher too: it has more to do.
    trap '' TERM HUP INT
    _veglia_guard_pgid_of "$_veglia_guard_job"
    local group=
    if [[ -n $_veglia_guard_pgid && $_veglia_guard_pgid == "$_veglia_guard_job" ]]; then
        group=$_veglia_guard_pgid
        kill -TERM -- "-$group" 2>/dev/null
    else
        # The job's shell leads no group of its own: its tree only, never a stranger's group.
        _veglia_guard_tree_of "$_veglia_guard_job"
        kill -TERM -- "${_veglia_guard_tree[@]}" 2>/dev/null
    fi
    if [[ -n ${SLURM_JOB_ID-} ]] && command -v scancel >/dev/null; then
        scancel "$SLURM_JOB_ID" </dev/null >/dev/null 2>&1
    elif [[ -n ${PBS_JOBID-} ]] && command -v qdel >/dev/null; then
        qdel "$PBS_JOBID" </dev/null >/dev/null 2>&1
    elif [[ -n ${LSB_JOBID-} ]] && command -v bkill >/dev/null; then
        bkill "$LSB_JOBID" </dev/null >/dev/null 2>&1
    fi
    # Until the job's shell closes the pipe (its commands over, it waits for this watcher in
    # its `after`) or is gone; a job still running after the grace time gets KILL.
    local waited=0 line status
    while ((waited < _veglia_guard_grace * 10)); do
        [[ -e /proc/$_veglia_guard_job ]] || return 0
        IFS= read -r -t 0.1 line
        status=$?
        ((status > 128)) || return 0
        waited=$((waited + 1))
    done
    _veglia_guard_log "the job outlived TERM by ${_veglia_guard_grace} s: KILL"
    if [[ -n $group ]]; then
        kill -KILL -- "-$group" 2>/dev/null
    else
        _veglia_guard_tree_of "$_veglia_guard_job"
        kill -KILL -- "${_veglia_guard_tree[@]}" 2>/dev/null
    fi
}

# Define guard function $1 from its source; a source that does not parse disables it.
_veglia_guard_define() {
    local err
    if ! err=$(eval "_veglia_guard_f$1() {
${_veglia_guard_src[$1]}
}" 2>&1); then
        return 1
    fi
    eval "_veglia_guard_f$1() {
${_veglia_guard_src[$1]}
}"
}

# Run guard $1 (index into the table); stop the job when it says so. Returns 1 when it did.
_veglia_guard_run() {
    local i=$1 out status err_file
    local state=$_veglia_guard_dir/_veglia_guard.state/$i
    err_file=$state.err
    [[ -d $state ]] || mkdir -p -- "$state" </dev/null
    # A subshell: a guard's bash error, `exit` or stray variables stay its own.
    out=$(
        cd -- "$_veglia_guard_dir" || exit 2
        export VEGLIA_GUARD_STATE=$state VEGLIA_GUARD_NOW=$_veglia_guard_now
        "_veglia_guard_f${_veglia_guard_fns[i]}" "${_veglia_guard_args[@]:_veglia_guard_arg0[i]:_veglia_guard_argn[i]}" </dev/null 2>"$err_file"
    )
    status=$?
    # A stop needs its reason: 1 with nothing said is a failure (`set -u` exits with 1), and a
    # guard in doubt must not kill.
    if ((status == 1)) && [[ -n ${out//[[:space:]]/} ]]; then
        _veglia_guard_stop_job "$i" "$out"
        return 1
    elif ((status != 0)); then
        local why=
        [[ -s $err_file ]] && { why=$(tail -n 3 -- "$err_file" </dev/null); why=${why//$'\n'/ | }; }
        _veglia_guard_log "guard ${_veglia_guard_names[i]} (${_veglia_guard_eps[i]}) failed with status $status and is off for this job: ${why:-no message}"
        _veglia_guard_on[i]=0
    fi
    return 0
}

# The loop: JOB_PID INTERVAL AWAY_AFTER HEARTBEAT GRACE, then per guard:
# NAME ENTRY_POINT FUNCTION ALWAYS(0/1) NARGS ARGS...
veglia_guard_loop() {
    # The job's shell options are not the watcher's: no -e, -u, -x; globbing on, for /proc.
    set +euxfo pipefail
    # A cancel signals the job's whole process group, this watcher too: it ends when the job
    # shell does (the pipe's end), saying it stood down.
    trap '' TERM HUP INT
    _veglia_guard_job=$1 _veglia_guard_interval=$2 _veglia_guard_away_after=$3
    export VEGLIA_GUARD_HEARTBEAT=$4
    _veglia_guard_grace=$5
    shift 5
    _veglia_guard_dir=$PWD
    _veglia_guard_clock
    # The job's start, as the watcher's first moments saw it (it slept an interval since).
    export VEGLIA_GUARD_STARTED=${_veglia_guard_started:-$_veglia_guard_now}
    _veglia_guard_names=() _veglia_guard_eps=() _veglia_guard_fns=() _veglia_guard_always=()
    _veglia_guard_arg0=() _veglia_guard_argn=() _veglia_guard_on=() _veglia_guard_args=("$@")
    local n=0 at=0 i
    while ((at < $#)); do
        _veglia_guard_names[n]=${_veglia_guard_args[at]}
        _veglia_guard_eps[n]=${_veglia_guard_args[at + 1]}
        _veglia_guard_fns[n]=${_veglia_guard_args[at + 2]}
        _veglia_guard_always[n]=${_veglia_guard_args[at + 3]}
        _veglia_guard_argn[n]=${_veglia_guard_args[at + 4]}
        _veglia_guard_arg0[n]=$((at + 5))
        _veglia_guard_on[n]=1
        at=$((at + 5 + _veglia_guard_argn[n]))
        n=$((n + 1))
    done
    declare -A defined=()
    for ((i = 0; i < n; i++)); do
        local fn=${_veglia_guard_fns[i]}
        if [[ -z ${defined[$fn]-} ]]; then
            if _veglia_guard_define "$fn"; then defined[$fn]=ok; else defined[$fn]=bad; fi
        fi
        if [[ ${defined[$fn]} == bad ]]; then
            _veglia_guard_log "guard ${_veglia_guard_names[i]} (${_veglia_guard_eps[i]}) failed and is off for this job: its shell text does not parse"
            _veglia_guard_on[i]=0
        fi
    done
    local line status
    while :; do
        # The job shell gone without closing the pipe (killed with its children spared).
        [[ -e /proc/$_veglia_guard_job ]] || break
        _veglia_guard_clock
        _veglia_guard_heartbeat
        for ((i = 0; i < n; i++)); do
            ((_veglia_guard_on[i])) || continue
            ((_veglia_guard_always[i] || _veglia_guard_away)) || continue
            _veglia_guard_run "$i" || return 0
        done
        IFS= read -r -t "$_veglia_guard_interval" line
        status=$?
        ((status > 128)) || break # not a timeout: the job's shell closed the pipe
    done
    _veglia_guard_clock
    _veglia_guard_heartbeat
    local heard=never
    [[ -n $_veglia_guard_heard ]] && printf -v heard '%(%Y-%m-%dT%H:%M:%S%z)T' "$_veglia_guard_heard"
    _veglia_guard_log "the job ended without a guard acting; the watcher stood down (daemon last heard: $heard)"
}
