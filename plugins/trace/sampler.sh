# veglia core.trace: a job's trace, sampled beside it by the job script's own shell.
#
# Defined in the job script (bash >= 4.4), then:
#     veglia_trace_start INTERVAL      # before the job's commands
#     {veglia_trace_fd}>&- COMMAND     # each command line: the job must not hold the pipe
#     veglia_trace_stop                # after them, whatever their exit
# The sampler is a process substitution reading a pipe from the main shell: its `read -t`
# is its sleep, and the end of the pipe (the main shell closed it, or died) wakes it at once
# for the final sample. It writes _veglia_trace.json (Fusion's blocks: proc, cgroup, gpu,
# plus sampler) and appends to _veglia_trace.series in the work directory.
# The sampling path uses bash builtins only: a periodic sample may start `mv` (an atomic
# rename) and, where it is on PATH, one `nvidia-smi`; the final sample starts nothing when no
# periodic sample ran, so a short job pays no process at all.

veglia_trace_start() {
    veglia_trace_dir=$PWD
    exec {veglia_trace_fd}> >(veglia_trace_loop "$1" "$$" >/dev/null 2>&1)
    veglia_trace_pid=$!
}

veglia_trace_stop() {
    [[ -n ${veglia_trace_pid-} ]] || return 0
    exec {veglia_trace_fd}>&-
    # bash >= 4.4 waits for a process substitution; an older one says "not a child" (127).
    wait "$veglia_trace_pid" 2>/dev/null
    if (($? == 127)); then
        while [[ -d /proc/$veglia_trace_pid ]]; do sleep 0.05; done
    fi
    veglia_trace_pid=
}

