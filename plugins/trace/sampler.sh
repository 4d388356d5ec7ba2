# veglia core.trace: a job's trace, sampled beside it by the job script's own shell.
#
# Uploaded beside the job script as _veglia_trace.sh and read by the sampler's own shell
# (start.sh, in the job script, starts it): the job's shell never holds these functions.
# The sampler is a process substitution reading a pipe from the main shell: its `read -t`
# is its sleep, and the end of the pipe (the main shell closed it, or died) wakes it at once
# for the final sample. It writes _veglia_trace.json (Fusion's blocks: proc, cgroup, gpu,
# plus sampler) and appends to _veglia_trace.series in the work directory.
# The sampling path uses bash builtins only: a periodic sample may start `mv` (an atomic
# rename) and, where it is on PATH, one `nvidia-smi`; the final sample starts nothing when no
# periodic sample ran, so a short job pays no process at all.
#
# Two parts. Most of what the sampler costs a job that ends before its first sample is bash
# parsing and running functions, so the first part is all such a job needs (the loop, the
# process tree, the proc and sampler blocks), kept small. The second (cgroups, GPUs, the
# series, what earlier samples saw, rare cases) is read when a sample first needs it: at the
# first periodic sample, or before a final one that reads a batch job's cgroup. Sourced with
# _veglia_trace_all set, the file defines both at once.

