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

# Epoch milliseconds in _veglia_trace_ms.
_veglia_trace_now() {
    if [[ -n ${EPOCHREALTIME-} ]]; then
        # Microseconds whatever the locale's decimal point.
        _veglia_trace_ms=${EPOCHREALTIME//[!0-9]/}
        _veglia_trace_ms=$((10#$_veglia_trace_ms / 1000))
    else
        printf -v _veglia_trace_ms '%(%s)T' -1
        _veglia_trace_ms=$((_veglia_trace_ms * 1000))
    fi
}

# ,"key":value into _veglia_trace_buf when value is known (not empty).
_veglia_trace_kv() {
    [[ -n $2 ]] && _veglia_trace_buf+=",\"$1\":$2"
}

# ,"key":"string" into _veglia_trace_buf, JSON-escaped, when known.
_veglia_trace_ks() {
    [[ -n $2 ]] || return 0
    local s=${2//\\/\\\\}
    s=${s//\"/\\\"}
    s=${s//[$'\001'-$'\037']/ }
    _veglia_trace_buf+=",\"$1\":\"$s\""
}

# x / y rounded, for x, y >= 0 (y > 0).
_veglia_trace_div() {
    _veglia_trace_q=$(((2 * $1 + $2) / (2 * $2)))
}

# A value scaled by 10000 as a decimal with four places, in _veglia_trace_f.
_veglia_trace_dec4() {
    printf -v _veglia_trace_f '%d.%04d' $(($1 / 10000)) $(($1 % 10000))
}

# A JSON block from _veglia_trace_buf's ",..." pairs (empty when nothing was measured).
_veglia_trace_block() {
    if [[ -n $_veglia_trace_buf ]]; then
        _veglia_trace_out+="${_veglia_trace_sep}\"$1\":{${_veglia_trace_buf#,}}"
        _veglia_trace_sep=,
    fi
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

# The job's process tree (the main shell and its descendants, not the sampler's) in _veglia_trace_pids.
_veglia_trace_tree() {
    local i=0 pid f kids line rest
    local -a stat
    _veglia_trace_pids=("$_veglia_trace_root")
    if [[ -z $_veglia_trace_children_files ]]; then
        # No /proc/PID/task/TID/children (a kernel without CONFIG_PROC_CHILDREN): every
        # process's parent, from its stat.
        local -A kids_of
        for f in /proc/[0-9]*/stat; do
            read -r line 2>/dev/null <"$f" || continue
            rest=${line##*) }
            stat=($rest)
            kids_of[${stat[1]}]+=" ${f:6:-5}"
        done
    fi
    while ((i < ${#_veglia_trace_pids[@]})); do
        pid=${_veglia_trace_pids[i]}
        i=$((i + 1))
        if [[ -n $_veglia_trace_children_files ]]; then
            for f in /proc/"$pid"/task/*/children; do
                # One line without a newline: read says "end of file" and still reads it.
                kids=
                read -r kids 2>/dev/null <"$f"
                for f in $kids; do [[ $f != "$_veglia_trace_self" ]] && _veglia_trace_pids+=("$f"); done
            done
        else
            for f in ${kids_of[$pid]-}; do [[ $f != "$_veglia_trace_self" ]] && _veglia_trace_pids+=("$f"); done
        fi
    done
}

# The tree's usage now: _veglia_trace_ticks, _veglia_trace_rss, _veglia_trace_vmem (kB), _veglia_trace_io[6], context switches.
_veglia_trace_proc() {
    local pid line rest k v key hwm peak rss size vol inv i
    local -a stat lines
    local -A seen fields
    _veglia_trace_tree
    _veglia_trace_ticks=0 _veglia_trace_rss=0 _veglia_trace_vmem=0 vol=0 inv=0
    _veglia_trace_io=(0 0 0 0 0 0)
    for pid in "${_veglia_trace_pids[@]}"; do
        read -r line 2>/dev/null </proc/"$pid"/stat || continue
        rest=${line##*) }
        stat=($rest)
        _veglia_trace_ticks=$((_veglia_trace_ticks + stat[11] + stat[12] + stat[13] + stat[14]))
        key=$pid:${stat[19]}
        hwm=0 peak=0 rss=0 size=0
        # Whole files at once (mapfile), the fields at the lines where this kernel puts
        # them: a `read` a line is ten times the CPU on a big tree.
        lines=()
        mapfile -t lines 2>/dev/null </proc/"$pid"/status
        if [[ ${lines[_veglia_trace_at[VmPeak]]} == VmPeak:* &&
            ${lines[_veglia_trace_at[nonvoluntary_ctxt_switches]]} == nonvoluntary_ctxt_switches:* ]]; then
            for k in VmPeak VmSize VmHWM VmRSS voluntary_ctxt_switches nonvoluntary_ctxt_switches; do
                v=${lines[_veglia_trace_at[$k]]#*:}
                fields[$k]=${v%kB}
            done
        else
            # Elsewhere (a zombie has no Vm lines): look for them.
            fields=()
            for line in "${lines[@]}"; do
                k=${line%%:*}
                v=${line#*:}
                fields[$k]=${v%kB}
            done
        fi
        peak=$((${fields[VmPeak]:-0})) size=$((${fields[VmSize]:-0}))
        hwm=$((${fields[VmHWM]:-0})) rss=$((${fields[VmRSS]:-0}))
        [[ -n ${fields[nonvoluntary_ctxt_switches]-} ]] &&
            seen[$key]="$((fields[voluntary_ctxt_switches])) $((fields[nonvoluntary_ctxt_switches]))"
        _veglia_trace_rss=$((_veglia_trace_rss + rss)) _veglia_trace_vmem=$((_veglia_trace_vmem + size))
        ((hwm > _veglia_trace_peak_rss)) && _veglia_trace_peak_rss=$hwm
        ((peak > _veglia_trace_peak_vmem)) && _veglia_trace_peak_vmem=$peak
        v=${seen[$key]-0 0}
        vol=$((vol + ${v%% *})) inv=$((inv + ${v#* }))
        lines=()
        mapfile -t -n 6 lines 2>/dev/null </proc/"$pid"/io
        if ((${#lines[@]} == 6)); then
            # rchar, wchar, syscr, syscw, read_bytes, write_bytes, in this order.
            for i in 0 1 2 3 4 5; do
                _veglia_trace_io[i]=$((_veglia_trace_io[i] + ${lines[i]#*: }))
            done
        fi
    done
    # A process gone since the last sample keeps its last counts of context switches.
    for key in "${!_veglia_trace_ctxt[@]}"; do
        if [[ -z ${seen[$key]-} ]]; then
            v=${_veglia_trace_ctxt[$key]}
            _veglia_trace_gone_vol=$((_veglia_trace_gone_vol + ${v%% *})) _veglia_trace_gone_inv=$((_veglia_trace_gone_inv + ${v#* }))
        fi
    done
    _veglia_trace_ctxt=()
    for key in "${!seen[@]}"; do _veglia_trace_ctxt[$key]=${seen[$key]}; done
    _veglia_trace_vol=$((vol + _veglia_trace_gone_vol)) _veglia_trace_inv=$((inv + _veglia_trace_gone_inv))
    ((_veglia_trace_rss > _veglia_trace_peak_rss)) && _veglia_trace_peak_rss=$_veglia_trace_rss
    ((_veglia_trace_vmem > _veglia_trace_peak_vmem)) && _veglia_trace_peak_vmem=$_veglia_trace_vmem
    # The tree's CPU time can only grow: a process reparented away takes its time with it.
    _veglia_trace_ticks=$((_veglia_trace_ticks - _veglia_trace_ticks0))
    ((_veglia_trace_ticks < _veglia_trace_ticks_max)) && _veglia_trace_ticks=$_veglia_trace_ticks_max
    _veglia_trace_ticks_max=$_veglia_trace_ticks
}

_veglia_trace_proc_block() {
    local i realtime=$((_veglia_trace_ms - _veglia_trace_t0))
    _veglia_trace_buf=
    _veglia_trace_kv realtime "$realtime"
    # Percent of one core x10: CPU ms (10 a tick) * 1000 / elapsed ms.
    ((realtime > 0)) && _veglia_trace_kv pct_cpu $((_veglia_trace_ticks * 10 * 1000 / realtime))
    _veglia_trace_ks cpu_name "$_veglia_trace_cpu_name"
    _veglia_trace_ks arch "$_veglia_trace_arch"
    ((_veglia_trace_memtotal > 0)) && _veglia_trace_kv pct_mem $((_veglia_trace_last_rss * 1000 / _veglia_trace_memtotal))
    _veglia_trace_kv rss "$_veglia_trace_last_rss"
    _veglia_trace_kv vmem "$_veglia_trace_last_vmem"
    _veglia_trace_kv peak_rss "$_veglia_trace_peak_rss"
    _veglia_trace_kv peak_vmem "$_veglia_trace_peak_vmem"
    local names=(rchar wchar syscr syscw read_bytes write_bytes)
    for i in 0 1 2 3 4 5; do
        ((_veglia_trace_io[i] - _veglia_trace_io0[i] >= 0)) && _veglia_trace_kv "${names[i]}" $((_veglia_trace_io[i] - _veglia_trace_io0[i]))
    done
    _veglia_trace_kv vol_ctxt "$_veglia_trace_vol"
    _veglia_trace_kv inv_ctxt "$_veglia_trace_inv"
}

# A number of nvidia-smi's (integer, or decimal: truncated) in _veglia_trace_n; empty when unknown
# ("[N/A]", "[Not Supported]", "[Unknown Error]", ...).
_veglia_trace_num() {
    _veglia_trace_n=
    local s=${1//[[:space:]]/}
    [[ $s =~ ^([0-9]+)(\.[0-9]*)?$ ]] && _veglia_trace_n=$((10#${BASH_REMATCH[1]}))
}

_veglia_trace_trim() {
    _veglia_trace_s=${1#"${1%%[![:space:]]*}"}
    _veglia_trace_s=${_veglia_trace_s%"${_veglia_trace_s##*[![:space:]]}"}
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

# Take a sample and write the files; $1: "periodic" or "final".
_veglia_trace_sample() {
    local kind=$1 cpu=- rss mem=- tmp
    [[ -n $_veglia_trace_late ]] || _veglia_trace_late_init "$kind"
    _veglia_trace_now
    _veglia_trace_proc
    # The final sample sees the job over: what it used is the last reading while it ran.
    if [[ $kind == periodic || $_veglia_trace_samples == 0 ]]; then
        _veglia_trace_last_rss=$_veglia_trace_rss _veglia_trace_last_vmem=$_veglia_trace_vmem
    fi
    _veglia_trace_series_gpu=- _veglia_trace_series_mem=- _veglia_trace_series_bw=-
    # The final sample reads no GPU: the job is over, its GPU idle now.
    [[ $kind == periodic && -n $_veglia_trace_nvsmi ]] && _veglia_trace_gpu
    _veglia_trace_out= _veglia_trace_sep=
    _veglia_trace_proc_block
    _veglia_trace_block proc
    _veglia_trace_cgroup
    _veglia_trace_block cgroup
    _veglia_trace_gpu_block
    _veglia_trace_block gpu
    _veglia_trace_samples=$((_veglia_trace_samples + 1))
    _veglia_trace_buf=
    _veglia_trace_kv version 1
    _veglia_trace_kv interval "$_veglia_trace_interval"
    _veglia_trace_kv samples "$_veglia_trace_samples"
    _veglia_trace_kv start "$_veglia_trace_t0"
    _veglia_trace_kv updated "$_veglia_trace_ms"
    [[ $kind == final ]] && _veglia_trace_kv final true || _veglia_trace_kv final false
    _veglia_trace_block sampler
    if [[ $kind == periodic || $_veglia_trace_periodic -gt 0 ]]; then
        if ((_veglia_trace_ms > _veglia_trace_prev_ms)); then
            cpu=$(((_veglia_trace_ticks - _veglia_trace_prev_ticks) * 10 * 1000 / (_veglia_trace_ms - _veglia_trace_prev_ms)))
        fi
        [[ $_veglia_trace_cgscope == job && -n $_veglia_trace_cg_rss ]] && mem=$_veglia_trace_cg_rss
        if ((_veglia_trace_periodic == 0)); then
            printf '#veglia-trace-series 1 t cpu rss mem gpu gpu_mem gpu_bw\n' >"$_veglia_trace_dir/_veglia_trace.series"
        fi
        printf '%s %s %s %s %s %s %s\n' "$_veglia_trace_ms" "$cpu" "$_veglia_trace_rss" "$mem" \
            "$_veglia_trace_series_gpu" "$_veglia_trace_series_mem" "$_veglia_trace_series_bw" >>"$_veglia_trace_dir/_veglia_trace.series"
    fi
    _veglia_trace_prev_ms=$_veglia_trace_ms _veglia_trace_prev_ticks=$_veglia_trace_ticks
    if [[ $kind == final && $_veglia_trace_periodic == 0 ]]; then
        # No periodic file to keep whole: a direct write, and no program started.
        printf '{%s}\n' "$_veglia_trace_out" >"$_veglia_trace_dir/_veglia_trace.json"
    else
        tmp=$_veglia_trace_dir/_veglia_trace.json.tmp
        printf '{%s}\n' "$_veglia_trace_out" >"$tmp" && mv -f -- "$tmp" "$_veglia_trace_dir/_veglia_trace.json" </dev/null
    fi
    [[ $kind == periodic ]] && _veglia_trace_periodic=$((_veglia_trace_periodic + 1))
}

# What only a sample needs, done at the first one: a job that ends before it costs less.
# A final sample with no periodic one before reads the cgroup only where it may be the
# job's own (a batch system's job id is set): the direct scheduler's is the session's.
_veglia_trace_late_init() {
    _veglia_trace_late=1
    if [[ $1 == periodic || -n ${SLURM_JOB_ID-}${PBS_JOBID-}${LSB_JOBID-}${JOB_ID-} ]]; then
        _veglia_trace_cgroup_init
    fi
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

# The sampler: $1 the interval (seconds), $2 the job script's shell.
veglia_trace_loop() {
    # The job's shell options are not the sampler's: no -e, -u, -x; globbing on, for
    # /proc/PID/task/*/children.
    set +euxfo pipefail
    _veglia_trace_root=$2 _veglia_trace_self=$BASHPID _veglia_trace_dir=${veglia_trace_dir:-$PWD}
    _veglia_trace_interval=$1
    [[ $_veglia_trace_interval =~ ^[0-9]*\.?[0-9]+$ ]] || _veglia_trace_interval=10
    local sec=${_veglia_trace_interval%%.*} frac=
    [[ $_veglia_trace_interval == *.* ]] && frac=${_veglia_trace_interval#*.}
    frac=${frac}000
    local interval_ms=$((10#${sec:-0} * 1000 + 10#${frac:0:3}))
    ((interval_ms > 0)) || interval_ms=10000
    local line rest k v i
    local -a stat
    _veglia_trace_now
    _veglia_trace_t0=$_veglia_trace_ms
    # What the shell had used before the job's commands is not the job's.
    read -r line 2>/dev/null </proc/"$_veglia_trace_root"/stat
    rest=${line##*) }
    stat=($rest)
    _veglia_trace_ticks0=$((stat[11] + stat[12] + stat[13] + stat[14]))
    _veglia_trace_io0=(0 0 0 0 0 0)
    i=0
    local -a lines
    mapfile -t lines 2>/dev/null </proc/"$_veglia_trace_root"/io
    for line in "${lines[@]}"; do
        k=${line%%:*} v=${line##* }
        case $k in rchar | wchar | syscr | syscw | read_bytes | write_bytes)
            _veglia_trace_io0[i]=$v
            i=$((i + 1))
            ;;
        esac
    done
    _veglia_trace_ticks_max=0 _veglia_trace_peak_rss=0 _veglia_trace_peak_vmem=0 _veglia_trace_gone_vol=0 _veglia_trace_gone_inv=0
    _veglia_trace_cg_peak_rss=0 _veglia_trace_samples=0 _veglia_trace_periodic=0 _veglia_trace_prev_ms=$_veglia_trace_t0 _veglia_trace_prev_ticks=0
    _veglia_trace_last_rss= _veglia_trace_last_vmem=
    declare -gA _veglia_trace_ctxt=() _veglia_trace_cgdir=() _veglia_trace_kvs=() _veglia_trace_psi=()
    declare -gA _veglia_trace_g_seen=() _veglia_trace_g_index=() _veglia_trace_g_name=() _veglia_trace_g_driver=() _veglia_trace_g_mem=()
    declare -gA _veglia_trace_g_us=() _veglia_trace_g_uw=() _veglia_trace_g_up=() _veglia_trace_g_act=() _veglia_trace_g_scale=()
    declare -gA _veglia_trace_g_ms=() _veglia_trace_g_mw=() _veglia_trace_g_mp=() _veglia_trace_g_bs=() _veglia_trace_g_bw=() _veglia_trace_g_bp=()
    _veglia_trace_g_order=() _veglia_trace_g_samples=0
    # Where this kernel puts the fields of /proc/PID/status.
    declare -gA _veglia_trace_at=([VmPeak]=0 [nonvoluntary_ctxt_switches]=0)
    mapfile -t stat 2>/dev/null </proc/"$_veglia_trace_root"/status
    for i in "${!stat[@]}"; do
        k=${stat[i]%%:*}
        case $k in
        VmPeak | VmSize | VmHWM | VmRSS | voluntary_ctxt_switches | nonvoluntary_ctxt_switches)
            _veglia_trace_at[$k]=$i
            ;;
        esac
    done
    _veglia_trace_children_files=
    [[ -r /proc/$_veglia_trace_root/task/$_veglia_trace_root/children ]] && _veglia_trace_children_files=1
    _veglia_trace_memtotal=0 _veglia_trace_cpu_name=
    mapfile -t -n 1 lines 2>/dev/null </proc/meminfo
    if [[ ${lines[0]-} == MemTotal:* ]]; then
        v=${lines[0]#MemTotal:} v=${v% kB}
        _veglia_trace_memtotal=$((10#${v// /}))
    fi
    # The first processor's lines come first: no need for the hundreds after them.
    mapfile -t -n 40 lines 2>/dev/null </proc/cpuinfo
    for line in "${lines[@]}"; do
        if [[ $line == "model name"* ]]; then
            _veglia_trace_trim "${line#*:}"
            _veglia_trace_cpu_name=$_veglia_trace_s
            break
        fi
    done
    case ${HOSTTYPE:-} in
    x86_64) _veglia_trace_arch=linux/amd64 ;;
    aarch64) _veglia_trace_arch=linux/arm64 ;;
    *) _veglia_trace_arch=linux/${HOSTTYPE:-unknown} ;;
    esac
    _veglia_trace_cgv= _veglia_trace_cgscope=shared _veglia_trace_nvsmi= _veglia_trace_late=
    _veglia_trace_stop=
    trap '_veglia_trace_stop=1' TERM HUP
    # The first samples come quickly (a short job gets some), then one an interval.
    local -a gaps=(250 250 500 1000 2000 4000)
    local n=0 target=$_veglia_trace_t0 wait_ms
    while [[ -z $_veglia_trace_stop ]]; do
        _veglia_trace_weight=${gaps[n]:-$interval_ms}
        ((_veglia_trace_weight > interval_ms)) && _veglia_trace_weight=$interval_ms
        n=$((n + 1))
        target=$((target + _veglia_trace_weight))
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
    _veglia_trace_sample final
    exit 0
}
