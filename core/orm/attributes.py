"""The names of the attributes the engine keeps on process nodes, each defined once.

Read them through the node's properties where there is one (``node.paused``,
``node.job_id``, ``node.scheduler_state``, ...); write and query them with these names, never
with the bare string (``node.set_attribute(SCHEDULER_STATE, ...)``,
``Node.attributes[SIMILARITY_KEY]``). ``tests/test_attribute_keys.py`` fails when a bare
one comes back in the core.
"""

from __future__ import annotations

# -- every process -----------------------------------------------------------------------------
#: Where, by whom and with what veglia the process was launched (a dict).
LAUNCH = "launch"
#: The caller's key for this child: a resumed workflow finds the child it launched by it.
CALL_KEY = "call_key"
#: True once handed to the daemon (submitted, not run in the foreground).
DAEMON = "daemon"
#: True while paused; PAUSED_REASON says why ("" when played again).
PAUSED = "paused"
PAUSED_REASON = "paused_reason"
#: {"action", "message"}: a kill, pause or play for the worker without a broker to carry out.
CONTROL_REQUEST = "control_request"
#: The pk of the process that ``veglia verify --rerun`` (a calc job) or ``veglia process
#: rerun`` (a workflow) ran this one again for.
RERUN_OF = "rerun_of"
#: On a calc job that ``veglia verify --rerun`` ran again and whose rerun made other content:
#: {"rerun": pk of the rerun, "at": ISO time, "sha256": [the stored SHA-256s it did not make
#: again]}. ``verify`` then reports the job as not reproducible and suggests no rerun.
NOT_REPRODUCIBLE = "not_reproducible"
#: A pipeline setup's run: {"setup": name, "version": n, "element": row id, "identity": ...}.
PIPELINE_RUN = "pipeline_run"
#: Which finished jobs are like this one (calc jobs, and the restart policy's workflow).
SIMILARITY_KEY = "similarity_key"

# -- workflows ---------------------------------------------------------------------------------
#: The pks of the children a workflow waits for, while it waits.
WAITING_FOR = "waiting_for"
#: A rerun (``veglia process rerun --from``): the step it went back to; the steps before it
#: reuse the children of the run it is a rerun of (RERUN_OF).
RERUN_FROM = "rerun_from"
#: {call key: pk}: the children of an earlier run a rerun took instead of launching them
#: (they keep their one ``call`` link, from the run that launched them).
REUSED_CALLS = "reused_calls"
#: [{"step", "failed", "to", "attempt"}]: each time a step's failure behaviour sent the
#: workflow back to an earlier step (``spec.on_failure``).
WENT_BACK = "went_back"
#: The inputs that are no nodes (``metadata``, a dynamic namespace's plain values), kept so
#: that ``veglia process rerun`` can launch the workflow again with all of its inputs.
PLAIN_INPUTS = "plain_inputs"

# -- calc jobs: what they were asked to run ----------------------------------------------------
#: The job options (``metadata.options``), as right-sizing, unblock or a queue move left them.
OPTIONS = "options"
#: The label of the computer.
COMPUTER = "computer"
#: {"pk", "label", "executable"} of the code, when there is one.
CODE = "code"
#: The monitors (their specs as dicts), their provenance, and their state between polls.
MONITORS = "monitors"
MONITOR_PROVENANCE = "monitor_provenance"
MONITOR_STATE = "monitor_state"
#: The hash caching compares; CACHED_FROM: {"pk", "uuid"} of the job whose outputs it reused.
CACHE_HASH = "cache_hash"
CACHED_FROM = "cached_from"
#: {option: {"from", "to"}} of the requests right-sizing changed.
RIGHT_SIZED = "right_sized"
#: [{"state", "from", "to", "wallclock_seconds", "reason", "moved", "time", ...}]: the
#: moves to a queue with a longer limit, and those veglia could not make, once per state
#: ("pending", "running"); see ``veglia.engine.calcjob.queue_move``.
QUEUE_MOVES = "queue_moves"