# Epoch milliseconds in _vt_ms.
_vt_now() {
    if [[ -n ${EPOCHREALTIME-} ]]; then
        # Microseconds whatever the locale's decimal point.
        _vt_ms=${EPOCHREALTIME//[!0-9]/}
        _vt_ms=$((10#$_vt_ms / 1000))
    else
        printf -v _vt_ms '%(%s)T' -1
        _vt_ms=$((_vt_ms * 1000))
    fi
}

# ,"key":value into _vt_buf when value is known (not empty).
_vt_kv() {
    [[ -n $2 ]] && _vt_buf+=",\"$1\":$2"
}

# ,"key":"string" into _vt_buf, JSON-escaped, when known.
_vt_ks() {
    [[ -n $2 ]] || return 0
    local s=${2//\\/\\\\}
    s=${s//\"/\\\"}
    s=${s//[$'\001'-$'\037']/ }
    _vt_buf+=",\"$1\":\"$s\""
}

# x / y rounded, for x, y >= 0 (y > 0).
_vt_div() {
    _vt_q=$(((2 * $1 + $2) / (2 * $2)))
}

# A value scaled by 10000 as a decimal with four places, in _vt_f.
_vt_dec4() {
    printf -v _vt_f '%d.%04d' $(($1 / 10000)) $(($1 % 10000))
}

# A JSON block from _vt_buf's ",..." pairs (empty when nothing was measured).
_vt_block() {
    if [[ -n $_vt_buf ]]; then
        _vt_out+="${_vt_sep}\"$1\":{${_vt_buf#,}}"
        _vt_sep=,
    fi
}

# The first word of a file's first line in _vt_v (empty when unreadable).
_vt_first() {
    _vt_v=
    read -r _vt_v _ 2>/dev/null <"$1"
}

_vt_is_job_name() {
    local name=$1 id
    [[ -n ${SLURM_JOB_ID-} && $name == "job_$SLURM_JOB_ID" ]] && return 0
    for id in "${PBS_JOBID-}" "${LSB_JOBID-}" "${JOB_ID-}"; do
        # The id whole, not a part of a longer number: job 42 is not job 420.
        [[ -n $id && $name =~ (^|[^0-9])"$id"([^0-9]|$) ]] && return 0
    done
    return 1
}

# The job's own cgroup among the ancestors of a cgroup path, in _vt_jobpath (else empty).
_vt_job_ancestor() {
    local path=$1
    _vt_jobpath=
    while [[ -n $path && $path != / ]]; do
        if _vt_is_job_name "${path##*/}"; then
            _vt_jobpath=$path
            return 0
        fi
        path=${path%/*}
    done
    return 1
}

# Where the job's cgroups are: _vt_cgv (v1, v2 or empty), _vt_cgscope, _vt_cgdir[controller].
_vt_cgroup_init() {
    local line pre post fstype source opts opt mnt root id ctrls path c
    local -A mnt_of root_of path_of
    local v2mnt= v2root= v2path=
    _vt_cgv= _vt_cgscope=shared
    _vt_cgdir=()
    while IFS= read -r line; do
        pre=${line%% - *} post=${line#* - }
        read -r fstype source opts <<<"$post"
        read -r _ _ _ root mnt _ <<<"$pre"
        if [[ $fstype == cgroup2 ]]; then
            v2mnt=$mnt v2root=$root
        elif [[ $fstype == cgroup ]]; then
            IFS=, read -ra ctrls <<<"$opts"
            for opt in "${ctrls[@]}"; do
                case $opt in memory | cpuacct | cpu | blkio) mnt_of[$opt]=$mnt root_of[$opt]=$root ;; esac
            done
        fi
    done 2>/dev/null </proc/self/mountinfo
    while IFS=: read -r id ctrls path; do
        if [[ $id == 0 && -z $ctrls ]]; then
            v2path=$path
        else
            IFS=, read -ra c <<<"$ctrls"
            for opt in "${c[@]}"; do path_of[$opt]=$path; done
        fi
    done 2>/dev/null </proc/"$_vt_root"/cgroup
    if [[ -n ${mnt_of[memory]-} && -n ${path_of[memory]-} ]]; then
        _vt_cgv=v1
        _vt_job_ancestor "${path_of[memory]}" && _vt_cgscope=job
        for c in memory cpuacct cpu blkio; do
            [[ -n ${mnt_of[$c]-} && -n ${path_of[$c]-} ]] || continue
            path=${path_of[$c]}
            if _vt_job_ancestor "$path"; then
                path=$_vt_jobpath
            elif [[ $_vt_cgscope == job ]]; then
                continue # this controller's cgroup is not the job's: its figures are not
            fi
            root=${root_of[$c]}
            [[ $root != / && $path == "$root"* ]] && path=${path#"$root"}
            _vt_cgdir[$c]=${mnt_of[$c]}${path%/}
        done
    elif [[ -n $v2mnt && -n $v2path ]]; then
        path=$v2path
        if _vt_job_ancestor "$path"; then
            path=$_vt_jobpath
            _vt_cgscope=job
        fi
        [[ $v2root != / && $path == "$v2root"* ]] && path=${path#"$v2root"}
        path=$v2mnt${path%/}
        if [[ -e $path/memory.current || -e $path/cpu.stat ]]; then
            _vt_cgv=v2
            _vt_cgdir[unified]=$path
        fi
    fi
}

# key value lines (memory.stat, cpu.stat, cpuacct.stat, ...) into the associative _vt_kvs.
_vt_read_pairs() {
    local k v
    _vt_kvs=()
    while read -r k v _; do
        [[ -n $k ]] && _vt_kvs[$k]=$v
    done 2>/dev/null <"$1"
}

# "some ... total=N" / "full ... total=N" of a PSI file into _vt_psi_some, _vt_psi_full.
_vt_read_psi() {
    local kind rest
    _vt_psi_some= _vt_psi_full=
    while read -r kind rest; do
        [[ $rest == *total=* ]] || continue
        rest=${rest##*total=}
        case $kind in some) _vt_psi_some=${rest%% *} ;; full) _vt_psi_full=${rest%% *} ;; esac
    done 2>/dev/null <"$1"
}

_vt_cgroup_v1() {
    local d k dev op n rd= wr= ops_r= ops_w=
    _vt_cg_rss=
    if [[ -n ${_vt_cgdir[memory]-} ]]; then
        d=${_vt_cgdir[memory]}
        _vt_first "$d/memory.usage_in_bytes" && _vt_kv memory_current "$_vt_v"
        _vt_first "$d/memory.max_usage_in_bytes" && _vt_kv memory_peak "$_vt_v"
        _vt_read_pairs "$d/memory.stat"
        _vt_cg_rss=${_vt_kvs[total_rss]-${_vt_kvs[rss]-}}
        _vt_first "$d/memory.limit_in_bytes"
        # The "unlimited" value is near 2^63 (its exact value depends on the page size).
        [[ -n $_vt_v ]] && ((_vt_v < 4611686018427387904)) && _vt_cg_limit=$_vt_v
        _vt_read_pairs "$d/memory.oom_control"
        _vt_cg_oom=${_vt_kvs[oom_kill]-}
    fi
    if [[ -n ${_vt_cgdir[cpuacct]-} ]]; then
        d=${_vt_cgdir[cpuacct]}
        _vt_first "$d/cpuacct.usage" && [[ -n $_vt_v ]] && _vt_kv cpu_usage_usec $((_vt_v / 1000))
        _vt_read_pairs "$d/cpuacct.stat"
        # Ticks of USER_HZ (100 a second): 10000 us each.
        [[ -n ${_vt_kvs[user]-} ]] && _vt_kv cpu_user_usec $((_vt_kvs[user] * 10000))
        [[ -n ${_vt_kvs[system]-} ]] && _vt_kv cpu_system_usec $((_vt_kvs[system] * 10000))
    fi
    if [[ -n ${_vt_cgdir[blkio]-} ]]; then
        d=${_vt_cgdir[blkio]}
        while read -r dev op n; do
            case $op in Read) rd=$((${rd:-0} + n)) ;; Write) wr=$((${wr:-0} + n)) ;; esac
        done 2>/dev/null <"$d/blkio.throttle.io_service_bytes"
        while read -r dev op n; do
            case $op in Read) ops_r=$((${ops_r:-0} + n)) ;; Write) ops_w=$((${ops_w:-0} + n)) ;; esac
        done 2>/dev/null <"$d/blkio.throttle.io_serviced"
        [[ -r $d/blkio.throttle.io_service_bytes ]] && rd=${rd:-0} wr=${wr:-0}
        [[ -r $d/blkio.throttle.io_serviced ]] && ops_r=${ops_r:-0} ops_w=${ops_w:-0}
        _vt_kv io_read_bytes "$rd"
        _vt_kv io_write_bytes "$wr"
        _vt_kv io_read_ops "$ops_r"
        _vt_kv io_write_ops "$ops_w"
    fi
    if [[ -n ${_vt_cgdir[cpu]-} ]]; then
        d=${_vt_cgdir[cpu]}
        _vt_first "$d/cpu.cfs_quota_us"
        # -1 is no quota: 0, as Fusion writes it.
        [[ -n $_vt_v ]] && { ((_vt_v < 0)) && _vt_cg_quota=0 || _vt_cg_quota=$_vt_v; }
        _vt_first "$d/cpu.cfs_period_us" && _vt_cg_period=$_vt_v
        _vt_read_pairs "$d/cpu.stat"
        _vt_cg_thr=${_vt_kvs[nr_throttled]-}
        [[ -n ${_vt_kvs[throttled_time]-} ]] && _vt_cg_thr_us=$((_vt_kvs[throttled_time] / 1000))
    fi
}

_vt_cgroup_v2() {
    local d=${_vt_cgdir[unified]} dev f k rd= wr= ops_r= ops_w= kind
    _vt_first "$d/memory.current" && _vt_kv memory_current "$_vt_v"
    _vt_first "$d/memory.peak" && _vt_kv memory_peak "$_vt_v"
    _vt_read_pairs "$d/memory.stat"
    _vt_cg_rss=${_vt_kvs[anon]-}
    _vt_first "$d/memory.max"
    [[ $_vt_v =~ ^[0-9]+$ ]] && _vt_cg_limit=$_vt_v
    _vt_read_pairs "$d/memory.events"
    _vt_cg_oom=${_vt_kvs[oom_kill]-}
    _vt_read_pairs "$d/cpu.stat"
    _vt_kv cpu_usage_usec "${_vt_kvs[usage_usec]-}"
    _vt_kv cpu_user_usec "${_vt_kvs[user_usec]-}"
    _vt_kv cpu_system_usec "${_vt_kvs[system_usec]-}"
    _vt_cg_thr=${_vt_kvs[nr_throttled]-}
    _vt_cg_thr_us=${_vt_kvs[throttled_usec]-}
    if [[ -r $d/io.stat ]]; then
        rd=0 wr=0 ops_r=0 ops_w=0
        while read -r dev f; do
            for k in $f; do
                case $k in
                rbytes=*) rd=$((rd + ${k#*=})) ;;
                wbytes=*) wr=$((wr + ${k#*=})) ;;
                rios=*) ops_r=$((ops_r + ${k#*=})) ;;
                wios=*) ops_w=$((ops_w + ${k#*=})) ;;
                esac
            done
        done 2>/dev/null <"$d/io.stat"
    fi
    _vt_kv io_read_bytes "$rd"
    _vt_kv io_write_bytes "$wr"
    _vt_kv io_read_ops "$ops_r"
    _vt_kv io_write_ops "$ops_w"
    k= f=
    read -r k f _ 2>/dev/null <"$d/cpu.max"
    if [[ $f =~ ^[0-9]+$ ]]; then
        _vt_cg_period=$f
        [[ $k =~ ^[0-9]+$ ]] && _vt_cg_quota=$k || _vt_cg_quota=0
    fi
    for kind in cpu memory io; do
        _vt_read_psi "$d/$kind.pressure"
        _vt_psi[${kind}_psi_some]=$_vt_psi_some
        _vt_psi[${kind}_psi_full]=$_vt_psi_full
    done
}

# The cgroup block into _vt_buf; the anonymous memory in use in _vt_cg_rss.
_vt_cgroup() {
    local k
    _vt_cg_rss= _vt_cg_limit= _vt_cg_oom= _vt_cg_quota= _vt_cg_period= _vt_cg_thr= _vt_cg_thr_us=
    _vt_psi=()
    _vt_buf=
    [[ -n $_vt_cgv ]] || return 0
    _vt_kv version "\"$_vt_cgv\""
    _vt_kv scope "\"$_vt_cgscope\""
    if [[ $_vt_cgv == v1 ]]; then _vt_cgroup_v1; else _vt_cgroup_v2; fi
    if [[ -n $_vt_cg_rss ]]; then
        ((_vt_cg_rss > _vt_cg_peak_rss)) && _vt_cg_peak_rss=$_vt_cg_rss
        _vt_kv memory_rss "$_vt_cg_rss"
        _vt_kv memory_peak_rss "$_vt_cg_peak_rss"
    fi
    _vt_kv memory_limit "$_vt_cg_limit"
    _vt_kv cpu_quota "$_vt_cg_quota"
    _vt_kv cpu_period "$_vt_cg_period"
    _vt_kv memory_oom_kills "$_vt_cg_oom"
    _vt_kv cpu_nr_throttled "$_vt_cg_thr"
    _vt_kv cpu_throttled_usec "$_vt_cg_thr_us"
    for k in cpu_psi_some cpu_psi_full memory_psi_some memory_psi_full io_psi_some io_psi_full; do
        _vt_kv "$k" "${_vt_psi[$k]-}"
    done
}

# The job's process tree (the main shell and its descendants, not the sampler's) in _vt_pids.
_vt_tree() {
    local i=0 pid f kids line rest
    local -a stat
    _vt_pids=("$_vt_root")
    if [[ -z $_vt_children_files ]]; then
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
    while ((i < ${#_vt_pids[@]})); do
        pid=${_vt_pids[i]}
        i=$((i + 1))
        if [[ -n $_vt_children_files ]]; then
            for f in /proc/"$pid"/task/*/children; do
                # One line without a newline: read says "end of file" and still reads it.
                kids=
                read -r kids 2>/dev/null <"$f"
                for f in $kids; do [[ $f != "$_vt_self" ]] && _vt_pids+=("$f"); done
            done
        else
            for f in ${kids_of[$pid]-}; do [[ $f != "$_vt_self" ]] && _vt_pids+=("$f"); done
        fi
    done
}

# The tree's usage now: _vt_ticks, _vt_rss, _vt_vmem (kB), _vt_io[6], context switches.
_vt_proc() {
    local pid line rest k v key hwm peak rss size vol inv i
    local -a stat
    local -A seen
    _vt_tree
    _vt_ticks=0 _vt_rss=0 _vt_vmem=0 vol=0 inv=0
    _vt_io=(0 0 0 0 0 0)
    for pid in "${_vt_pids[@]}"; do
        read -r line 2>/dev/null </proc/"$pid"/stat || continue
        rest=${line##*) }
        stat=($rest)
        _vt_ticks=$((_vt_ticks + stat[11] + stat[12] + stat[13] + stat[14]))
        key=$pid:${stat[19]}
        hwm=0 peak=0 rss=0 size=0
        while IFS=$': \t' read -r k v _; do
            case $k in
            VmPeak) peak=$v ;;
            VmSize) size=$v ;;
            VmHWM) hwm=$v ;;
            VmRSS) rss=$v ;;
            voluntary_ctxt_switches) seen[$key]=$v ;;
            nonvoluntary_ctxt_switches) seen[$key]+=" $v" ;;
            esac
        done 2>/dev/null </proc/"$pid"/status
        _vt_rss=$((_vt_rss + rss)) _vt_vmem=$((_vt_vmem + size))
        ((hwm > _vt_peak_rss)) && _vt_peak_rss=$hwm
        ((peak > _vt_peak_vmem)) && _vt_peak_vmem=$peak
        v=${seen[$key]-0 0}
        vol=$((vol + ${v%% *})) inv=$((inv + ${v#* }))
        i=0
        while IFS=$': \t' read -r k v; do
            case $k in
            rchar | wchar | syscr | syscw | read_bytes | write_bytes)
                _vt_io[i]=$((_vt_io[i] + v))
                i=$((i + 1))
                ;;
            esac
        done 2>/dev/null </proc/"$pid"/io
    done
    # A process gone since the last sample keeps its last counts of context switches.
    for key in "${!_vt_ctxt[@]}"; do
        if [[ -z ${seen[$key]-} ]]; then
            v=${_vt_ctxt[$key]}
            _vt_gone_vol=$((_vt_gone_vol + ${v%% *})) _vt_gone_inv=$((_vt_gone_inv + ${v#* }))
        fi
    done
    _vt_ctxt=()
    for key in "${!seen[@]}"; do _vt_ctxt[$key]=${seen[$key]}; done
    _vt_vol=$((vol + _vt_gone_vol)) _vt_inv=$((inv + _vt_gone_inv))
    ((_vt_rss > _vt_peak_rss)) && _vt_peak_rss=$_vt_rss
    ((_vt_vmem > _vt_peak_vmem)) && _vt_peak_vmem=$_vt_vmem
    # The tree's CPU time can only grow: a process reparented away takes its time with it.
    _vt_ticks=$((_vt_ticks - _vt_ticks0))
    ((_vt_ticks < _vt_ticks_max)) && _vt_ticks=$_vt_ticks_max
    _vt_ticks_max=$_vt_ticks
}

_vt_proc_block() {
    local i realtime=$((_vt_ms - _vt_t0))
    _vt_buf=
    _vt_kv realtime "$realtime"
    # Percent of one core x10: CPU ms (10 a tick) * 1000 / elapsed ms.
    ((realtime > 0)) && _vt_kv pct_cpu $((_vt_ticks * 10 * 1000 / realtime))
    _vt_ks cpu_name "$_vt_cpu_name"
    _vt_ks arch "$_vt_arch"
    ((_vt_memtotal > 0)) && _vt_kv pct_mem $((_vt_last_rss * 1000 / _vt_memtotal))
    _vt_kv rss "$_vt_last_rss"
    _vt_kv vmem "$_vt_last_vmem"
    _vt_kv peak_rss "$_vt_peak_rss"
    _vt_kv peak_vmem "$_vt_peak_vmem"
    local names=(rchar wchar syscr syscw read_bytes write_bytes)
    for i in 0 1 2 3 4 5; do
        ((_vt_io[i] - _vt_io0[i] >= 0)) && _vt_kv "${names[i]}" $((_vt_io[i] - _vt_io0[i]))
    done
    _vt_kv vol_ctxt "$_vt_vol"
    _vt_kv inv_ctxt "$_vt_inv"
}

# A number of nvidia-smi's (integer, or decimal: truncated) in _vt_n; empty when unknown
# ("[N/A]", "[Not Supported]", "[Unknown Error]", ...).
_vt_num() {
    _vt_n=
    local s=${1//[[:space:]]/}
    [[ $s =~ ^([0-9]+)(\.[0-9]*)?$ ]] && _vt_n=$((10#${BASH_REMATCH[1]}))
}

_vt_trim() {
    _vt_s=${1#"${1%%[![:space:]]*}"}
    _vt_s=${_vt_s%"${_vt_s##*[![:space:]]}"}
}

# One nvidia-smi reading, weighed by this sample's share of the run (_vt_weight ms).
_vt_gpu() {
    local out line d n=0 f used_sum=0 used_ok=1 total_sum=0 total_ok=1
    local u_sum=0 u_n=0 b_sum=0 b_n=0 u b used
    local -a parts
    out=$("$_vt_nvsmi" --query-gpu=index,uuid,name,memory.total,driver_version,utilization.gpu,utilization.memory,memory.used --format=csv,noheader,nounits ${_vt_gpu_ids:+-i "$_vt_gpu_ids"} </dev/null 2>/dev/null) || return 0
    local -a rows=()
    while IFS= read -r line; do
        IFS=, read -ra parts <<<"$line"
        ((${#parts[@]} >= 8)) || continue
        _vt_trim "${parts[0]}"
        [[ $_vt_s =~ ^[0-9]+$ ]] || continue
        rows+=("$line")
    done <<<"$out"
    ((${#rows[@]})) || return 0 # not a reading (a driver's error text): this sample has none
    for line in "${rows[@]}"; do
        IFS=, read -ra parts <<<"$line"
        _vt_trim "${parts[1]}"
        d=$_vt_s
        [[ -n ${_vt_g_seen[$d]-} ]] || {
            _vt_g_order+=("$d")
            _vt_g_seen[$d]=1
        }
        _vt_trim "${parts[0]}" && _vt_g_index[$d]=$_vt_s
        _vt_trim "${parts[2]}" && _vt_g_name[$d]=$_vt_s
        _vt_trim "${parts[4]}" && _vt_g_driver[$d]=$_vt_s
        _vt_num "${parts[3]}"
        if [[ -n $_vt_n ]]; then
            _vt_g_mem[$d]=$_vt_n
            total_sum=$((total_sum + _vt_n))
        else total_ok=0; fi
        _vt_num "${parts[5]}"
        u=$_vt_n
        _vt_num "${parts[6]}"
        b=$_vt_n
        _vt_num "${parts[7]}"
        _vt_gpu_account "$d" "$u" "$_vt_n" "$b" "${_vt_g_mem[$d]-}"
        if [[ -n $u ]]; then u_sum=$((u_sum + u)) u_n=$((u_n + 1)); fi
        if [[ -n $b ]]; then b_sum=$((b_sum + b)) b_n=$((b_n + 1)); fi
        if [[ -n $_vt_n ]]; then used_sum=$((used_sum + _vt_n)); else used_ok=0; fi
        n=$((n + 1))
    done
    _vt_g_devices=$n
    ((total_ok)) && _vt_g_mem[all]=$total_sum
    # Several devices: the mean utilisation, the summed memory (x1000 keeps the mean's
    # fraction in integer arithmetic).
    u= b= used=
    ((u_n)) && u=$((u_sum * 1000 / u_n)) _vt_series_gpu=$((u_sum / u_n))
    ((b_n)) && b=$((b_sum * 1000 / b_n)) _vt_series_bw=$((b_sum / b_n))
    ((used_ok)) && used=$used_sum _vt_series_mem=$used_sum
    _vt_gpu_account all "$u" "$used" "$b" "" 1000
    _vt_g_samples=$((_vt_g_samples + 1))
}

# Running sums of one device (or "all"): util, used MiB, bandwidth util (scaled by $6).
_vt_gpu_account() {
    local d=$1 u=$2 used=$3 b=$4 scale=${6:-1} w=$_vt_weight
    if [[ -n $u ]]; then
        _vt_g_us[$d]=$((${_vt_g_us[$d]:-0} + u * w)) _vt_g_uw[$d]=$((${_vt_g_uw[$d]:-0} + w))
        ((u > ${_vt_g_up[$d]:-0})) || [[ -z ${_vt_g_up[$d]-} ]] && _vt_g_up[$d]=$u
        ((u > 0)) && _vt_g_act[$d]=$((${_vt_g_act[$d]:-0} + w))
        _vt_g_act[$d]=${_vt_g_act[$d]:-0}
        _vt_g_scale[$d]=$scale
    fi
    if [[ -n $used ]]; then
        _vt_g_ms[$d]=$((${_vt_g_ms[$d]:-0} + used * w)) _vt_g_mw[$d]=$((${_vt_g_mw[$d]:-0} + w))
        ((used > ${_vt_g_mp[$d]:-0})) || [[ -z ${_vt_g_mp[$d]-} ]] && _vt_g_mp[$d]=$used
    fi
    if [[ -n $b ]]; then
        _vt_g_bs[$d]=$((${_vt_g_bs[$d]:-0} + b * w)) _vt_g_bw[$d]=$((${_vt_g_bw[$d]:-0} + w))
        ((b > ${_vt_g_bp[$d]:-0})) || [[ -z ${_vt_g_bp[$d]-} ]] && _vt_g_bp[$d]=$b
    fi
}

# The figures of one device (or "all") into _vt_buf.
_vt_gpu_fields() {
    local d=$1 scale=${_vt_g_scale[$1]:-${2:-1}} mem=${_vt_g_mem[$1]-} avg_milli
    if [[ -n ${_vt_g_uw[$d]-} ]]; then
        _vt_kv active_time "${_vt_g_act[$d]}"
        _vt_div "${_vt_g_us[$d]}" $((_vt_g_uw[$d] * scale)) && _vt_kv pct "$_vt_q"
        _vt_div "${_vt_g_up[$d]}" "$scale" && _vt_kv peak "$_vt_q"
    fi
    if [[ -n ${_vt_g_mw[$d]-} ]]; then
        avg_milli=$((_vt_g_ms[$d] * 1000 / _vt_g_mw[$d]))
        if [[ -n $mem ]] && ((mem > 0)); then
            # Percent x10000: avg/mem*100 with the mean to a thousandth of a MiB.
            _vt_div $((avg_milli * 1000)) "$mem" && _vt_dec4 "$_vt_q" && _vt_kv pct_mem "$_vt_f"
            _vt_div $((_vt_g_mp[$d] * 1000000)) "$mem" && _vt_dec4 "$_vt_q" && _vt_kv peak_mem "$_vt_f"
        fi
        _vt_div "$avg_milli" 1000 && _vt_kv avg_mem "$_vt_q"
        _vt_kv peak_mem_used "${_vt_g_mp[$d]}"
    fi
    if [[ -n ${_vt_g_bw[$d]-} ]]; then
        _vt_div "${_vt_g_bs[$d]}" $((_vt_g_bw[$d] * scale)) && _vt_kv avg_mem_bw_util "$_vt_q"
        _vt_div "${_vt_g_bp[$d]}" "$scale" && _vt_kv peak_mem_bw_util "$_vt_q"
    fi
}

_vt_gpu_block() {
    local d names= name first= devices= sep=
    _vt_buf=
    ((_vt_g_samples)) || return 0
    for d in "${_vt_g_order[@]}"; do
        name=${_vt_g_name[$d]-}
        [[ -z $first ]] && first=$name
        [[ $name != "$first" ]] && names=mixed
    done
    # Devices of several models: their names, in order.
    if [[ $names == mixed ]]; then
        name=
        for d in "${_vt_g_order[@]}"; do name+="${name:+, }${_vt_g_name[$d]-}"; done
    else
        name=$first
    fi
    if ((${#_vt_g_order[@]} > 1)); then
        for d in "${_vt_g_order[@]}"; do
            _vt_buf=
            _vt_kv index "${_vt_g_index[$d]-}"
            _vt_ks uuid "$d"
            _vt_ks name "${_vt_g_name[$d]-}"
            _vt_kv mem "${_vt_g_mem[$d]-}"
            _vt_gpu_fields "$d"
            devices+="$sep{${_vt_buf#,}}"
            sep=,
        done
    fi
    _vt_buf=
    _vt_ks name "$name"
    _vt_kv mem "${_vt_g_mem[all]-}"
    _vt_ks driver "${_vt_g_driver[${_vt_g_order[0]}]-}"
    _vt_gpu_fields all 1000
    _vt_ks scope "$_vt_gpu_scope"
    [[ -n $devices ]] && _vt_buf+=",\"devices\":[$devices]"
}

# Take a sample and write the files; $1: "periodic" or "final".
_vt_sample() {
    local kind=$1 cpu=- rss mem=- tmp
    _vt_now
    _vt_proc
    # The final sample sees the job over: what it used is the last reading while it ran.
    if [[ $kind == periodic || $_vt_samples == 0 ]]; then
        _vt_last_rss=$_vt_rss _vt_last_vmem=$_vt_vmem
    fi
    _vt_series_gpu=- _vt_series_mem=- _vt_series_bw=-
    # The final sample reads no GPU: the job is over, its GPU idle now.
    [[ $kind == periodic && -n $_vt_nvsmi ]] && _vt_gpu
    _vt_out= _vt_sep=
    _vt_proc_block
    _vt_block proc
    _vt_cgroup
    _vt_block cgroup
    _vt_gpu_block
    _vt_block gpu
    _vt_samples=$((_vt_samples + 1))
    _vt_buf=
    _vt_kv version 1
    _vt_kv interval "$_vt_interval"
    _vt_kv samples "$_vt_samples"
    _vt_kv start "$_vt_t0"
    _vt_kv updated "$_vt_ms"
    [[ $kind == final ]] && _vt_kv final true || _vt_kv final false
    _vt_block sampler
    if [[ $kind == periodic || $_vt_periodic -gt 0 ]]; then
        if ((_vt_ms > _vt_prev_ms)); then
            cpu=$(((_vt_ticks - _vt_prev_ticks) * 10 * 1000 / (_vt_ms - _vt_prev_ms)))
        fi
        [[ $_vt_cgscope == job && -n $_vt_cg_rss ]] && mem=$_vt_cg_rss
        if ((_vt_periodic == 0)); then
            printf '#veglia-trace-series 1 t cpu rss mem gpu gpu_mem gpu_bw\n' >"$_vt_dir/_veglia_trace.series"
        fi
        printf '%s %s %s %s %s %s %s\n' "$_vt_ms" "$cpu" "$_vt_rss" "$mem" \
            "$_vt_series_gpu" "$_vt_series_mem" "$_vt_series_bw" >>"$_vt_dir/_veglia_trace.series"
    fi
    _vt_prev_ms=$_vt_ms _vt_prev_ticks=$_vt_ticks
    if [[ $kind == final && $_vt_periodic == 0 ]]; then
        # No periodic file to keep whole: a direct write, and no program started.
        printf '{%s}\n' "$_vt_out" >"$_vt_dir/_veglia_trace.json"
    else
        tmp=$_vt_dir/_veglia_trace.json.tmp
        printf '{%s}\n' "$_vt_out" >"$tmp" && mv -f -- "$tmp" "$_vt_dir/_veglia_trace.json" </dev/null
    fi
    [[ $kind == periodic ]] && _vt_periodic=$((_vt_periodic + 1))
}

# The sampler: $1 the interval (seconds), $2 the job script's shell.
veglia_trace_loop() {
    # The job's shell options are not the sampler's: no -e, -u, -x; globbing on, for
    # /proc/PID/task/*/children.
    set +euxfo pipefail
    _vt_root=$2 _vt_self=$BASHPID _vt_dir=${veglia_trace_dir:-$PWD}
    _vt_interval=$1
    [[ $_vt_interval =~ ^[0-9]*\.?[0-9]+$ ]] || _vt_interval=10
    local sec=${_vt_interval%%.*} frac=
    [[ $_vt_interval == *.* ]] && frac=${_vt_interval#*.}
    frac=${frac}000
    local interval_ms=$((10#${sec:-0} * 1000 + 10#${frac:0:3}))
    ((interval_ms > 0)) || interval_ms=10000
    local line rest k v i
    local -a stat
    _vt_now
    _vt_t0=$_vt_ms
    # What the shell had used before the job's commands is not the job's.
    read -r line 2>/dev/null </proc/"$_vt_root"/stat
    rest=${line##*) }
    stat=($rest)
    _vt_ticks0=$((stat[11] + stat[12] + stat[13] + stat[14]))
    _vt_io0=(0 0 0 0 0 0)
    i=0
    while IFS=$': \t' read -r k v; do
        case $k in rchar | wchar | syscr | syscw | read_bytes | write_bytes)
            _vt_io0[i]=$v
            i=$((i + 1))
            ;;
        esac
    done 2>/dev/null </proc/"$_vt_root"/io
    _vt_ticks_max=0 _vt_peak_rss=0 _vt_peak_vmem=0 _vt_gone_vol=0 _vt_gone_inv=0
    _vt_cg_peak_rss=0 _vt_samples=0 _vt_periodic=0 _vt_prev_ms=$_vt_t0 _vt_prev_ticks=0
    _vt_last_rss= _vt_last_vmem=
    declare -gA _vt_ctxt=() _vt_cgdir=() _vt_kvs=() _vt_psi=()
    declare -gA _vt_g_seen=() _vt_g_index=() _vt_g_name=() _vt_g_driver=() _vt_g_mem=()
    declare -gA _vt_g_us=() _vt_g_uw=() _vt_g_up=() _vt_g_act=() _vt_g_scale=()
    declare -gA _vt_g_ms=() _vt_g_mw=() _vt_g_mp=() _vt_g_bs=() _vt_g_bw=() _vt_g_bp=()
    _vt_g_order=() _vt_g_samples=0
    _vt_children_files=
    [[ -r /proc/$_vt_root/task/$_vt_root/children ]] && _vt_children_files=1
    _vt_memtotal=0 _vt_cpu_name=
    while IFS=$': \t' read -r k v _; do
        [[ $k == MemTotal ]] && _vt_memtotal=$v && break
    done 2>/dev/null </proc/meminfo
    while IFS=: read -r k v; do
        if [[ $k == "model name"* ]]; then
            _vt_trim "$v"
            _vt_cpu_name=$_vt_s
            break
        fi
    done 2>/dev/null </proc/cpuinfo
    case ${HOSTTYPE:-} in
    x86_64) _vt_arch=linux/amd64 ;;
    aarch64) _vt_arch=linux/arm64 ;;
    *) _vt_arch=linux/${HOSTTYPE:-unknown} ;;
    esac
    _vt_cgroup_init
    # The job's GPUs: those the scheduler gave it, else every one the node shows.
    _vt_nvsmi= _vt_gpu_ids= _vt_gpu_scope=job
    local -a path_dirs
    IFS=: read -ra path_dirs <<<"$PATH"
    for v in "${path_dirs[@]}"; do
        [[ -x $v/nvidia-smi ]] && _vt_nvsmi=$v/nvidia-smi && break
    done
    if [[ -n ${CUDA_VISIBLE_DEVICES+set} ]]; then
        case $CUDA_VISIBLE_DEVICES in "" | -1 | NoDevFiles) _vt_nvsmi= ;; esac
        _vt_gpu_ids=$CUDA_VISIBLE_DEVICES
    elif [[ -n ${SLURM_JOB_GPUS-} || -n ${SLURM_STEP_GPUS-} ]]; then
        _vt_gpu_ids=${SLURM_JOB_GPUS:-$SLURM_STEP_GPUS}
    elif [[ -n ${GPU_DEVICE_ORDINAL-} ]]; then
        _vt_gpu_ids=$GPU_DEVICE_ORDINAL
    else
        _vt_gpu_scope=node
    fi
    _vt_stop=
    trap '_vt_stop=1' TERM HUP
    # The first samples come quickly (a short job gets some), then one an interval.
    local -a gaps=(250 250 500 1000 2000 4000)
    local n=0 target=$_vt_t0 wait_ms
    while [[ -z $_vt_stop ]]; do
        _vt_weight=${gaps[n]:-$interval_ms}
        ((_vt_weight > interval_ms)) && _vt_weight=$interval_ms
        n=$((n + 1))
        target=$((target + _vt_weight))
        _vt_now
        wait_ms=$((target - _vt_ms))
        # Late (a slow sample, a busy node): no burst of samples to catch up.
        ((wait_ms < 1)) && wait_ms=1 target=$_vt_ms
        printf -v v '%d.%03d' $((wait_ms / 1000)) $((wait_ms % 1000))
        read -r -t "$v" line
        i=$?
        # 1: the main shell closed the pipe (the job is over) or died.
        ((i == 0 || i > 128)) || break
        [[ -z $_vt_stop ]] || break
        _vt_sample periodic
    done
    _vt_sample final
    exit 0
}
