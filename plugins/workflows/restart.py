"""``core.restart``: run one calc job until it succeeds, resubmitting it as its failure
calls for (the restart policy).

- killed for memory, or stopped near its limit by ``core.memory_ceiling``: resubmit with
  more, ×1.5, or the mean that similar jobs killed the same way finally needed when that is
  more, while a queue allows it;
- killed for wall time: twice the time, in a queue with a longer limit when the current one
  is too short (and no less memory);
- refused by the queue for its requests, or pending where it can never start: move to a
  queue that allows the requests, else lower them to what the queue allows;
- killed for another reason (node failure, cancelled): resubmit unchanged;
- stopped by ``core.unresponsive`` (running, but no CPU and no output for a while):
  resubmit unchanged once; a second time, the job has failed;
- failed on its own: resubmit unchanged once, then apply ``failure_behaviour``.

Each attempt is a child calc job (``call`` link) and a line in ``process report``; the
``attempts`` attribute lists them with the reason for each resubmission.
"""

from __future__ import annotations

import math
from typing import Any

from veglia.plugin_api import (
    ATTEMPTS,
    MEMORY_AFTER_OOM_KB,
    MONITORS,
    QUEUES,
    RESTART,
    SIMILARITY_KEY,
    SUBMISSION_REJECTED,
    Bool,
    CalcJob,
    ExitCode,
    Int,
    ProcessBuilder,
    QueueInfo,
    Str,
    ToContext,
    WorkChain,
    append_,
    choose_queue,
    get_profile,
    load_process_class,
    memory_needed_after_oom,
    notify,
    plain_data,
    queues_from_attribute,
    to_node,
    while_,
)

__all__ = ["RestartWorkChain"]

#: The monitor the policy attaches to every attempt to catch jobs that can never start.
PENDING_MONITOR = "veglia_pending"
#: The monitor that stops a job near its memory limit: the policy treats it as a kill for
#: memory that came early.
MEMORY_MONITOR = "core.memory_ceiling"
#: The monitor that stops a job which no longer responds: cancelled and resubmitted once.
UNRESPONSIVE_MONITOR = "core.unresponsive"
FAILURE_BEHAVIOURS = ("stop", "ignore")
ASSUMED_MEMORY_KB = 1024 * 1024  # when a job asked for no memory and measured none
MEMORY_FACTOR = 1.5
TIME_FACTOR = 2


def _validate(inputs: Any, _: Any = None) -> str | None:

    name = inputs.get("process")
    name = name.value if isinstance(name, Str) else name
    try:
        process_class = load_process_class(str(name))
    except Exception as exc:  # reported as the input's error
        return f"process {name!r} cannot be loaded: {exc}"
    if not (isinstance(process_class, type) and issubclass(process_class, CalcJob)):
        return f"process {name!r} is not a calc job"
    error = process_class.spec().inputs.validate(dict(inputs.get("job") or {}))
    if error is not None:
        return f"job: {error.message}"
    behaviour = inputs.get("failure_behaviour")
    if behaviour is not None and behaviour.value not in FAILURE_BEHAVIOURS:
        return f"failure_behaviour must be one of {', '.join(FAILURE_BEHAVIOURS)}"
    return None


