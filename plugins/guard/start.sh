# veglia core.guard: what the job script's own shell holds of the guard watcher (bash >= 4.4):
#     veglia_guard_start INTERVAL AWAY_AFTER HEARTBEAT GRACE TABLE...   # before the commands
#     {veglia_guard_fd}>&- COMMAND     # each command line: the job must not hold the pipe
#     veglia_guard_stop                # after them, whatever their exit
# The watcher (runner.sh, uploaded as _veglia_guard.sh) is read by the watcher's own shell, a
# process substitution reading a pipe from this one: the pipe's end (this shell closed it, or
# died) wakes it at once, so it never outlives the job.

veglia_guard_start() {
    veglia_guard_dir=$PWD
    local runner=$veglia_guard_dir/_veglia_guard.sh
    # Nothing is checked before the first interval: a job that ends sooner costs a fork and a
    # read, not the watcher's setup, and leaves no file to retrieve (the throughput of short
    # jobs). The log is opened only for the watcher's setup, for the same reason.
    exec {veglia_guard_fd}> >({
        trap '' TERM HUP INT
        printf -v _veglia_guard_started '%(%s)T' -1
        IFS= read -r -t "$1" _
        if (($? > 128)); then
            { . "$runner" && veglia_guard_loop "$$" "$@"; } 2>>"$veglia_guard_dir/_veglia_guard.log"
        fi
    } >/dev/null 2>/dev/null)
    veglia_guard_pid=$!
}

veglia_guard_stop() {
    [[ -n ${veglia_guard_pid-} ]] || return 0
    local status=0
    exec {veglia_guard_fd}>&-
    # bash >= 4.4 waits for a process substitution; an older one says "not a child" (127).
    wait "$veglia_guard_pid" 2>/dev/null || status=$?
    if ((status == 127)); then
        while [[ -d /proc/$veglia_guard_pid ]]; do sleep 0.05; done
    fi
    veglia_guard_pid=
}