# Epoch milliseconds in _veglia_trace_ms.
_veglia_trace_now() {
    if [[ -n ${EPOCHREALTIME-} ]]; then
        # Microseconds whatever the locale's decimal point.
        ((_veglia_trace_ms = 10#${EPOCHREALTIME//[!0-9]/} / 1000))
    else
        printf -v _veglia_trace_ms '%(%s)T000' -1
    fi
}

# ,"key":"string" into _veglia_trace_buf, JSON-escaped, when known.
_veglia_trace_ks() {
    [[ -n $2 ]] || return 0
    local s=${2//\\/\\\\}
    s=${s//\"/\\\"}
    s=${s//[$'\001'-$'\037']/ }
    _veglia_trace_buf+=",\"$1\":\"$s\""
}

# The second part of this file, once; false when it cannot be read. Through the descriptor
# opened at the start: the job may have removed the file since.
_veglia_trace_more() {
    [[ -n $_veglia_trace_loaded ]] && return 0
    _veglia_trace_all=1
    . /proc/self/fd/"$_veglia_trace_src" && _veglia_trace_loaded=1
}

# /proc/PID/stat's fields in _veglia_trace_stat, field N of proc(5) at N-1; false when the
# process is gone.
_veglia_trace_read_stat() {
    read -r -a _veglia_trace_stat 2>/dev/null </proc/"$1"/stat || return 1
    # A command name with a space in it is several words (and may hold ")").
    if [[ ${_veglia_trace_stat[1]} != *")" || "${_veglia_trace_stat[*]:2:8}" == *")"* ]]; then
        _veglia_trace_more && _veglia_trace_stat_after_name "$1"
    fi
}

# Where this kernel puts the fields of /proc/PID/status that _veglia_trace_proc reads, from
# one such file (the caller's lines), in _veglia_trace_at. First tried where kernels put
# them (17, 16, 15, 11 or 10 lines before VmPeak as kernels added some above it; VmSize,
# VmHWM and VmRSS 1, 4 and 5 lines below it; the context switches last, or before x86's
# two lines of shadow stack features), else looked for line by line, which would cost a
# short job's sampler about a tenth of its CPU.
_veglia_trace_status_at() {
    local i n=${#lines[@]}
    for i in 17 16 15 11 10; do [[ ${lines[i]} == VmPeak:* ]] && break; done
    for n in $((n - 2)) $((n - 4)); do [[ ${lines[n + 1]} == nonvoluntary_ctxt_switches:* ]] && break; done
    if [[ ${lines[i]} == VmPeak:* && ${lines[i + 1]} == VmSize:* && ${lines[i + 4]} == VmHWM:* &&
        ${lines[i + 5]} == VmRSS:* && ${lines[n]} == voluntary_ctxt_switches:* &&
        ${lines[n + 1]} == nonvoluntary_ctxt_switches:* ]]; then
        _veglia_trace_at=("$i" $((i + 1)) $((i + 4)) $((i + 5)) "$n" $((n + 1)))
    else
        _veglia_trace_more && _veglia_trace_status_search
    fi
}

# The job's process tree (the main shell and its descendants, not the sampler) in
# _veglia_trace_pids, and its usage now: _veglia_trace_ticks, _veglia_trace_rss,
# _veglia_trace_vmem (kB), _veglia_trace_io[6], context switches.
_veglia_trace_proc() {
    local i=0 pid f kids
    local -a lines seen
    _veglia_trace_pids=("$_veglia_trace_root")
    # No /proc/PID/task/TID/children (a kernel without CONFIG_PROC_CHILDREN): every
    # process's parent, read beforehand.
    [[ -n $_veglia_trace_children_files ]] || { _veglia_trace_more && _veglia_trace_tree_by_parent; }
    _veglia_trace_ticks=0 _veglia_trace_rss=0 _veglia_trace_vmem=0 _veglia_trace_vol=0 _veglia_trace_inv=0
    _veglia_trace_io=(0 0 0 0 0 0)
    while ((i < ${#_veglia_trace_pids[@]})); do
        pid=${_veglia_trace_pids[i++]}
        _veglia_trace_read_stat "$pid" || continue
        ((_veglia_trace_ticks += _veglia_trace_stat[13] + _veglia_trace_stat[14] + _veglia_trace_stat[15] + _veglia_trace_stat[16]))
        # The shell (the first) when no baseline was taken (see veglia_trace_loop).
        ((i == 1)) && [[ -z $_veglia_trace_ticks0 ]] && _veglia_trace_ticks0=$_veglia_trace_ticks
        # Its children: those of each of its threads (one, mostly).
        if [[ -n $_veglia_trace_children_files ]]; then
            kids=
            if ((_veglia_trace_stat[19] == 1)); then
                # One line without a newline: read says "end of file" and still reads it.
                read -r kids 2>/dev/null </proc/"$pid"/task/"$pid"/children
            else
                _veglia_trace_more && _veglia_trace_thread_children "$pid"
            fi
            for f in $kids; do ((f == _veglia_trace_self)) || _veglia_trace_pids+=("$f"); done
        fi
        # The whole file at once (mapfile: a `read` a line is ten times the CPU on a big
        # tree), its fields at the lines where this kernel puts them: VmPeak, VmSize, VmHWM,
        # VmRSS (kB), voluntary_ctxt_switches, nonvoluntary_ctxt_switches.
        mapfile -t lines 2>/dev/null </proc/"$pid"/status || continue
        [[ -n ${_veglia_trace_at[0]-} ]] || _veglia_trace_status_at
        f=("${lines[_veglia_trace_at[0]]}" "${lines[_veglia_trace_at[1]]}" "${lines[_veglia_trace_at[2]]}"
            "${lines[_veglia_trace_at[3]]}" "${lines[_veglia_trace_at[4]]}" "${lines[_veglia_trace_at[5]]}")
        if [[ ${f[0]} != VmPeak:* || ${f[5]} != nonvoluntary_ctxt_switches:* ]]; then
            # Elsewhere (a zombie has no Vm lines): looked for.
            f=("" "" "" "" "" "")
            _veglia_trace_more && _veglia_trace_status_fields
        fi
        f=("${f[@]//[!0-9]/}")
        ((_veglia_trace_rss += f[3], _veglia_trace_vmem += f[1]))
        ((f[2] > _veglia_trace_peak_rss)) && _veglia_trace_peak_rss=$((f[2]))
        ((f[0] > _veglia_trace_peak_vmem)) && _veglia_trace_peak_vmem=$((f[0]))
        # Its context switches, kept for the next sample as the process (pid and start time).
        if [[ -n ${f[5]} ]]; then
            ((_veglia_trace_vol += f[4], _veglia_trace_inv += f[5]))
            seen+=("$pid:${_veglia_trace_stat[21]}" "${f[4]}" "${f[5]}")
        fi
        mapfile -t -n 6 lines 2>/dev/null </proc/"$pid"/io || lines=()
        if ((${#lines[@]} == 6)); then
            # rchar, wchar, syscr, syscw, read_bytes, write_bytes, in this order.
            lines=("${lines[@]#*: }")
            ((i == 1 && ${#_veglia_trace_io0[@]} == 0)) && _veglia_trace_io0=("${lines[@]}")
            ((_veglia_trace_io[0] += lines[0], _veglia_trace_io[1] += lines[1], _veglia_trace_io[2] += lines[2]))
            ((_veglia_trace_io[3] += lines[3], _veglia_trace_io[4] += lines[4], _veglia_trace_io[5] += lines[5]))
        fi
    done
    # What earlier samples saw: the second part, read at the first periodic sample.
    [[ -n $_veglia_trace_late ]] && _veglia_trace_gone
    ((_veglia_trace_rss > _veglia_trace_peak_rss)) && _veglia_trace_peak_rss=$_veglia_trace_rss
    ((_veglia_trace_vmem > _veglia_trace_peak_vmem)) && _veglia_trace_peak_vmem=$_veglia_trace_vmem
    # The tree's CPU time can only grow: a process reparented away takes its time with it.
    ((_veglia_trace_ticks -= _veglia_trace_ticks0))
    ((_veglia_trace_ticks < _veglia_trace_ticks_max)) && _veglia_trace_ticks=$_veglia_trace_ticks_max
    _veglia_trace_ticks_max=$_veglia_trace_ticks
}

# The proc block, the first of _veglia_trace_out.
_veglia_trace_proc_block() {
    local realtime=$((_veglia_trace_ms - _veglia_trace_t0)) v
    # What the tree read and wrote since the start.
    local -a d=($((_veglia_trace_io[0] - _veglia_trace_io0[0])) $((_veglia_trace_io[1] - _veglia_trace_io0[1]))
        $((_veglia_trace_io[2] - _veglia_trace_io0[2])) $((_veglia_trace_io[3] - _veglia_trace_io0[3]))
        $((_veglia_trace_io[4] - _veglia_trace_io0[4])) $((_veglia_trace_io[5] - _veglia_trace_io0[5])))
    _veglia_trace_buf="\"realtime\":$realtime"
    # Percent of one core x10: CPU ms (10 a tick) * 1000 / elapsed ms.
    ((realtime > 0)) && _veglia_trace_buf+=",\"pct_cpu\":$((_veglia_trace_ticks * 10 * 1000 / realtime))"
    _veglia_trace_buf+=$_veglia_trace_node
    ((_veglia_trace_memtotal > 0)) && _veglia_trace_buf+=",\"pct_mem\":$((_veglia_trace_last_rss * 1000 / _veglia_trace_memtotal))"
    v=",\"rss\":$_veglia_trace_last_rss,\"vmem\":$_veglia_trace_last_vmem,\"peak_rss\":$_veglia_trace_peak_rss,\"peak_vmem\":$_veglia_trace_peak_vmem"
    v+=",\"rchar\":${d[0]},\"wchar\":${d[1]},\"syscr\":${d[2]},\"syscw\":${d[3]},\"read_bytes\":${d[4]},\"write_bytes\":${d[5]}"
    # Less than nothing (the main shell is gone): left out.
    ((d[0] < 0 || d[1] < 0 || d[2] < 0 || d[3] < 0 || d[4] < 0 || d[5] < 0)) && _veglia_trace_more && _veglia_trace_io_pairs
    _veglia_trace_out="\"proc\":{$_veglia_trace_buf$v,\"vol_ctxt\":$_veglia_trace_vol,\"inv_ctxt\":$_veglia_trace_inv}"
    _veglia_trace_sep=,
}

# Take a sample and write the files; $1: "periodic" or "final".
_veglia_trace_sample() {
    local kind=$1 final=false
    # A final sample with no periodic one before reads the cgroup only where it may be the
    # job's own (a batch system's job id is set): the direct scheduler's is the session's.
    if [[ -z $_veglia_trace_late && ($kind == periodic || -n ${SLURM_JOB_ID-}${PBS_JOBID-}${LSB_JOBID-}${JOB_ID-}) ]]; then
        _veglia_trace_more && _veglia_trace_late_init "$kind"
    fi
    _veglia_trace_now
    _veglia_trace_proc
    # The final sample sees the job over: what it used is the last reading while it ran.
    if [[ $kind == periodic || $_veglia_trace_samples == 0 ]]; then
        _veglia_trace_last_rss=$_veglia_trace_rss _veglia_trace_last_vmem=$_veglia_trace_vmem
    fi
    _veglia_trace_proc_block
    # The GPU reading, the cgroup and gpu blocks.
    [[ -n $_veglia_trace_late ]] && _veglia_trace_sample_more "$kind"
    [[ $kind == final ]] && final=true
    ((_veglia_trace_samples += 1))
    _veglia_trace_out+=",\"sampler\":{\"version\":1,\"interval\":$_veglia_trace_interval,\"samples\":$_veglia_trace_samples"
    _veglia_trace_out+=",\"start\":$_veglia_trace_t0,\"updated\":$_veglia_trace_ms,\"final\":$final}"
    if [[ $kind == final && $_veglia_trace_periodic == 0 ]]; then
        # No periodic file to keep whole: a direct write, and no program started.
        printf '{%s}\n' "$_veglia_trace_out" >"$_veglia_trace_dir/_veglia_trace.json"
    else
        _veglia_trace_write "$kind"
    fi
}

# The sampler: $1 the interval (seconds), $2 the job script's shell.
veglia_trace_loop() {
    # The job's shell options are not the sampler's: no -e, -u, -x; globbing on, for
    # /proc/PID/task/*/children.
    set +euxfo pipefail
    _veglia_trace_root=$2 _veglia_trace_self=$BASHPID _veglia_trace_dir=${veglia_trace_dir:-$PWD} _veglia_trace_interval=$1
    # The second part of this file is read through it (see _veglia_trace_more).
    exec {_veglia_trace_src}<"${BASH_SOURCE[0]}"
    # A number of seconds: digits and at most one ".", not last.
    [[ -n $1 && $1 != *[!0-9.]* && $1 != *.*.* && $1 != *. ]] || _veglia_trace_interval=10
    local line v i n=0 target wait_ms interval_ms
    local -a lines gaps=(250 250 500 1000 2000 4000)
    _veglia_trace_now
    _veglia_trace_t0=$_veglia_trace_ms target=$_veglia_trace_ms
    _veglia_trace_ticks_max=0 _veglia_trace_peak_rss=0 _veglia_trace_peak_vmem=0 _veglia_trace_samples=0 _veglia_trace_periodic=0
    _veglia_trace_late= _veglia_trace_loaded= _veglia_trace_stop= _veglia_trace_at=() _veglia_trace_children_files=
    _veglia_trace_ticks0= _veglia_trace_io0=()
    [[ -r /proc/$_veglia_trace_root/task/$_veglia_trace_root/children ]] && _veglia_trace_children_files=1
    # The node: its memory, its processor and architecture as the proc block's pairs.
    _veglia_trace_buf=
    read -r v _veglia_trace_memtotal line 2>/dev/null </proc/meminfo
    [[ $v == MemTotal: && -n $_veglia_trace_memtotal && $_veglia_trace_memtotal != *[!0-9]* ]] || _veglia_trace_memtotal=0
    # The processor's name, the first processor's (its lines come first): the fifth line on
    # x86, where the kernel trims it, else looked for (arm64 has none).
    mapfile -t -n 40 lines 2>/dev/null </proc/cpuinfo
    if [[ ${lines[4]-} == "model name"* ]]; then
        _veglia_trace_ks cpu_name "${lines[4]#*: }"
    elif [[ "${lines[*]}" == *"model name"* ]]; then
        _veglia_trace_more && _veglia_trace_cpu_name
    fi
    case ${HOSTTYPE-} in
    x86_64) _veglia_trace_buf+=',"arch":"linux/amd64"' ;;
    aarch64) _veglia_trace_buf+=',"arch":"linux/arm64"' ;;
    *) _veglia_trace_ks arch "linux/${HOSTTYPE:-unknown}" ;;
    esac
    _veglia_trace_node=$_veglia_trace_buf
    trap '_veglia_trace_stop=1' TERM HUP
    # A job over before its sampler got here (the pipe at its end already) gets its final
    # sample at once. What its shell had used before the job's commands (not the job's) is
    # then taken at that sample: the shell has been waiting for the sampler since, using
    # nothing, and nothing of the job's is left to tell apart.
    if ! read -r -t 0 line; then
        _veglia_trace_read_stat "$_veglia_trace_root"
        ((_veglia_trace_ticks0 = _veglia_trace_stat[13] + _veglia_trace_stat[14] + _veglia_trace_stat[15] + _veglia_trace_stat[16]))
        mapfile -t -n 6 lines 2>/dev/null </proc/"$_veglia_trace_root"/io
        _veglia_trace_io0=("${lines[@]#*: }")
        # The interval in ms.
        local sec=${_veglia_trace_interval%%.*} frac=${_veglia_trace_interval#*.}000
        [[ $_veglia_trace_interval == *.* ]] || frac=000
        ((interval_ms = 10#${sec:-0} * 1000 + 10#${frac:0:3})) || interval_ms=10000
        # The first samples come quickly (a short job gets some), then one an interval.
        while [[ -z $_veglia_trace_stop ]]; do
            _veglia_trace_weight=${gaps[n++]:-$interval_ms}
            ((_veglia_trace_weight > interval_ms)) && _veglia_trace_weight=$interval_ms
            ((target += _veglia_trace_weight))
            _veglia_trace_now
            wait_ms=$((target - _veglia_trace_ms))
            # Late (a slow sample, a busy node): no burst of samples to catch up.
            ((wait_ms < 1)) && wait_ms=1 target=$_veglia_trace_ms
            printf -v v '%d.%03d' $((wait_ms / 1000)) $((wait_ms % 1000))
            read -r -t "$v" line
            i=$?
            # 1: the main shell closed the pipe (the job is over) or died.
            ((i == 0 || i > 128)) || break
            [[ -z $_veglia_trace_stop ]] || break
            _veglia_trace_sample periodic
        done
    fi
    _veglia_trace_sample final
    exit 0
}

# What only periodic samples, a batch job's cgroup and rare cases need: the first part ends.
[[ -n ${_veglia_trace_all-} ]] || return 0

# ,"key":value into _veglia_trace_buf when value is known (not empty).
_veglia_trace_kv() {
    [[ -n $2 ]] && _veglia_trace_buf+=",\"$1\":$2"
}

# A JSON block from _veglia_trace_buf's ",..." pairs (empty when nothing was measured).
_veglia_trace_block() {
    if [[ -n $_veglia_trace_buf ]]; then
        _veglia_trace_out+="${_veglia_trace_sep}\"$1\":{${_veglia_trace_buf#,}}"
        _veglia_trace_sep=,
    fi
}

_veglia_trace_trim() {
    _veglia_trace_s=${1#"${1%%[![:space:]]*}"}
    _veglia_trace_s=${_veglia_trace_s%"${_veglia_trace_s##*[![:space:]]}"}
}

# /proc/PID/stat's fields in _veglia_trace_stat when the command name has a space in it:
# what follows its last ")", at the same places. False when the process is gone.
_veglia_trace_stat_after_name() {
    local line
    read -r line 2>/dev/null </proc/"$1"/stat || return 1
    _veglia_trace_stat=(0 0 ${line##*) })
}

# The processor's name from the caller's lines of /proc/cpuinfo where it is not their fifth
# (not x86), as the proc block's cpu_name.
_veglia_trace_cpu_name() {
    local line
    for line in "${lines[@]}"; do
        [[ $line == "model name"* ]] || continue
        _veglia_trace_trim "${line#*:}"
        _veglia_trace_ks cpu_name "$_veglia_trace_s"
        return
    done
}

# The proc block's pairs of memory and I/O (the caller's v) where some of the I/O is less
# than nothing (the main shell is gone): those left out.
_veglia_trace_io_pairs() {
    local k d i=0
    v=",\"rss\":$_veglia_trace_last_rss,\"vmem\":$_veglia_trace_last_vmem"
    v+=",\"peak_rss\":$_veglia_trace_peak_rss,\"peak_vmem\":$_veglia_trace_peak_vmem"
    for k in rchar wchar syscr syscw read_bytes write_bytes; do
        d=$((_veglia_trace_io[i] - _veglia_trace_io0[i]))
        ((d >= 0)) && v+=",\"$k\":$d"
        i=$((i + 1))
    done
}

# What earlier samples saw of context switches: a process gone since the last sample keeps
# its last counts. The tree's now (the caller's seen: process, voluntary, involuntary) are
# kept for the next sample.
_veglia_trace_gone() {
    local key v i
    local -A now
    for ((i = 0; i < ${#seen[@]}; i += 3)); do now[${seen[i]}]="${seen[i + 1]} ${seen[i + 2]}"; done
    for key in "${!_veglia_trace_ctxt[@]}"; do
        [[ -n ${now[$key]-} ]] && continue
        v=${_veglia_trace_ctxt[$key]}
        ((_veglia_trace_gone_vol += ${v% *}, _veglia_trace_gone_inv += ${v#* }))
    done
    _veglia_trace_ctxt=()
    for key in "${!now[@]}"; do _veglia_trace_ctxt[$key]=${now[$key]}; done
    ((_veglia_trace_vol += _veglia_trace_gone_vol, _veglia_trace_inv += _veglia_trace_gone_inv))
}

# The children of all the threads of process $1, in the caller's kids.
_veglia_trace_thread_children() {
    local f v
    for f in /proc/"$1"/task/*/children; do
        # One line without a newline: read says "end of file" and still reads it.
        v=
        read -r v 2>/dev/null <"$f"
        kids+=" $v"
    done
}

# x / y rounded, for x, y >= 0 (y > 0).
_veglia_trace_div() {
    _veglia_trace_q=$(((2 * $1 + $2) / (2 * $2)))
}

# A value scaled by 10000 as a decimal with four places, in _veglia_trace_f.
_veglia_trace_dec4() {
    printf -v _veglia_trace_f '%d.%04d' $(($1 / 10000)) $(($1 % 10000))
}

# The first word of a file's first line in _veglia_trace_v (empty when unreadable).
_veglia_trace_first() {
    _veglia_trace_v=
    read -r _veglia_trace_v _ 2>/dev/null <"$1"
}

_veglia_trace_is_job_name() {
    local name=$1 id
    [[ -n ${SLURM_JOB_ID-} && $name == "job_$SLURM_JOB_ID" ]] && return 0
    for id in "${PBS_JOBID-}" "${LSB_JOBID-}" "${JOB_ID-}"; do
        # The id whole, not a part of a longer number: job 42 is not job 420.
        [[ -n $id && $name =~ (^|[^0-9])"$id"([^0-9]|$) ]] && return 0
    done
    return 1
}

# The job's own cgroup among the ancestors of a cgroup path, in _veglia_trace_jobpath (else empty).
_veglia_trace_job_ancestor() {
    local path=$1
    _veglia_trace_jobpath=
    while [[ -n $path && $path != / ]]; do
        if _veglia_trace_is_job_name "${path##*/}"; then
            _veglia_trace_jobpath=$path
            return 0
        fi
        path=${path%/*}
    done
    return 1
}

# Where the job's cgroups are: _veglia_trace_cgv (v1, v2 or empty), _veglia_trace_cgscope, _veglia_trace_cgdir[controller].
_veglia_trace_cgroup_init() {
    local line pre post fstype source opts opt mnt root id ctrls path c
    local -A mnt_of root_of path_of
    local v2mnt= v2root= v2path=
    _veglia_trace_cgv= _veglia_trace_cgscope=shared
    _veglia_trace_cgdir=()
    local -a fields
    # Word splitting, not here-strings (each one a pipe or a file): no globbing meanwhile.
    set -f
    # mapfile, not `while read`: read takes a /proc file a byte at a time (a millisecond).
    local -a lines
    mapfile -t lines 2>/dev/null </proc/self/mountinfo
    for line in "${lines[@]}"; do
        [[ $line == *" - cgroup"* ]] || continue
        pre=${line%% - *} post=${line#* - }
        fields=($post)
        fstype=${fields[0]} opts=${fields[2]-}
        fields=($pre)
        root=${fields[3]-} mnt=${fields[4]-}
        if [[ $fstype == cgroup2 ]]; then
            v2mnt=$mnt v2root=$root
        elif [[ $fstype == cgroup ]]; then
            for opt in ${opts//,/ }; do
                case $opt in memory | cpuacct | cpu | blkio) mnt_of[$opt]=$mnt root_of[$opt]=$root ;; esac
            done
        fi
    done
    set +f
    mapfile -t lines 2>/dev/null </proc/"$_veglia_trace_root"/cgroup
    for line in "${lines[@]}"; do
        id=${line%%:*} line=${line#*:}
        ctrls=${line%%:*} path=${line#*:}
        if [[ $id == 0 && -z $ctrls ]]; then
            v2path=$path
        else
            for opt in ${ctrls//,/ }; do path_of[$opt]=$path; done
        fi
    done
    if [[ -n ${mnt_of[memory]-} && -n ${path_of[memory]-} ]]; then
        _veglia_trace_cgv=v1
        _veglia_trace_job_ancestor "${path_of[memory]}" && _veglia_trace_cgscope=job
        for c in memory cpuacct cpu blkio; do
            [[ -n ${mnt_of[$c]-} && -n ${path_of[$c]-} ]] || continue
            path=${path_of[$c]}
            if _veglia_trace_job_ancestor "$path"; then
                path=$_veglia_trace_jobpath
            elif [[ $_veglia_trace_cgscope == job ]]; then
                continue # this controller's cgroup is not the job's: its figures are not
            fi
            root=${root_of[$c]}
            [[ $root != / && $path == "$root"* ]] && path=${path#"$root"}
            _veglia_trace_cgdir[$c]=${mnt_of[$c]}${path%/}
        done
    elif [[ -n $v2mnt && -n $v2path ]]; then
        path=$v2path
        if _veglia_trace_job_ancestor "$path"; then
            path=$_veglia_trace_jobpath
            _veglia_trace_cgscope=job
        fi
        [[ $v2root != / && $path == "$v2root"* ]] && path=${path#"$v2root"}
        path=$v2mnt${path%/}
        if [[ -e $path/memory.current || -e $path/cpu.stat ]]; then
            _veglia_trace_cgv=v2
            _veglia_trace_cgdir[unified]=$path
        fi
    fi
}

# key value lines (memory.stat, cpu.stat, cpuacct.stat, ...) into the associative _veglia_trace_kvs.
_veglia_trace_read_pairs() {
    local line k
    local -a lines
    _veglia_trace_kvs=()
    mapfile -t lines 2>/dev/null <"$1"
    for line in "${lines[@]}"; do
        k=${line%% *} line=${line#* }
        [[ -n $k ]] && _veglia_trace_kvs[$k]=${line%% *}
    done
}

# "some ... total=N" / "full ... total=N" of a PSI file into _veglia_trace_psi_some, _veglia_trace_psi_full.
_veglia_trace_read_psi() {
    local kind rest
    local -a lines
    _veglia_trace_psi_some= _veglia_trace_psi_full=
    mapfile -t lines 2>/dev/null <"$1"
    for rest in "${lines[@]}"; do
        kind=${rest%% *}
        [[ $rest == *total=* ]] || continue
        rest=${rest##*total=}
        case $kind in some) _veglia_trace_psi_some=${rest%% *} ;; full) _veglia_trace_psi_full=${rest%% *} ;; esac
    done
}

_veglia_trace_cgroup_v1() {
    local d k dev op n rd= wr= ops_r= ops_w=
    _veglia_trace_cg_rss=
    if [[ -n ${_veglia_trace_cgdir[memory]-} ]]; then
        d=${_veglia_trace_cgdir[memory]}
        _veglia_trace_first "$d/memory.usage_in_bytes" && _veglia_trace_kv memory_current "$_veglia_trace_v"
        _veglia_trace_first "$d/memory.max_usage_in_bytes" && _veglia_trace_kv memory_peak "$_veglia_trace_v"
        _veglia_trace_read_pairs "$d/memory.stat"
        _veglia_trace_cg_rss=${_veglia_trace_kvs[total_rss]-${_veglia_trace_kvs[rss]-}}
        _veglia_trace_first "$d/memory.limit_in_bytes"
        # The "unlimited" value is near 2^63 (its exact value depends on the page size).
        [[ -n $_veglia_trace_v ]] && ((_veglia_trace_v < 4611686018427387904)) && _veglia_trace_cg_limit=$_veglia_trace_v
        # v1 counts an OOM kill in the cgroup of the process killed (a step's, a task's),
        # not in its parents: the job's count is the sum over the cgroups below it.
        local f
        local -a below=()
        [[ $_veglia_trace_cgscope == job ]] &&
            below=("$d"/*/memory.oom_control "$d"/*/*/memory.oom_control "$d"/*/*/*/memory.oom_control)
        for f in "$d"/memory.oom_control "${below[@]}"; do
            [[ -e $f ]] || continue
            _veglia_trace_read_pairs "$f"
            [[ -n ${_veglia_trace_kvs[oom_kill]-} ]] || continue
            _veglia_trace_cg_oom=$((${_veglia_trace_cg_oom:-0} + _veglia_trace_kvs[oom_kill]))
        done
    fi
    if [[ -n ${_veglia_trace_cgdir[cpuacct]-} ]]; then
        d=${_veglia_trace_cgdir[cpuacct]}
        _veglia_trace_first "$d/cpuacct.usage" && [[ -n $_veglia_trace_v ]] && _veglia_trace_kv cpu_usage_usec $((_veglia_trace_v / 1000))
        _veglia_trace_read_pairs "$d/cpuacct.stat"
        # Ticks of USER_HZ (100 a second): 10000 us each.
        [[ -n ${_veglia_trace_kvs[user]-} ]] && _veglia_trace_kv cpu_user_usec $((_veglia_trace_kvs[user] * 10000))
        [[ -n ${_veglia_trace_kvs[system]-} ]] && _veglia_trace_kv cpu_system_usec $((_veglia_trace_kvs[system] * 10000))
    fi
    if [[ -n ${_veglia_trace_cgdir[blkio]-} ]]; then
        d=${_veglia_trace_cgdir[blkio]}
        local line
        local -a lines
        # "MAJ:MIN Read N" lines; mapfile, as `while read` takes them a byte at a time.
        mapfile -t lines 2>/dev/null <"$d/blkio.throttle.io_service_bytes"
        for line in "${lines[@]}"; do
            n=${line##* } op=${line% *} op=${op##* }
            case $op in Read) rd=$((${rd:-0} + n)) ;; Write) wr=$((${wr:-0} + n)) ;; esac
        done
        mapfile -t lines 2>/dev/null <"$d/blkio.throttle.io_serviced"
        for line in "${lines[@]}"; do
            n=${line##* } op=${line% *} op=${op##* }
            case $op in Read) ops_r=$((${ops_r:-0} + n)) ;; Write) ops_w=$((${ops_w:-0} + n)) ;; esac
        done
        [[ -r $d/blkio.throttle.io_service_bytes ]] && rd=${rd:-0} wr=${wr:-0}
        [[ -r $d/blkio.throttle.io_serviced ]] && ops_r=${ops_r:-0} ops_w=${ops_w:-0}
        _veglia_trace_kv io_read_bytes "$rd"
        _veglia_trace_kv io_write_bytes "$wr"
        _veglia_trace_kv io_read_ops "$ops_r"
        _veglia_trace_kv io_write_ops "$ops_w"
    fi
    if [[ -n ${_veglia_trace_cgdir[cpu]-} ]]; then
        d=${_veglia_trace_cgdir[cpu]}
        _veglia_trace_first "$d/cpu.cfs_quota_us"
        # -1 is no quota: 0, as Fusion writes it.
        [[ -n $_veglia_trace_v ]] && { ((_veglia_trace_v < 0)) && _veglia_trace_cg_quota=0 || _veglia_trace_cg_quota=$_veglia_trace_v; }
        _veglia_trace_first "$d/cpu.cfs_period_us" && _veglia_trace_cg_period=$_veglia_trace_v
        _veglia_trace_read_pairs "$d/cpu.stat"
        _veglia_trace_cg_thr=${_veglia_trace_kvs[nr_throttled]-}
        [[ -n ${_veglia_trace_kvs[throttled_time]-} ]] && _veglia_trace_cg_thr_us=$((_veglia_trace_kvs[throttled_time] / 1000))
    fi
}

_veglia_trace_cgroup_v2() {
    local d=${_veglia_trace_cgdir[unified]} dev f k rd= wr= ops_r= ops_w= kind
    _veglia_trace_first "$d/memory.current" && _veglia_trace_kv memory_current "$_veglia_trace_v"
    _veglia_trace_first "$d/memory.peak" && _veglia_trace_kv memory_peak "$_veglia_trace_v"
    _veglia_trace_read_pairs "$d/memory.stat"
    _veglia_trace_cg_rss=${_veglia_trace_kvs[anon]-}
    _veglia_trace_first "$d/memory.max"
    [[ $_veglia_trace_v =~ ^[0-9]+$ ]] && _veglia_trace_cg_limit=$_veglia_trace_v
    _veglia_trace_read_pairs "$d/memory.events"
    _veglia_trace_cg_oom=${_veglia_trace_kvs[oom_kill]-}
    _veglia_trace_read_pairs "$d/cpu.stat"
    _veglia_trace_kv cpu_usage_usec "${_veglia_trace_kvs[usage_usec]-}"
    _veglia_trace_kv cpu_user_usec "${_veglia_trace_kvs[user_usec]-}"
    _veglia_trace_kv cpu_system_usec "${_veglia_trace_kvs[system_usec]-}"
    _veglia_trace_cg_thr=${_veglia_trace_kvs[nr_throttled]-}
    _veglia_trace_cg_thr_us=${_veglia_trace_kvs[throttled_usec]-}
    if [[ -r $d/io.stat ]]; then
        rd=0 wr=0 ops_r=0 ops_w=0
        local line
        local -a lines
        mapfile -t lines 2>/dev/null <"$d/io.stat"
        for line in "${lines[@]}"; do
            f=${line#* }
            for k in $f; do
                case $k in
                rbytes=*) rd=$((rd + ${k#*=})) ;;
                wbytes=*) wr=$((wr + ${k#*=})) ;;
                rios=*) ops_r=$((ops_r + ${k#*=})) ;;
                wios=*) ops_w=$((ops_w + ${k#*=})) ;;
                esac
            done
        done
    fi
    _veglia_trace_kv io_read_bytes "$rd"
    _veglia_trace_kv io_write_bytes "$wr"
    _veglia_trace_kv io_read_ops "$ops_r"
    _veglia_trace_kv io_write_ops "$ops_w"
    k= f=
    read -r k f _ 2>/dev/null <"$d/cpu.max"
    if [[ $f =~ ^[0-9]+$ ]]; then
        _veglia_trace_cg_period=$f
        [[ $k =~ ^[0-9]+$ ]] && _veglia_trace_cg_quota=$k || _veglia_trace_cg_quota=0
    fi
    for kind in cpu memory io; do
        _veglia_trace_read_psi "$d/$kind.pressure"
        _veglia_trace_psi[${kind}_psi_some]=$_veglia_trace_psi_some
        _veglia_trace_psi[${kind}_psi_full]=$_veglia_trace_psi_full
    done
}

# The cgroup block into _veglia_trace_buf; the anonymous memory in use in _veglia_trace_cg_rss.
_veglia_trace_cgroup() {
    local k
    _veglia_trace_cg_rss= _veglia_trace_cg_limit= _veglia_trace_cg_oom= _veglia_trace_cg_quota= _veglia_trace_cg_period= _veglia_trace_cg_thr= _veglia_trace_cg_thr_us=
    _veglia_trace_psi=()
    _veglia_trace_buf=
    [[ -n $_veglia_trace_cgv ]] || return 0
    _veglia_trace_kv version "\"$_veglia_trace_cgv\""
    _veglia_trace_kv scope "\"$_veglia_trace_cgscope\""
    if [[ $_veglia_trace_cgv == v1 ]]; then _veglia_trace_cgroup_v1; else _veglia_trace_cgroup_v2; fi
    if [[ -n $_veglia_trace_cg_rss ]]; then
        ((_veglia_trace_cg_rss > _veglia_trace_cg_peak_rss)) && _veglia_trace_cg_peak_rss=$_veglia_trace_cg_rss
        _veglia_trace_kv memory_rss "$_veglia_trace_cg_rss"
        _veglia_trace_kv memory_peak_rss "$_veglia_trace_cg_peak_rss"
    fi
    _veglia_trace_kv memory_limit "$_veglia_trace_cg_limit"
    _veglia_trace_kv cpu_quota "$_veglia_trace_cg_quota"
    _veglia_trace_kv cpu_period "$_veglia_trace_cg_period"
    _veglia_trace_kv memory_oom_kills "$_veglia_trace_cg_oom"
    _veglia_trace_kv cpu_nr_throttled "$_veglia_trace_cg_thr"
    _veglia_trace_kv cpu_throttled_usec "$_veglia_trace_cg_thr_us"
    for k in cpu_psi_some cpu_psi_full memory_psi_some memory_psi_full io_psi_some io_psi_full; do
        _veglia_trace_kv "$k" "${_veglia_trace_psi[$k]-}"
    done
}


# A number of nvidia-smi's (integer, or decimal: truncated) in _veglia_trace_n; empty when unknown
# ("[N/A]", "[Not Supported]", "[Unknown Error]", ...).
_veglia_trace_num() {
    _veglia_trace_n=
    local s=${1//[[:space:]]/}
    [[ $s =~ ^([0-9]+)(\.[0-9]*)?$ ]] && _veglia_trace_n=$((10#${BASH_REMATCH[1]}))
}
# One nvidia-smi reading, weighed by this sample's share of the run (_veglia_trace_weight ms).
_veglia_trace_gpu() {
    local out line d n=0 f used_sum=0 used_ok=1 total_sum=0 total_ok=1
    local u_sum=0 u_n=0 b_sum=0 b_n=0 u b used
    local -a parts
    out=$("$_veglia_trace_nvsmi" --query-gpu=index,uuid,name,memory.total,driver_version,utilization.gpu,utilization.memory,memory.used --format=csv,noheader,nounits ${_veglia_trace_gpu_ids:+-i "$_veglia_trace_gpu_ids"} </dev/null 2>/dev/null) || return 0
    local -a rows=()
    while IFS= read -r line; do
        IFS=, read -ra parts <<<"$line"
        ((${#parts[@]} >= 8)) || continue
        _veglia_trace_trim "${parts[0]}"
        [[ $_veglia_trace_s =~ ^[0-9]+$ ]] || continue
        rows+=("$line")
    done <<<"$out"
    ((${#rows[@]})) || return 0 # not a reading (a driver's error text): this sample has none
    for line in "${rows[@]}"; do
        IFS=, read -ra parts <<<"$line"
        _veglia_trace_trim "${parts[1]}"
        d=$_veglia_trace_s
        [[ -n ${_veglia_trace_g_seen[$d]-} ]] || {
            _veglia_trace_g_order+=("$d")
            _veglia_trace_g_seen[$d]=1
        }
        _veglia_trace_trim "${parts[0]}" && _veglia_trace_g_index[$d]=$_veglia_trace_s
        _veglia_trace_trim "${parts[2]}" && _veglia_trace_g_name[$d]=$_veglia_trace_s
        _veglia_trace_trim "${parts[4]}" && _veglia_trace_g_driver[$d]=$_veglia_trace_s
        _veglia_trace_num "${parts[3]}"
        if [[ -n $_veglia_trace_n ]]; then
            _veglia_trace_g_mem[$d]=$_veglia_trace_n
            total_sum=$((total_sum + _veglia_trace_n))
        else total_ok=0; fi
        _veglia_trace_num "${parts[5]}"
        u=$_veglia_trace_n
        _veglia_trace_num "${parts[6]}"
        b=$_veglia_trace_n
        _veglia_trace_num "${parts[7]}"
        _veglia_trace_gpu_account "$d" "$u" "$_veglia_trace_n" "$b" "${_veglia_trace_g_mem[$d]-}"
        if [[ -n $u ]]; then u_sum=$((u_sum + u)) u_n=$((u_n + 1)); fi
        if [[ -n $b ]]; then b_sum=$((b_sum + b)) b_n=$((b_n + 1)); fi
        if [[ -n $_veglia_trace_n ]]; then used_sum=$((used_sum + _veglia_trace_n)); else used_ok=0; fi
        n=$((n + 1))
    done
    _veglia_trace_g_devices=$n
    ((total_ok)) && _veglia_trace_g_mem[all]=$total_sum
    # Several devices: the mean utilisation, the summed memory (x1000 keeps the mean's
    # fraction in integer arithmetic).
    u= b= used=
    ((u_n)) && u=$((u_sum * 1000 / u_n)) _veglia_trace_series_gpu=$((u_sum / u_n))
    ((b_n)) && b=$((b_sum * 1000 / b_n)) _veglia_trace_series_bw=$((b_sum / b_n))
    ((used_ok)) && used=$used_sum _veglia_trace_series_mem=$used_sum
    _veglia_trace_gpu_account all "$u" "$used" "$b" "" 1000
    _veglia_trace_g_samples=$((_veglia_trace_g_samples + 1))
}

# Running sums of one device (or "all"): util, used MiB, bandwidth util (scaled by $6).
_veglia_trace_gpu_account() {
    local d=$1 u=$2 used=$3 b=$4 scale=${6:-1} w=$_veglia_trace_weight
    if [[ -n $u ]]; then
        _veglia_trace_g_us[$d]=$((${_veglia_trace_g_us[$d]:-0} + u * w)) _veglia_trace_g_uw[$d]=$((${_veglia_trace_g_uw[$d]:-0} + w))
        ((u > ${_veglia_trace_g_up[$d]:-0})) || [[ -z ${_veglia_trace_g_up[$d]-} ]] && _veglia_trace_g_up[$d]=$u
        ((u > 0)) && _veglia_trace_g_act[$d]=$((${_veglia_trace_g_act[$d]:-0} + w))
        _veglia_trace_g_act[$d]=${_veglia_trace_g_act[$d]:-0}
        _veglia_trace_g_scale[$d]=$scale
    fi
    if [[ -n $used ]]; then
        _veglia_trace_g_ms[$d]=$((${_veglia_trace_g_ms[$d]:-0} + used * w)) _veglia_trace_g_mw[$d]=$((${_veglia_trace_g_mw[$d]:-0} + w))
        ((used > ${_veglia_trace_g_mp[$d]:-0})) || [[ -z ${_veglia_trace_g_mp[$d]-} ]] && _veglia_trace_g_mp[$d]=$used
    fi
    if [[ -n $b ]]; then
        _veglia_trace_g_bs[$d]=$((${_veglia_trace_g_bs[$d]:-0} + b * w)) _veglia_trace_g_bw[$d]=$((${_veglia_trace_g_bw[$d]:-0} + w))
        ((b > ${_veglia_trace_g_bp[$d]:-0})) || [[ -z ${_veglia_trace_g_bp[$d]-} ]] && _veglia_trace_g_bp[$d]=$b
    fi
}

# The figures of one device (or "all") into _veglia_trace_buf.
_veglia_trace_gpu_fields() {
    local d=$1 scale=${_veglia_trace_g_scale[$1]:-${2:-1}} mem=${_veglia_trace_g_mem[$1]-} avg_milli
    if [[ -n ${_veglia_trace_g_uw[$d]-} ]]; then
        _veglia_trace_kv active_time "${_veglia_trace_g_act[$d]}"
        _veglia_trace_div "${_veglia_trace_g_us[$d]}" $((_veglia_trace_g_uw[$d] * scale)) && _veglia_trace_kv pct "$_veglia_trace_q"
        _veglia_trace_div "${_veglia_trace_g_up[$d]}" "$scale" && _veglia_trace_kv peak "$_veglia_trace_q"
    fi
    if [[ -n ${_veglia_trace_g_mw[$d]-} ]]; then
        avg_milli=$((_veglia_trace_g_ms[$d] * 1000 / _veglia_trace_g_mw[$d]))
        if [[ -n $mem ]] && ((mem > 0)); then
            # Percent x10000: avg/mem*100 with the mean to a thousandth of a MiB.
            _veglia_trace_div $((avg_milli * 1000)) "$mem" && _veglia_trace_dec4 "$_veglia_trace_q" && _veglia_trace_kv pct_mem "$_veglia_trace_f"
            _veglia_trace_div $((_veglia_trace_g_mp[$d] * 1000000)) "$mem" && _veglia_trace_dec4 "$_veglia_trace_q" && _veglia_trace_kv peak_mem "$_veglia_trace_f"
        fi
        _veglia_trace_div "$avg_milli" 1000 && _veglia_trace_kv avg_mem "$_veglia_trace_q"
        _veglia_trace_kv peak_mem_used "${_veglia_trace_g_mp[$d]}"
    fi
    if [[ -n ${_veglia_trace_g_bw[$d]-} ]]; then
        _veglia_trace_div "${_veglia_trace_g_bs[$d]}" $((_veglia_trace_g_bw[$d] * scale)) && _veglia_trace_kv avg_mem_bw_util "$_veglia_trace_q"
        _veglia_trace_div "${_veglia_trace_g_bp[$d]}" "$scale" && _veglia_trace_kv peak_mem_bw_util "$_veglia_trace_q"
    fi
}

_veglia_trace_gpu_block() {
    local d names= name first= devices= sep=
    _veglia_trace_buf=
    ((_veglia_trace_g_samples)) || return 0
    for d in "${_veglia_trace_g_order[@]}"; do
        name=${_veglia_trace_g_name[$d]-}
        [[ -z $first ]] && first=$name
        [[ $name != "$first" ]] && names=mixed
    done
    # Devices of several models: their names, in order.
    if [[ $names == mixed ]]; then
        name=
        for d in "${_veglia_trace_g_order[@]}"; do name+="${name:+, }${_veglia_trace_g_name[$d]-}"; done
    else
        name=$first
    fi
    if ((${#_veglia_trace_g_order[@]} > 1)); then
        for d in "${_veglia_trace_g_order[@]}"; do
            _veglia_trace_buf=
            _veglia_trace_kv index "${_veglia_trace_g_index[$d]-}"
            _veglia_trace_ks uuid "$d"
            _veglia_trace_ks name "${_veglia_trace_g_name[$d]-}"
            _veglia_trace_kv mem "${_veglia_trace_g_mem[$d]-}"
            _veglia_trace_gpu_fields "$d"
            devices+="$sep{${_veglia_trace_buf#,}}"
            sep=,
        done
    fi
    _veglia_trace_buf=
    _veglia_trace_ks name "$name"
    _veglia_trace_kv mem "${_veglia_trace_g_mem[all]-}"
    _veglia_trace_ks driver "${_veglia_trace_g_driver[${_veglia_trace_g_order[0]}]-}"
    _veglia_trace_gpu_fields all 1000
    _veglia_trace_ks scope "$_veglia_trace_gpu_scope"
    [[ -n $devices ]] && _veglia_trace_buf+=",\"devices\":[$devices]"
}


# The job's process tree without /proc/PID/task/TID/children (a kernel without
# CONFIG_PROC_CHILDREN): every process's parent, from its stat.
_veglia_trace_tree_by_parent() {
    local i=0 pid f line rest
    local -a stat
    local -A kids_of
    for f in /proc/[0-9]*/stat; do
        read -r line 2>/dev/null <"$f" || continue
        rest=${line##*) }
        stat=($rest)
        kids_of[${stat[1]}]+=" ${f:6:-5}"
    done
    while ((i < ${#_veglia_trace_pids[@]})); do
        pid=${_veglia_trace_pids[i]}
        i=$((i + 1))
        for f in ${kids_of[$pid]-}; do [[ $f != "$_veglia_trace_self" ]] && _veglia_trace_pids+=("$f"); done
    done
}

# Where this kernel puts the fields of /proc/PID/status that _veglia_trace_proc reads, from
# one such file (the caller's lines), in _veglia_trace_at, where they are not where
# _veglia_trace_status_at first looks: looked for line by line.
_veglia_trace_status_search() {
    local i
    local -a at
    for i in "${!lines[@]}"; do
        case ${lines[i]%%:*} in
        VmPeak) at[0]=$i ;;
        VmSize) at[1]=$i ;;
        VmHWM) at[2]=$i ;;
        VmRSS) at[3]=$i ;;
        voluntary_ctxt_switches) at[4]=$i ;;
        nonvoluntary_ctxt_switches) at[5]=$i ;;
        esac
    done
    # A zombie has no Vm lines: the next process's file tells.
    ((${#at[@]} == 6)) && _veglia_trace_at=("${at[@]}")
}

# The fields of /proc/PID/status that _veglia_trace_proc reads, from the caller's lines into
# its f, where they are not at the lines _veglia_trace_at says (a zombie has no Vm lines).
_veglia_trace_status_fields() {
    local line
    for line in "${lines[@]}"; do
        case ${line%%:*} in
        VmPeak) f[0]=$line ;;
        VmSize) f[1]=$line ;;
        VmHWM) f[2]=$line ;;
        VmRSS) f[3]=$line ;;
        voluntary_ctxt_switches) f[4]=$line ;;
        nonvoluntary_ctxt_switches) f[5]=$line ;;
        esac
    done
}

# What the second part adds to a sample: the GPU reading, the cgroup and gpu blocks.
_veglia_trace_sample_more() {
    _veglia_trace_series_gpu=- _veglia_trace_series_mem=- _veglia_trace_series_bw=-
    # The final sample reads no GPU: the job is over, its GPU idle now.
    [[ $1 == periodic && -n $_veglia_trace_nvsmi ]] && _veglia_trace_gpu
    _veglia_trace_cgroup
    _veglia_trace_block cgroup
    _veglia_trace_gpu_block
    _veglia_trace_block gpu
}

# The files of a periodic sample, or of a final one after periodic ones: a line of
# _veglia_trace.series, and _veglia_trace.json renamed into place whole.
_veglia_trace_write() {
    local cpu=- mem=- tmp=$_veglia_trace_dir/_veglia_trace.json.tmp
    if ((_veglia_trace_ms > _veglia_trace_prev_ms)); then
        cpu=$(((_veglia_trace_ticks - _veglia_trace_prev_ticks) * 10 * 1000 / (_veglia_trace_ms - _veglia_trace_prev_ms)))
    fi
    [[ $_veglia_trace_cgscope == job && -n $_veglia_trace_cg_rss ]] && mem=$_veglia_trace_cg_rss
    if ((_veglia_trace_periodic == 0)); then
        printf '#veglia-trace-series 1 t cpu rss mem gpu gpu_mem gpu_bw\n' >"$_veglia_trace_dir/_veglia_trace.series"
    fi
    printf '%s %s %s %s %s %s %s\n' "$_veglia_trace_ms" "$cpu" "$_veglia_trace_rss" "$mem" \
        "$_veglia_trace_series_gpu" "$_veglia_trace_series_mem" "$_veglia_trace_series_bw" >>"$_veglia_trace_dir/_veglia_trace.series"
    _veglia_trace_prev_ms=$_veglia_trace_ms _veglia_trace_prev_ticks=$_veglia_trace_ticks
    printf '{%s}\n' "$_veglia_trace_out" >"$tmp" && mv -f -- "$tmp" "$_veglia_trace_dir/_veglia_trace.json" </dev/null
    [[ $1 == periodic ]] && _veglia_trace_periodic=$((_veglia_trace_periodic + 1))
}

# The second part's state, at the first sample that needs it ($1: its kind): the cgroups,
# and for a periodic sample the GPUs.
_veglia_trace_late_init() {
    _veglia_trace_late=1
    _veglia_trace_prev_ms=$_veglia_trace_t0 _veglia_trace_prev_ticks=0 _veglia_trace_cg_peak_rss=0 _veglia_trace_nvsmi=
    _veglia_trace_gone_vol=0 _veglia_trace_gone_inv=0
    declare -gA _veglia_trace_ctxt=() _veglia_trace_cgdir=() _veglia_trace_kvs=() _veglia_trace_psi=()
    declare -gA _veglia_trace_g_seen=() _veglia_trace_g_index=() _veglia_trace_g_name=() _veglia_trace_g_driver=() _veglia_trace_g_mem=()
    declare -gA _veglia_trace_g_us=() _veglia_trace_g_uw=() _veglia_trace_g_up=() _veglia_trace_g_act=() _veglia_trace_g_scale=()
    declare -gA _veglia_trace_g_ms=() _veglia_trace_g_mw=() _veglia_trace_g_mp=() _veglia_trace_g_bs=() _veglia_trace_g_bw=() _veglia_trace_g_bp=()
    _veglia_trace_g_order=() _veglia_trace_g_samples=0
    _veglia_trace_cgroup_init
    [[ $1 == periodic ]] || return 0
    # The job's GPUs: those the scheduler gave it, else every one the node shows.
    _veglia_trace_nvsmi= _veglia_trace_gpu_ids= _veglia_trace_gpu_scope=job
    local v IFS=:
    local -a path_dirs
    set -f
    path_dirs=($PATH)
    set +f
    IFS=$' \t\n'
    for v in "${path_dirs[@]}"; do
        [[ -x $v/nvidia-smi ]] && _veglia_trace_nvsmi=$v/nvidia-smi && break
    done
    if [[ -n ${CUDA_VISIBLE_DEVICES+set} ]]; then
        case $CUDA_VISIBLE_DEVICES in "" | -1 | NoDevFiles) _veglia_trace_nvsmi= ;; esac
        _veglia_trace_gpu_ids=$CUDA_VISIBLE_DEVICES
    elif [[ -n ${SLURM_JOB_GPUS-} || -n ${SLURM_STEP_GPUS-} ]]; then
        _veglia_trace_gpu_ids=${SLURM_JOB_GPUS:-$SLURM_STEP_GPUS}
    elif [[ -n ${GPU_DEVICE_ORDINAL-} ]]; then
        _veglia_trace_gpu_ids=$GPU_DEVICE_ORDINAL
    else
        _veglia_trace_gpu_scope=node
    fi
}
