# veglia core.trace: what the job script's own shell holds of the sampler (bash >= 4.4):
#     veglia_trace_start INTERVAL      # before the job's commands
#     {veglia_trace_fd}>&- COMMAND     # each command line: the job must not hold the pipe
#     veglia_trace_stop                # after them, whatever their exit
# The sampler's functions (sampler.sh, uploaded as _veglia_trace.sh) are read by the
# sampler's shell, not by the job's: under a tight `ulimit -v` the job's shell is as small as
# without the sampler, and a sampler that cannot start leaves the job as it was.

veglia_trace_start() {
    veglia_trace_dir=$PWD
    local sampler=${veglia_trace_sampler:-$veglia_trace_dir/_veglia_trace.sh} src
    # Opened here, before the job's commands: a job that removes the file at once (cleans
    # its folder) still has its sampler, which reads the file through this descriptor.
    { exec {src}<"$sampler"; } 2>/dev/null || return 0
    exec {veglia_trace_fd}> >({ . /proc/self/fd/"$src" && veglia_trace_loop "$1" "$$"; } >/dev/null 2>&1)
    veglia_trace_pid=$!
    exec {src}<&-
}

veglia_trace_stop() {
    [[ -n ${veglia_trace_pid-} ]] || return 0
    local status=0
    exec {veglia_trace_fd}>&-
    # bash >= 4.4 waits for a process substitution; an older one says "not a child" (127).
    # `|| status=$?`: a job script under `set -e` must not end here.
    wait "$veglia_trace_pid" 2>/dev/null || status=$?
    if ((status == 127)); then
        while [[ -d /proc/$veglia_trace_pid ]]; do sleep 0.05; done
    fi
    veglia_trace_pid=
}