class RestartWorkChain(WorkChain):
    """Run ``process`` with the inputs ``job``, resubmitting it under the restart policy."""

    notify_on_finish = False  # one job, not a pipeline: only giving up is worth a message

    @classmethod
    def define(cls, spec: Any) -> None:
        super().define(spec)
        spec.input("process", valid_type=Str, help="The calc job: entry point or import path.")
        spec.input_namespace("job", dynamic=True, help="The inputs of the calc job.")
        spec.inputs["job"].valid_type = None
        spec.input(
            "max_attempts",
            valid_type=Int,
            required=False,
            help="Most attempts (default: the restart.max_attempts option).",
        )
        spec.input(
            "failure_behaviour",
            valid_type=Str,
            required=False,
            help="When the job fails on its own twice: 'stop' (default) or 'ignore'.",
        )
        spec.input(
            "pending_check",
            valid_type=Bool,
            required=False,
            help="Watch queued attempts and move those that can never start (default on).",
        )
        spec.inputs.validator = _validate
        spec.outputs.dynamic = True
        spec.outline(cls.setup, while_(cls.should_run)(cls.run_job, cls.inspect_job), cls.results)
        spec.exit_code(401, "ERROR_MAX_ATTEMPTS", "The job failed {attempts} times; last: {last}")
        spec.exit_code(402, "ERROR_NO_QUEUE_FITS", "No queue allows what the job needs: {need}")
        spec.exit_code(403, "ERROR_JOB_FAILED", "The job failed on its own again: {message}")
        spec.exit_code(404, "ERROR_JOB_STOPPED", "The job was stopped, not resubmitted: {message}")

    @classmethod
    def wrap(cls, job: Any, **inputs: Any) -> Any:
        """A builder of this workflow around ``job``: a calc job's builder (or class)."""

        builder = cls.get_builder()
        if isinstance(job, ProcessBuilder):
            process_class, job_inputs = job.process_class, job.to_dict()
        else:
            process_class, job_inputs = job, {}
        builder.process = Str(process_class.process_type())
        builder.job = job_inputs
        for name, value in inputs.items():
            builder[name] = to_node(value)
        return builder

    # -- steps -----------------------------------------------------------------------------
    def setup(self) -> None:

        job = plain_data(self.inputs["job"])
        self.ctx.options = dict((job.get("metadata") or {}).get("options") or {})
        self.ctx.attempt = 0
        self.ctx.own_failures = 0
        self.ctx.unresponsive = 0
        self.ctx.lowered = False
        self.ctx.finished = False
        self.ctx.exit = None
        self.ctx.oom = False
        self.ctx.max_attempts = (
            self.inputs["max_attempts"].value
            if "max_attempts" in self.inputs
            else int(get_profile().get_option("restart.max_attempts"))
        )
        self.ctx.jobs = []

    def should_run(self) -> bool:
        return not self.ctx.finished

    def run_job(self) -> ToContext:
        assert self.node is not None
        self.ctx.attempt += 1
        inputs = plain_data(self.inputs["job"])
        metadata = dict(inputs.get("metadata") or {})
        options = dict(self.ctx.options)
        if self.ctx.attempt > 1:
            options["right_size"] = False  # the policy's requests are deliberate
        metadata["options"] = options
        label = metadata.get("label") or self.node.label or "job"
        metadata["label"] = f"{label} #{self.ctx.attempt}"
        inputs["metadata"] = metadata
        check = self.inputs.get("pending_check")
        if check is None or check.value:
            monitors = dict(inputs.get("monitors") or {})
            monitors.setdefault(PENDING_MONITOR, {"entry_point": "core.pending_too_long"})
            inputs["monitors"] = monitors
        process_class = load_process_class(self.inputs["process"].value)
        node = self.submit(process_class, **inputs)
        if self.ctx.attempt == 1:
            self.node.set_attribute(SIMILARITY_KEY, node.similarity_key)
        else:  # why this attempt exists, on the attempt itself
            previous = (self.node.get_attribute(ATTEMPTS) or [{}])[-1]
            node.set_attribute(
                RESTART,
                {
                    "attempt": self.ctx.attempt,
                    "previous": previous.get("pk"),
                    "reason": previous.get("reason"),
                },
            )
        self.report(f"attempt {self.ctx.attempt}: process {node.pk} ({_describe(options)})")
        return ToContext(jobs=append_(node))

    def inspect_job(self) -> None:
        assert self.node is not None
        job = self.ctx.jobs[-1]
        decision, reason, options = self._decide(job)
        if decision == "resubmit" and self.ctx.attempt >= self.ctx.max_attempts:
            reason = f"{reason.split(': resubmitting')[0]}; no attempts left"
            self.ctx.exit = self.exit_codes.ERROR_MAX_ATTEMPTS.format(
                attempts=self.ctx.attempt, last=reason
            )
            decision = "stop"
        attempts = list(self.node.get_attribute(ATTEMPTS) or [])
        attempts.append(
            {
                "attempt": self.ctx.attempt,
                "pk": job.pk,
                "job_id": job.job_id,
                "queue": (job.last_job_info or {}).get("queue")
                or self.ctx.options.get("queue_name"),
                "max_memory_kb": self.ctx.options.get("max_memory_kb"),
                "max_wallclock_seconds": self.ctx.options.get("max_wallclock_seconds"),
                "exit_status": job.exit_status,
                "decision": decision,
                "reason": reason,
            }
        )
        self.node.set_attribute(ATTEMPTS, attempts)
        self.report(f"attempt {self.ctx.attempt} {reason}")
        if decision == "resubmit":
            self.ctx.options = options
        else:
            self.ctx.finished = True

    def results(self) -> ExitCode | None:
        assert self.node is not None
        if self.ctx.exit is not None:
            self._tell_user(self.ctx.exit)
            exit_code: ExitCode = self.ctx.exit
            return exit_code
        job = self.ctx.jobs[-1]
        for label, node in job.outputs.items():
            self.out(label, node)
        if self.ctx.oom and self.ctx.options.get("max_memory_kb"):
            self.node.set_attribute(MEMORY_AFTER_OOM_KB, self.ctx.options["max_memory_kb"])
        return None

    # -- the policy ---------------------------------------------------------------------------
    def _decide(self, job: Any) -> tuple[str, str, dict[str, Any]]:
        """``("done" | "resubmit" | "stop", why, the next attempt's options)``."""
        options = dict(self.ctx.options)
        if job.is_finished_ok:
            return "done", "finished", options
        if not job.is_finished:
            self.ctx.exit = self.exit_codes.ERROR_JOB_STOPPED.format(message=job.process_state)
            return "stop", f"was {job.process_state}", options
        labels = {code.status: code.label for code in job_exit_codes(job)}
        label = labels.get(job.exit_status, "")
        message = job.exit_message or f"exit status {job.exit_status}"
        if label == "ERROR_SCHEDULER_OUT_OF_MEMORY":
            return self._more_memory(job, options, "was killed by the scheduler for memory")
        if label == "ERROR_SCHEDULER_OUT_OF_WALLTIME":
            return self._more_time(job, options)
        if label == "ERROR_SUBMISSION_REJECTED":
            if not (job.get_attribute(SUBMISSION_REJECTED) or {}).get("resource_request"):
                self.ctx.exit = self.exit_codes.ERROR_JOB_STOPPED.format(message=message)
                return "stop", f"was refused by the scheduler: {message}", options
            return self._other_queue(job, options, "was refused by its queue")
        if label == "STOPPED_BY_MONITOR":
            stop = job.stopped_by_monitor or {}
            if stop.get("name") == PENDING_MONITOR:
                return self._other_queue(job, options, stop.get("message", "cannot start"))
            entry_point = _entry_point_of(job, stop.get("name"))
            if entry_point == MEMORY_MONITOR:
                return self._more_memory(job, options, "was stopped near its memory limit")
            if entry_point == UNRESPONSIVE_MONITOR:
                return self._not_responding(stop.get("message", "not responding"), options)
            self.ctx.exit = self.exit_codes.ERROR_JOB_STOPPED.format(message=message)
            return "stop", f"was stopped by monitor {stop.get('name')}", options
        if label in ("ERROR_SCHEDULER_NODE_FAILURE", "ERROR_SCHEDULER_CANCELLED"):
            return "resubmit", f"was ended by the scheduler ({message}): resubmitting", options
        self.ctx.own_failures += 1
        if self.ctx.own_failures == 1:
            return "resubmit", f"failed ({message}): resubmitting unchanged", options
        behaviour = self.inputs.get("failure_behaviour")
        if behaviour is not None and behaviour.value == "ignore":
            return "done", f"failed again ({message}); failure_behaviour is 'ignore'", options
        self.ctx.exit = self.exit_codes.ERROR_JOB_FAILED.format(message=message)
        return "stop", f"failed again ({message}); stopping", options

    def _not_responding(
        self, message: str, options: dict[str, Any]
    ) -> tuple[str, str, dict[str, Any]]:
        """Cancelled for not responding: resubmitted once, unchanged; a second time is a
        failure (UC2 12g)."""
        self.ctx.unresponsive += 1
        if self.ctx.unresponsive == 1:
            return "resubmit", f"stopped responding ({message}): resubmitting unchanged", options
        self.ctx.exit = self.exit_codes.ERROR_JOB_FAILED.format(
            message=f"stopped responding again ({message})"
        )
        return "stop", f"stopped responding again ({message}); stopping", options

    def _queues(self, job: Any) -> list[QueueInfo]:
        return queues_from_attribute(job.get_attribute(QUEUES))

    def _more_memory(
        self, job: Any, options: dict[str, Any], why: str
    ) -> tuple[str, str, dict[str, Any]]:

        self.ctx.oom = True
        if options.get("max_memory_kb") == 0:  # all of a node's memory (--mem=0) already
            need = "more memory than a whole node has"
            self.ctx.exit = self.exit_codes.ERROR_NO_QUEUE_FITS.format(need=need)
            return "stop", "was killed for memory with all of a node's memory (0)", options
        current = options.get("max_memory_kb") or (job.usage or {}).get("peak_memory_kb")
        base = current or ASSUMED_MEMORY_KB
        wanted = math.ceil(base * MEMORY_FACTOR / 1024) * 1024
        how = f"×{MEMORY_FACTOR}"
        known = memory_needed_after_oom(job.similarity_key or "")
        if known is not None and known > wanted:
            wanted, how = math.ceil(known / 1024) * 1024, "the mean similar jobs needed"
        queues = self._queues(job)
        queue = choose_queue(
            queues,
            _queue_of(job, options),
            wallclock_seconds=options.get("max_wallclock_seconds"),
            memory_kb=wanted,
            nodes=_nodes(options),
        )
        if queues and queue is None:
            need = f"{wanted // 1024} MB of memory"
            self.ctx.exit = self.exit_codes.ERROR_NO_QUEUE_FITS.format(need=need)
            return "stop", f"was killed for memory and no queue allows {need}", options
        options["max_memory_kb"] = wanted
        moved = _move(options, queue)
        return (
            "resubmit",
            f"{why} ({_mb(current)}): resubmitting with {_mb(wanted)} ({how}){moved}",
            options,
        )

    def _more_time(self, job: Any, options: dict[str, Any]) -> tuple[str, str, dict[str, Any]]:
        queues = self._queues(job)
        by_name = {q.name: q for q in queues}
        here = _queue_of(job, options)
        current = options.get("max_wallclock_seconds") or (
            by_name[here].max_wallclock_seconds if here in by_name else None
        )
        if current is None:
            current = (job.last_job_info or {}).get("wallclock_seconds") or 3600
        wanted = int(current * TIME_FACTOR)
        memory = options.get("max_memory_kb")
        queue = choose_queue(
            queues, here, wallclock_seconds=wanted, memory_kb=memory, nodes=_nodes(options)
        )
        if queues and queue is None:
            longer = [
                q
                for q in queues
                if q.available
                and q.allows(memory_kb=memory, nodes=_nodes(options))
                and (q.max_wallclock_seconds or 0) > current
            ]
            if not longer:
                need = f"more than {current} s of wall time"
                self.ctx.exit = self.exit_codes.ERROR_NO_QUEUE_FITS.format(need=need)
                return "stop", f"ran out of wall time and no queue allows {need}", options
            queue = max(longer, key=lambda q: q.max_wallclock_seconds or 0)
            wanted = queue.max_wallclock_seconds or wanted
        options["max_wallclock_seconds"] = wanted
        moved = _move(options, queue)
        return (
            "resubmit",
            f"was killed by the scheduler for wall time ({current} s): resubmitting with "
            f"{wanted} s{moved}",
            options,
        )

    def _other_queue(
        self, job: Any, options: dict[str, Any], why: str
    ) -> tuple[str, str, dict[str, Any]]:
        """The queue cannot run the job as asked: another queue that can, or lower requests."""
        queues = self._queues(job)
        here = _queue_of(job, options)
        others = [q for q in queues if q.name != here]
        memory, wallclock = options.get("max_memory_kb"), options.get("max_wallclock_seconds")
        queue = choose_queue(
            others, None, wallclock_seconds=wallclock, memory_kb=memory, nodes=_nodes(options)
        )
        if queue is not None:
            return "resubmit", f"{why}: moving it to queue {queue.name}", _moved(options, queue)
        by_name = {q.name: q for q in queues}
        limits = by_name.get(here or "") or next((q for q in queues if q.default), None)
        if limits is not None and not self.ctx.lowered:
            self.ctx.lowered = True
            lowered = []
            if (
                wallclock
                and limits.max_wallclock_seconds
                and wallclock > limits.max_wallclock_seconds
            ):
                options["max_wallclock_seconds"] = limits.max_wallclock_seconds
                lowered.append(f"wall time to {limits.max_wallclock_seconds} s")
            if memory and limits.max_memory_kb and memory > limits.max_memory_kb:
                options["max_memory_kb"] = limits.max_memory_kb
                lowered.append(f"memory to {_mb(limits.max_memory_kb)}")
            if lowered:
                return "resubmit", f"{why}: lowering its {' and '.join(lowered)}", options
        self.ctx.exit = self.exit_codes.ERROR_NO_QUEUE_FITS.format(need=_describe(options))
        return "stop", f"{why}, and no queue allows {_describe(options)}", options

    def _tell_user(self, code: ExitCode) -> None:

        assert self.node is not None
        notify(
            "restart_gave_up",
            f"process {self.node.pk} gave up: {code.message}"[:160],
            f"The restart policy of process {self.node.pk} ({self.node.label or 'no label'}) "
            f"stopped after {self.ctx.attempt} attempt(s): {code.message}\n\n"
            f"See `veglia process report {self.node.pk}`.",
        )