# -- calc jobs: how they ran -------------------------------------------------------------------
#: The job's command lines as its script runs them, without the plugins' wraps (a list).
COMMAND_LINES = "command_lines"
#: The work dir on the computer, and the file patterns brought back from it.
REMOTE_WORKDIR = "remote_workdir"
RETRIEVE_LIST = "retrieve_list"
#: [[node UUID, its file, path in the work dir], ...]: the files copied in from other nodes
#: (``local_copy_list``), which ``veglia calcjob inputls`` lists with the job's own.
LOCAL_COPY_LIST = "local_copy_list"
#: {"time"}: when ``veglia calcjob cleanworkdir`` removed the work dir.
WORKDIR_CLEANED = "workdir_cleaned"
#: The scheduler's job id, and its state as last polled (a ``JobState`` value).
JOB_ID = "job_id"
SCHEDULER_STATE = "scheduler_state"
#: Times (seconds since the epoch) of the submission and of the first poll that saw it run.
SUBMITTED_AT = "submitted_at"
STARTED_AT = "started_at"
#: The scheduler's last view of the job (a ``JobInfo`` as a dict).
LAST_JOB_INFO = "last_job_info"
#: True once veglia cancelled the scheduler job.
JOB_CANCELLED = "job_cancelled"
#: {"job_id", "computer", "since", "attempts", "error"}: the process was killed and its
#: scheduler job is still to be cancelled (the daemon does it once the computer answers).
CANCEL_PENDING = "cancel_pending"
#: {"message", "resource_request"}: the scheduler refused a request the queue cannot give.
SUBMISSION_REJECTED = "submission_rejected"
#: {"reason", "time", "computer"}: held until ``veglia process unblock``.
BLOCKED = "blocked"
#: {"computer", "since", "next_probe"}: paused for an outage, played when the computer answers;
#: ``since`` is the first failed attempt of the transport step that ran out of attempts.
UNREACHABLE = "unreachable"
#: {"step", "attempt", "attempts", "error", "first_failure", "next_try"}: a transport step
#: whose last attempt failed, waiting to try again (``CalcJob.with_retries``); written with
#: the report of the failure, gone once an attempt succeeds. Times: seconds since the epoch.
BACKOFF = "backoff"
#: {"name", "message", "time", "retrieve", "parse", "override_exit_code"} of the monitor that
#: stopped the job.
STOPPED_BY_MONITOR = "stopped_by_monitor"
#: The queues of the computer with their limits, for a restart policy to choose from.
QUEUES = "queues"
#: What retrieving found: the job's exit status, failure, measured usage, skipped files.
JOB_OUTCOME = "job_outcome"
#: {"peak_memory_kb", "runtime_seconds", "source", ...}: what the job used, as measured.
USAGE = "usage"
#: The job's trace record, and the GPU block a plugin put on it (Nextflow's field names).
TRACE_RECORD = "trace_record"
#: [{"name", "live_trace"}]: the plugins' wraps around the job's commands (job_script_wrap).
JOB_SCRIPT_WRAPS = "job_script_wraps"
GPU_METRICS = "gpu_metrics"
#: {"latest", "series", "offset", "updated"}: what the live trace's sampler wrote, as of the
#: last poll of the running job (``veglia.engine.calcjob.live_trace``).
TRACE_LIVE = "trace_live"

# -- the restart policy (``core.restart``) -----------------------------------------------------
#: On the workflow: one dict per attempt (pk, job id, queue, requests, exit, decision, reason).
ATTEMPTS = "attempts"
#: On the workflow: the memory that, after a kill for memory, was enough.
MEMORY_AFTER_OOM_KB = "memory_after_oom_kb"
#: On an attempt's calc job after the first: {"attempt", "previous", "reason"}, written as
#: the policy submits it (``node.attempt`` reads the number; trace records carry it).
RESTART = "restart"

#: Every name above.
ALL_KEYS = frozenset(
    value for name, value in list(globals().items()) if name.isupper() and isinstance(value, str)
)