def job_exit_codes(job: Any) -> list[ExitCode]:
    """The exit codes the job's calculation declares."""

    try:
        process_class = load_process_class(job.process_type)
    except Exception:  # an uninstalled plugin: the base codes still apply
        process_class = CalcJob
    return list(process_class.spec().exit_codes.values())


def _nodes(options: dict[str, Any]) -> int | None:
    return (options.get("resources") or {}).get("num_machines")


def _queue_of(job: Any, options: dict[str, Any]) -> str | None:
    return options.get("queue_name") or (job.last_job_info or {}).get("queue")


def _move(options: dict[str, Any], queue: QueueInfo | None) -> str:
    if queue is None or options.get("queue_name") == queue.name:
        return ""
    previous = options.get("queue_name")
    options["queue_name"] = queue.name
    return (
        f", moving from queue {previous} to {queue.name}"
        if previous
        else f", in queue {queue.name}"
    )


def _moved(options: dict[str, Any], queue: QueueInfo) -> dict[str, Any]:
    options = dict(options)
    options["queue_name"] = queue.name
    return options


def _mb(kb: int | None) -> str:
    return "no memory request" if not kb else f"{math.ceil(kb / 1024)} MB"


def _describe(options: dict[str, Any]) -> str:
    parts = []
    if options.get("queue_name"):
        parts.append(f"queue {options['queue_name']}")
    if options.get("max_memory_kb"):
        parts.append(_mb(options["max_memory_kb"]))
    if options.get("max_wallclock_seconds"):
        parts.append(f"{options['max_wallclock_seconds']} s")
    return ", ".join(parts) or "default requests"


def _entry_point_of(job: Any, name: str | None) -> str | None:
    """The entry point of the job's monitor called ``name``."""
    specs = job.get_attribute(MONITORS) or []
    return next((m.get("entry_point") for m in specs if m.get("name") == name), None)
