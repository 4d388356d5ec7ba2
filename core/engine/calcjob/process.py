"""The calc job: upload, submit, poll, retrieve and parse one job on a computer.

The transport work happens in the WAITING state, one command at a time (see
:mod:`~veglia.engine.calcjob.commands`). Each command ends in a new WAITING state, so every
step is checkpointed before the next begins; a process loaded from its checkpoint re-runs
only the step it was in, and the steps are idempotent (see :mod:`~veglia.engine.calcjob.tasks`).

Over the house's 450 lines on purpose: cohesion comes before a line count (see
docs/development.md). What the job does to itself (blocks and outages, the cancel of its
job, its trace record, right-sizing, reuse of a cached run, a monitor's stop) is methods
here, not functions elsewhere that take a ``CalcJob`` and call back into it; its in-memory
state is one typed object, ``self.runtime`` (:mod:`~veglia.engine.calcjob.runtime`), with the
live trace and the queue moves as objects of their own there. What needs no process lives
beside it: the options, the WAITING commands, the transport tasks, the notifications of
``holds``, the cancellers of ``kill``, the record of ``trace``, the hashes of ``caching``,
the arithmetic of ``right_sizing``.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import functools
import shutil
import tempfile
import time
from collections.abc import Awaitable
from contextlib import AsyncExitStack, nullcontext
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import plumpy
from plumpy.process_states import ProcessState

from veglia.engine.calcjob import caching, holds, job_script, kill, right_sizing, tasks
from veglia.engine.calcjob.calcinfo import CalcInfo
from veglia.engine.calcjob.commands import RETRIEVE, UPLOAD, JobWaiting
from veglia.engine.calcjob.job_script import EXIT_STATUS_FILE
from veglia.engine.calcjob.live_trace import LiveTrace
from veglia.engine.calcjob.monitor_runner import MonitorRunner
from veglia.engine.calcjob.monitors import (
    load_monitor,
    parse_monitors,
    provenance_of,
    validate_monitors_port,
)
from veglia.engine.calcjob.options import define_options
from veglia.engine.calcjob.poll_writes import write_poll
from veglia.engine.calcjob.preflight import check_computer
from veglia.engine.calcjob.queues import queues_of
from veglia.engine.calcjob.runtime import CalcJobRuntime
from veglia.engine.calcjob.trace import (
    TraceRecord,
    attributes_of,
    build_record,
    finish_record,
    measured_usage,
)
from veglia.engine.dehydration import JobSleep
from veglia.engine.exit_codes import ExitCode
from veglia.engine.process import Process, flatten_inputs, plain_data
from veglia.engine.process_spec import ProcessSpec
from veglia.engine.runner import get_runner
from veglia.engine.waiting import InterruptibleWaiting
from veglia.entry_points import ParserFactory
from veglia.exceptions import (
    ProcessDehydrated,
    TransportError,
    TransportTaskFailed,
    UnsafeWorkdirError,
)
from veglia.manage import get_profile, get_storage
from veglia.orm import attributes as attr
from veglia.orm.computers import Code, Computer
from veglia.orm.data import FolderData, RemoteData
from veglia.orm.process_nodes import CalcJobNode
from veglia.plugin_manager import (
    call_each,
    gather,
    get_plugin_manager,
    has_implementations,
)
from veglia.schedulers import JobFailure, JobInfo, JobState, SchedulerError, SchedulerSubmitError
from veglia.workdir_root import private_root

__all__ = ["CalcJob", "TransportTaskFailed"]

T = TypeVar("T")

_ALWAYS_RETRIEVED = ["_scheduler-stdout.txt", "_scheduler-stderr.txt", EXIT_STATUS_FILE]


def _remove_in_background(path: Path) -> None:
    """Delete a folder on a thread of the running loop's default executor (at once when
    there is no loop, or it takes no more work). Not on the worker's loop: a ``rmdir`` in
    a busy ``/tmp`` waited milliseconds for the file system's journal, a sixth of a
    worker's time at the end of a run of 500 jobs."""
    try:
        asyncio.get_running_loop().run_in_executor(None, shutil.rmtree, path, True)
    except RuntimeError:
        shutil.rmtree(path, ignore_errors=True)


def _ended_by_signal(exit_status: int | None) -> bool:
    """The command recorded no exit status, or a shell's for a signal (128 + n)."""
    return exit_status is None or exit_status > 128 or exit_status < 0


class CalcJob(Process):
    """Base class of calculations that run a job on a computer through its scheduler."""

    _node_class = CalcJobNode
    node: CalcJobNode | None  # the node _node_class makes

    #: What this process keeps in memory while it runs the job; never checkpointed.
    runtime: CalcJobRuntime

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Before plumpy's: entering the first state reads the computer.
        self.runtime = CalcJobRuntime.of(self)
        super().__init__(*args, **kwargs)

    def load_instance_state(self, saved_state: Any, load_context: Any) -> None:
        # plumpy loads a checkpoint without calling __init__; a loaded process starts afresh.
        self.runtime = CalcJobRuntime.of(self)
        super().load_instance_state(saved_state, load_context)

    @classmethod
    def get_state_classes(cls) -> dict[Any, Any]:
        states = dict(super().get_state_classes())
        states[ProcessState.WAITING] = JobWaiting
        return states

    _spec: ClassVar[ProcessSpec]  # plumpy's cache of spec()
    _spec_plugins: ClassVar[object]  # the plugin manager _spec was built with

    @classmethod
    def spec(cls) -> ProcessSpec:
        # Plugins add options (calcjob_options): the spec is built anew when they change.
        manager = get_plugin_manager()
        if cls.__dict__.get("_spec_plugins") is not manager:
            if "_spec" in cls.__dict__:
                del cls._spec
            cls._spec_plugins = manager
        return super().spec()

    @classmethod
    def define(cls, spec: Any) -> None:
        super().define(spec)
        spec.input(
            "code",
            valid_type=Code,
            required=False,
            help="The code to run (its computer is the job's computer).",
        )
        spec.input(
            "metadata.cache",
            valid_type=bool,
            required=False,
            help="Reuse an identical finished job (default: the caching.enabled option).",
        )
        spec.input(
            "metadata.computer",
            valid_type=str,
            required=False,
            help="Label of the computer, when there is no code.",
        )
        define_options(spec)
        spec.input(
            "monitors",
            required=False,
            valid_type=dict,
            validator=validate_monitors_port,
            help="Monitors called at each scheduler poll: a dict of name -> "
            '{"entry_point": ..., "kwargs": {...}}.',
        )
        spec.output_namespace("monitor_outputs", dynamic=True, required=False)
        spec.output("remote_folder", valid_type=RemoteData, required=False)
        spec.output("retrieved", valid_type=FolderData, required=False)
        spec.exit_code(100, "ERROR_NO_RETRIEVED_FILES", "No file was retrieved from the job.")
        spec.exit_code(
            110,
            "ERROR_SCHEDULER_OUT_OF_MEMORY",
            "The scheduler killed the job: it used more memory than it asked for.",
        )
        spec.exit_code(
            120,
            "ERROR_SCHEDULER_OUT_OF_WALLTIME",
            "The scheduler killed the job: it ran past its wall time.",
        )
        spec.exit_code(130, "ERROR_SCHEDULER_NODE_FAILURE", "The job's node failed.")
        spec.exit_code(131, "ERROR_SCHEDULER_CANCELLED", "The job was cancelled outside veglia.")
        spec.exit_code(
            140, "ERROR_SUBMISSION_REJECTED", "The scheduler rejected the job: {message}"
        )
        spec.exit_code(150, "STOPPED_BY_MONITOR", "Monitor {name} stopped the job: {message}")
        spec.exit_code(300, "ERROR_PARSER_FAILED", "The parser failed: {message}")

    # -- to be written by subclasses ------------------------------------------------------------
    def prepare_for_submission(self, folder: Path) -> CalcInfo:
        """Write the job's input files into ``folder`` and say how to run it."""
        raise NotImplementedError(f"{type(self).__name__} must implement prepare_for_submission")

    def parse_retrieved(self, retrieved: FolderData, outcome: dict[str, Any]) -> ExitCode | None:
        """Attach outputs from the retrieved files; by default the ``parser_name`` parser."""
        parser_name = self.options.get("parser_name")
        if not parser_name:
            return None
        parser = ParserFactory(parser_name)(self)
        result: ExitCode | None = parser.parse(retrieved, outcome)
        return result

    # -- the node --------------------------------------------------------------------------
    @property
    def options(self) -> dict[str, Any]:
        return dict(self.inputs.get("metadata", {}).get("options", {})) if self.inputs else {}

    @property
    def code(self) -> Code | None:
        return self.inputs.get("code") if self.inputs else None

    @property
    def computer(self) -> Computer:
        """The job's computer, with its settings as stored now (a daemon worker follows
        changes while the job runs)."""
        computer = self.runtime.computer
        if computer is None:
            if self.code is not None:
                computer = self.code.computer
            elif self.node is not None and self.node.computer_pk is not None:  # a loaded job
                computer = get_runner().computers.current_by_pk(self.node.computer_pk).computer
            else:
                label = self.metadata.get("computer") or get_profile().get_option(
                    "computer.default"
                )
                # Through the runner's cache: a loop of submissions reads it once a second.
                computer = get_runner().computers.by_label(label).computer
        if computer.pk is not None:
            computer = get_runner().current_computer(computer)
        self.runtime.computer = computer
        return computer

    def prepare_node(self, node: Any) -> None:
        computer = self.computer
        assert computer.pk is not None
        # Known configured and enabled (as of the runner's last read) spares queries per
        # submission.
        known = get_runner().computers.current(computer)
        check_computer(computer, known.configured, known.enabled)
        node.computer_pk = computer.pk
        attributes = {
            attr.OPTIONS: plain_data(self.options),
            attr.COMPUTER: computer.label,
            attr.SIMILARITY_KEY: self.similarity_key(),
        }
        monitors = parse_monitors(self.inputs.get("monitors") or {})
        if monitors:
            attributes[attr.MONITORS] = [m.to_dict() for m in monitors]
            attributes[attr.MONITOR_PROVENANCE] = {
                m.name: provenance_of(m.entry_point, load_monitor(m.entry_point)) for m in monitors
            }
        if self.code is not None:
            attributes[attr.CODE] = {
                "pk": self.code.pk,
                "label": self.code.full_label,
                "executable": self.code.executable,
            }
        node.set_attributes(attributes)

    def similarity_key(self) -> str:
        """Which finished jobs are like this one, for right-sizing and estimates: by
        default the same calculation and code on the same computer. Override to add what
        else makes jobs alike (an input's size, a parameter)."""
        code = self.code.full_label if self.code is not None else ""
        return f"{self.process_type()}|{code}|{self.computer.label}"

    async def run(self) -> Any:
        cached = self._from_cache()
        if cached is not None:
            return cached
        return plumpy.Wait(None, msg="Waiting to upload", data=UPLOAD)

    # -- caching (see caching) ----------------------------------------------------------
    def cache_hash(self) -> str:
        """What makes this job's results what they are: the calculation, code, computer,
        options and inputs by content (:func:`~veglia.engine.calcjob.caching.calcjob_hash`)."""
        node = self.node
        inputs = flatten_inputs(
            {k: v for k, v in self.inputs.items() if k not in self.non_db_inputs}
        )
        options = node.get_attribute(attr.OPTIONS) if node else {}
        return caching.calcjob_hash(
            self.process_type(), self.computer.label, self.code, options, inputs
        )

    def _from_cache(self) -> ExitCode | None:
        """With caching on: the outputs of an identical finished job, copied, or None. The
        job's hash is always recorded, so a later job with caching on can reuse this one."""
        node = self.node
        if node is None:
            return None
        # The hash's reads, what it records, and the copied outputs: in the commit of the
        # state change that follows.
        with self.closing_writes():
            digest = self.cache_hash()
            node.set_attribute(attr.CACHE_HASH, digest)
            explicit = self.metadata.get("cache")
            if not (get_profile().get_option("caching.enabled") if explicit is None else explicit):
                return None
            source = caching.find_cached(digest, node.pk)
            if source is None:
                return None
            for label, output in source.outputs.items():
                self.out(label.replace("__", "."), caching.clone(output))
            # What the run measured travels with its outputs: a cached job still reports it.
            measured = caching.measured_of(source, node, self.computer)
            node.set_attributes(
                {attr.CACHED_FROM: {"pk": source.pk, "uuid": source.uuid}, **measured}
            )
            self.report(f"cached from process {source.pk}: not run again")
            return ExitCode(source.exit_status or 0, source.exit_message)

    # -- holds: waiting for someone (see holds) ---------------------------------------------
    def computer_unreachable(self, reason: str) -> None:
        """Paused for an outage, not by a person: the daemon plays it when the computer is
        back (``veglia.engine.daemon.outages``)."""
        node = self.node
        assert node is not None
        computer = self.computer
        # Since the first failed attempt of the step that ran out of them, not this pause.
        backoff = node.get_attribute(attr.BACKOFF) or {}
        since = (
            (node.get_attribute(attr.UNREACHABLE) or {}).get("since")
            or backoff.get("first_failure")
            or time.time()
        )
        node.set_attribute(attr.UNREACHABLE, {"computer": computer.label, "since": since})
        if backoff:  # the pause says why now; played, the step starts a new count
            node.delete_attribute(attr.BACKOFF)
        holds.notify_unreachable(computer, self.pid, reason)

    def block(self, reason: str, cause: str = "") -> str:
        """Hold the job until ``veglia process unblock``; tell the user once per cause."""
        node = self.node
        assert node is not None
        label = self.computer.label
        node.set_attribute(attr.BLOCKED, {"reason": reason, "time": time.time(), "computer": label})
        self.report(f"blocked: {reason}")
        holds.notify_blocked(label, node.pk, reason, cause)
        return holds.BLOCKED

    def on_playing(self) -> None:
        super().on_playing()
        # Played again: the job is no longer held for an outage or a block.
        node = self.node
        if node is None:
            return
        if node.get_attribute(attr.UNREACHABLE):
            node.delete_attribute(attr.UNREACHABLE)
        blocked = node.get_attribute(attr.BLOCKED)
        if blocked:
            node.delete_attribute(attr.BLOCKED)
            self.report("unblocked: uploading and submitting again")
            holds.notify_unblocked(blocked)

    # -- transport steps -----------------------------------------------------------------------
    async def with_retries(self, name: str, function: Any, *args: Any) -> Any:
        """``function(transport, *args)`` through the transport queue, retried with back-off;
        ``TransportTaskFailed`` when every attempt failed."""
        runner = get_runner()
        delay = runner.retry_interval
        for attempt in range(1, runner.retry_attempts + 1):
            try:
                async with AsyncExitStack() as stack:
                    # Until the call starts nothing is done on the computer: a kill or pause
                    # need not wait for the connection (a hung host holds its opening).
                    lease = await self._before_the_call(
                        stack.enter_async_context(runner.lease_transport(self.computer))
                    )
                    result = await lease.run(function, lease.transport, *args)
                self._backoff_over()
                # A transport task went through: the one that ends an outage says so, once.
                holds.notify_back(self.computer)
                return result
            except (TransportError, OSError) as exc:
                last = attempt == runner.retry_attempts
                self._attempt_failed(name, attempt, exc, None if last else delay)
                if last:
                    raise TransportTaskFailed(str(exc)) from None
                await self._before_the_call(asyncio.sleep(delay))
                delay *= 2
        raise AssertionError("unreachable")

    def _attempt_failed(self, step: str, attempt: int, exc: Exception, delay: float | None) -> None:
        """Report a failed attempt and record it on the node (``process list`` shows it), in
        one commit; ``delay``: seconds to the next attempt, None after the last one."""
        node = self.node
        assert node is not None
        attempts = get_runner().retry_attempts
        now = time.time()
        previous = node.get_attribute(attr.BACKOFF) or {}
        record = {
            "step": step,
            "attempt": attempt,
            "attempts": attempts,
            "error": str(exc),
            # A record still here: the same run of failures (a worker that died mid-way).
            "first_failure": previous.get("first_failure") or now,
            "next_try": None if delay is None else now + delay,
        }
        with get_storage().transaction():
            self.report(f"{step} attempt {attempt}/{attempts} failed: {exc}")
            node.set_attribute(attr.BACKOFF, record)

    def _backoff_over(self) -> None:
        node = self.node
        if node is not None and node.get_attribute(attr.BACKOFF) is not None:
            node.delete_attribute(attr.BACKOFF)

    async def _before_the_call(self, awaitable: Awaitable[T]) -> T:
        """What a transport task awaits before its call (the back-off, the connection),
        which a kill or pause cuts short: it would otherwise wait for all of it."""
        state = self._state
        if isinstance(state, InterruptibleWaiting):
            return await state.before_a_call(awaitable)
        return await awaitable

    def _workdir(self, transport: Any) -> str:
        """The job's folder; its root is made private and checked first (once per
        connection): a root another user controls is refused."""
        assert self.node is not None
        root = self.computer.get_workdir(transport.whoami(), transport.home())
        return self.computer.job_workdir(private_root(transport, root), self.node.uuid)

    async def do_upload(self) -> str | None:
        node = self.node
        assert node is not None
        try:
            await self._upload()
        except UnsafeWorkdirError as exc:
            if not node.get_attribute(attr.DAEMON):
                raise  # a foreground run ends with the reason; nobody would unblock it
            return self.block(str(exc), f"veglia refused the work dir of {self.computer.label}")
        return None

    async def _upload(self) -> None:
        node = self.node
        assert node is not None
        self._right_size()
        sandbox = Path(tempfile.mkdtemp(prefix="veglia-sandbox-"))
        try:
            calcinfo = self.prepare_for_submission(sandbox)
            wraps = job_script.wraps_for(node, self.computer)
            script = tasks.build_template(node, calcinfo, self.code, self.computer, wraps)
            commands = tasks.command_lines(node, calcinfo, self.code, self.computer)
            retrieve = [
                tasks.checked_retrieve_pattern(pattern)
                for pattern in [
                    *calcinfo.retrieve_list,
                    *self.options.get("additional_retrieve_list", []),
                    *(name for wrap in wraps for name in wrap.retrieve),
                ]
            ]
            files = {
                str(path.relative_to(sandbox)): path.read_bytes()
                for path in sorted(p for p in sandbox.rglob("*") if p.is_file())
            }
            beside = job_script.wrap_files(wraps, {*files, tasks.SCRIPT_NAME})
            files.update(beside)
            files[tasks.SCRIPT_NAME] = script.encode()

            def upload(transport: Any) -> str:
                workdir = self._workdir(transport)
                tasks.upload(transport, node, workdir, sandbox, calcinfo, script, beside)
                return workdir

            workdir = await self.with_retries("upload", upload)
        finally:
            _remove_in_background(sandbox)
        # Which files came from other nodes: `veglia calcjob inputls` lists them too.
        copied = [list(item) for item in calcinfo.local_copy_list]
        wrapped = job_script.recorded_wraps(wraps)
        label = self.computer.label
        # What the upload recorded goes in the commit of the state change to SUBMIT.
        with self.closing_writes():
            # Replayed after a crash: one output only. Read before the first write: from
            # there to the commit the transaction holds SQLite's write lock.
            remote = None if "remote_folder" in node.outputs else RemoteData(workdir, label)
            node.put_objects(files)
            node.set_attributes(
                {
                    attr.REMOTE_WORKDIR: workdir,
                    attr.RETRIEVE_LIST: retrieve,
                    attr.LOCAL_COPY_LIST: copied,
                    attr.JOB_SCRIPT_WRAPS: wrapped,
                    attr.COMMAND_LINES: commands,
                }
            )
            if remote is not None:
                self.out("remote_folder", remote)
            self.report(f"uploaded to {label}:{workdir}")

    def _right_size(self) -> None:
        """Adjust the node's requests from similar jobs' history, once per job, and say what
        changed or looks too big (see right_sizing)."""
        node = self.node
        assert node is not None
        explicit = self.options.get("right_size")
        mode = "off" if explicit is False else get_profile().get_option("resources.right_size")
        if mode == "off" or node.get_attribute(attr.RIGHT_SIZED) is not None:
            return
        similarity_key = node.get_attribute(attr.SIMILARITY_KEY)
        review = right_sizing.review(dict(node.options), mode, similarity_key, node.pk)
        for line in review.warnings:
            self.report(line)
        if not review.changed:
            return
        node.set_attributes({attr.OPTIONS: review.options, attr.RIGHT_SIZED: review.record})
        for line in review.changes:
            self.report(line)

    async def do_submit(self) -> ExitCode | str | None:
        node = self.node
        assert node is not None
        if node.job_id:  # submitted before a restart: never twice
            if not any(log.message.startswith("submitted job") for log in node.logs):
                # The worker died between recording the job id and saying so.
                self.report(f"submitted job {node.job_id}")
            return None
        try:
            job_id = await self.with_retries(
                "submit", tasks.submit, self.computer, node.remote_workdir
            )
        except SchedulerError as exc:
            if not getattr(exc, "permanent", True):
                raise TransportTaskFailed(str(exc)) from None
            if isinstance(exc, SchedulerSubmitError) and not exc.resource_request:
                return self.block(str(exc))
            # A request the queue cannot give: a restart policy may pick another queue.
            self.report(f"submission rejected: {exc}")
            node.set_attribute(
                attr.SUBMISSION_REJECTED,
                {"message": str(exc), "resource_request": getattr(exc, "resource_request", False)},
            )
            await self._record_queues()
            return self.exit_codes.ERROR_SUBMISSION_REJECTED.format(message=str(exc))
        # In the commit of the state change (a submission replayed after a crash finds
        # the job it started: the submit wrapper answers with its first output).
        with self.closing_writes():
            node.set_attributes(
                {
                    attr.JOB_ID: job_id,
                    attr.SCHEDULER_STATE: JobState.QUEUED.value,
                    attr.SUBMITTED_AT: time.time(),
                }
            )
            self.report(f"submitted job {job_id}")
        self.trace_updated("SUBMITTED")
        return None

    async def _record_queues(self) -> None:
        """The queues and their limits, on the node, for a restart policy to choose from."""

        node = self.node
        assert node is not None
        try:
            async with get_runner().lease_transport(self.computer) as lease:
                queues = await lease.run(queues_of, self.computer, lease.transport)
        except (TransportError, OSError) as exc:
            node.add_log("DEBUG", f"could not list the queues: {exc}")
            queues = queues_of(self.computer, None)
        node.set_attribute(attr.QUEUES, [dataclasses.asdict(q) for q in queues])

    async def do_update(self) -> bool:
        """One poll; True when the job has left the scheduler or is done."""

        node = self.node
        assert node is not None and node.job_id
        wake = self.take_wake()
        try:
            if wake is not None and wake.error is not None:
                self.runtime.update_failures = wake.failures
                raise wake.error
            if wake is not None and wake.polled:
                info, self.runtime.woken_by_poll = wake.info, True
            else:
                info = await get_runner().poller(self.computer).next_update(node.job_id)
        except (TransportError, SchedulerError) as exc:
            return await self._update_failed(exc)
        self.runtime.update_failures = 0
        self._backoff_over()
        done = info is None or info.state == JobState.DONE
        state = JobState.DONE if info is None or done else info.state
        changes: dict[str, Any] = {attr.SCHEDULER_STATE: state.value}
        if (
            info is not None
            and info.state == JobState.RUNNING
            and not node.get_attribute(attr.STARTED_AT)
        ):
            changes[attr.STARTED_AT] = time.time()
        if info is not None:
            changes[attr.LAST_JOB_INFO] = info.to_attributes()
        # One write, none while nothing changes, and the clock alone only now and then.
        # The last poll's goes in the commit of the state change to RETRIEVE.
        before = node.get_attribute(attr.SCHEDULER_STATE)
        with self.closing_writes() if done else nullcontext():
            written = write_poll(node, changes, self.runtime.clock_written)
        # Quiet: its state as before (a job polled queued after its submission is idle).
        self.runtime.quiet_polls = 0 if state.value != before else self.runtime.quiet_polls + 1
        if written and attr.STARTED_AT in changes:
            self.trace_updated("RUNNING")
        if info is not None and not done:  # a longer queue before it outlives its own
            await self.runtime.queue_moves.consider(info)
        running = info is not None and info.state == JobState.RUNNING
        live = self.runtime.live_trace
        # Read before the monitors, with every other job's reads and theirs: one call.
        trace_reads = live.requests() if running else []
        if not done and node.get_attribute(attr.MONITORS):
            if await self._run_monitors(trace_reads):
                live.flush()
                await self._record_queues()  # for a restart policy that moves the job
                return True
        elif trace_reads:
            # Only a read, of what a later poll reads again: a kill or pause cuts it short
            # (a computer that stopped answering would otherwise hold the kill).
            await self._before_the_call(live.refresh(trace_reads))
        if not running:
            live.flush()
        return done

    def dehydrate_if_idle(self) -> None:
        """Between two polls of a job still queued or running: leave the worker's memory
        (``ProcessDehydrated``) when the job waits as it did at the last poll (or this
        process was just woken by a poll) and nothing is due before two poll intervals:
        the poller wakes it when the job changes, when its queue move's deadline comes,
        when its live trace is next written, or when a monitor is next due (when each of
        its monitors has a ``minimum_poll_interval``: one without is called at every poll
        and keeps the job live). See ``veglia.engine.dehydration``."""
        runner = get_runner()
        node, runtime = self.node, self.runtime
        if runner.sleeps is None or node is None or not node.job_id:
            return
        if not runner.sleeps.may_sleep(node.pk):
            return
        if not (runtime.quiet_polls or runtime.woken_by_poll) or runtime.update_failures:
            return
        state = node.get_attribute(attr.SCHEDULER_STATE)
        poller = runner.poller(self.computer)
        now = time.monotonic()
        due = now + runtime.queue_moves.quiet_for(node.get_attribute(attr.LAST_JOB_INFO))
        if node.get_attribute(attr.MONITORS):
            # Called at every poll unless each has its minimum_poll_interval: then it sleeps
            # until the first is due, woken with that poll's answer to call it.
            until_due = MonitorRunner(self).seconds_until_due()
            if until_due is None:
                return
            due = min(due, now + until_due)
        live = runtime.live_trace
        if state == JobState.RUNNING.value and LiveTrace.expected(node):
            live.flush()
            due = min(due, now + runner.sleeps.trace_interval(LiveTrace.read_interval(node)))
        if due - now < 2 * poller.interval or not isinstance(state, str):
            return
        sleep = JobSleep(node.pk, node.job_id, state, due)
        poller.sleep(sleep)
        raise ProcessDehydrated(sleep)

    async def _run_monitors(self, trace_reads: list[dict[str, Any]]) -> bool:
        """After a poll: the job's monitors (its live trace read first, ``trace_reads``); True
        when one of them stopped the job, which is then cancelled and gone from the scheduler."""
        runner = get_runner()
        monitors = MonitorRunner(self)
        async with runner.lease_transport(self.computer) as lease:
            outcome = await monitors.run_cycle(lease, trace_reads)
        runner.poller(self.computer).monitors_done_at = time.monotonic()
        if outcome is None:
            return False
        monitors.forget_calls()
        name, result = outcome
        assert self.node is not None
        self.node.set_attribute(
            attr.STOPPED_BY_MONITOR,
            {
                "name": name,
                "message": result.message,
                "time": time.time(),
                "retrieve": result.retrieve or result.parse,
                "parse": result.parse,
                "override_exit_code": result.override_exit_code,
            },
        )
        self.report(f"monitor {name} stops the job: {result.message}")
        await self.cancel_job()
        await self.wait_until_job_gone()
        return True

    def monitor_exit_code(self) -> ExitCode:
        assert self.node is not None
        stop = self.node.get_attribute(attr.STOPPED_BY_MONITOR) or {}
        return self.exit_codes.STOPPED_BY_MONITOR.format(
            name=stop.get("name", "?"), message=stop.get("message", "")
        )

    async def _update_failed(self, exc: Exception) -> bool:

        runner = get_runner()
        failures = self.runtime.update_failures = self.runtime.update_failures + 1
        last = failures >= runner.retry_attempts
        delay = runner.retry_interval * 2 ** (failures - 1)
        self._attempt_failed("update", failures, exc, None if last else delay)
        if last:
            self.runtime.update_failures = 0
            raise TransportTaskFailed(str(exc))
        await asyncio.sleep(delay)
        return False

    async def do_retrieve(self) -> Path:
        node = self.node
        assert node is not None
        last = node.get_attribute(attr.LAST_JOB_INFO)
        last_info = JobInfo.from_attributes(last) if last else None
        patterns = [*node.get_attribute(attr.RETRIEVE_LIST, []), *_ALWAYS_RETRIEVED]
        folder, outcome = await self.with_retries(
            "retrieve", tasks.retrieve, self.computer, node.remote_workdir, patterns, last_info
        )
        record = await self.gather_trace()
        if outcome.get("failure") in (
            JobFailure.OUT_OF_MEMORY.value,
            JobFailure.OUT_OF_WALLTIME.value,
        ):
            await self._record_queues()
        with self.closing_writes():  # what the retrieval found, with the state change
            self._record_retrieval(folder, outcome, record, last)
        result: Path = folder
        return result

    def _record_retrieval(
        self, folder: Path, outcome: dict[str, Any], record: Any, last: dict[str, Any] | None
    ) -> None:
        node = self.node
        assert node is not None
        # Everything is worked out first, then written in one patch and the reports.
        values = {attr.JOB_OUTCOME: copy.deepcopy(outcome), **attributes_of(record)}
        # The measurement on the trace record: a plugin's exact one (a tracer's), else the batch
        # system's (SLURM's sacct, which counts every process of the job, as it does against
        # the memory request right-sizing sets), else a plugin's estimate (/usr/bin/time's
        # largest single process, the trace sampler's samples): see trace.measured_usage.
        usage = measured_usage(values[attr.TRACE_RECORD]) or (last or {}).get("usage")
        if usage and usage.get("peak_memory_kb") is not None:
            values[attr.USAGE] = usage
        files = sum(1 for p in folder.rglob("*") if p.is_file())
        node.set_attributes(values)
        if outcome.get("workdir_link"):
            self.report(
                f"nothing retrieved: {outcome['workdir_link']} is a link (the job's folder, or "
                "one veglia made above it, was replaced with one); veglia follows no link out "
                "of a job's folder"
            )
        if outcome.get("skipped"):
            self.report(
                "not retrieved, as not regular files (links, FIFOs, devices): "
                + ", ".join(outcome["skipped"][:20])
            )
        self.report(f"retrieved {files} files")

    def on_terminal_state_recorded(self) -> None:
        super().on_terminal_state_recorded()
        self.trace_ready()

    # -- the trace record (see trace) ------------------------------------------------------
    async def gather_trace(self) -> TraceRecord:
        """The job's trace record, with what ``collect_trace`` plugins add from its work dir."""
        node = self.node
        assert node is not None
        workdir = node.remote_workdir
        try:
            async with get_runner().lease_transport(self.computer) as lease:

                def in_workdir(transport: Any) -> TraceRecord:
                    transport.cwd = workdir or "/"
                    return self._trace_with_plugins(transport)

                return await lease.run(in_workdir, lease.transport)
        except (TransportError, OSError) as exc:  # the trace must never cost the job
            node.add_log("DEBUG", f"trace collected without the computer: {exc}")
            return self._trace_with_plugins(None)

    def _trace_with_plugins(self, transport: Any) -> TraceRecord:
        node = self.node
        assert node is not None
        computer = self.computer
        record = build_record(node, computer)
        for plugin, exc in call_each(
            "collect_trace", node=node, transport=transport, record=record, computer=computer
        ):
            node.add_log("WARNING", f"plugin {plugin} failed to collect the trace: {exc}")
        return record

    def trace_updated(self, status: str) -> None:
        """Tell ``trace_updated`` reporters the job was submitted or started."""
        if not has_implementations("trace_updated"):
            return  # no reporter listens: build nothing on the hot path
        node = self.node
        assert node is not None
        record = build_record(node, self.computer, status)
        for plugin, exc in call_each("trace_updated", node=node, record=record):
            node.add_log("WARNING", f"plugin {plugin} failed to report the trace: {exc}")

    def trace_ready(self) -> None:
        """The process has terminated: finish the record, store it, hand it to reporters."""
        node = self.node
        assert node is not None
        data = node.get_attribute(attr.TRACE_RECORD)
        record = TraceRecord.from_dict(data) if data else self._trace_with_plugins(None)
        if record.gpu_metrics is None and node.get_attribute(attr.GPU_METRICS) is not None:
            record.gpu_metrics = node.get_attribute(attr.GPU_METRICS)  # copied from the cache
        finish_record(record, node.refresh())
        node.set_attributes(attributes_of(record))
        for plugin, exc in call_each("trace_ready", node=node, record=record):
            node.add_log("WARNING", f"plugin {plugin} failed to report the trace: {exc}")

    # -- kill (see kill) -------------------------------------------------------------------
    def on_kill(self, msg: Any) -> None:
        # Never waits for the computer (a hung one held the kill, and the worker's loop, for
        # its whole connect timeout): the job is marked to cancel, and cancelled beside.
        self._mark_cancel_pending()
        super().on_kill(msg)

    def _mark_cancel_pending(self) -> None:
        """Record that the job is still to be cancelled (in the commit of the kill), and
        start cancelling it on this runner's loop when it runs. Nothing here waits for the
        computer."""
        node = self.node
        computer = self.computer
        if not kill.owe_cancel(node, computer.label):
            return
        assert node is not None
        self.report(
            f"cancel of job {node.job_id} on {computer.label} pending: veglia cancels it as "
            "soon as the computer answers"
        )
        runner = get_runner()
        if runner.loop.is_running():  # not the CLI acting on a checkpoint: it would not wait
            # A daemon worker tries until the computer answers; a foreground run (which waits
            # for it, see step_until_terminated) as often as a transport task, then leaves
            # the job to the daemon.
            daemon = bool(node.get_attribute(attr.DAEMON))
            kill.cancels_of(runner).request(node.pk, None if daemon else runner.retry_attempts)

    async def cancel_job(self) -> bool:
        """Cancel the job from a step (a monitor stopped it); False when there was none."""
        node = self.node
        if not kill.job_active(node):
            return False
        assert node is not None
        await self.with_retries("kill", self.computer.get_scheduler().kill, node.job_id)
        node.set_attributes({attr.JOB_CANCELLED: True})
        self.report(f"cancelled job {node.job_id}")
        return True

    async def wait_until_job_gone(self, polls: int = 30) -> None:
        """After a cancel: until the scheduler no longer runs the job (no orphan is left)."""
        node = self.node
        assert node is not None and node.job_id  # monitors run on a submitted job
        poller = get_runner().poller(self.computer)
        for _ in range(polls):
            info = await poller.next_update(node.job_id)
            if info is None or info.state == JobState.DONE:
                node.set_attributes({attr.SCHEDULER_STATE: JobState.DONE.value})
                return
        self.report(f"job {node.job_id} still listed {polls} polls after its cancel")

    async def step_until_terminated(self) -> None:
        await super().step_until_terminated()
        # A foreground run waits for its killed job's cancel (a few attempts); a daemon's
        # process does not: its worker goes on cancelling, and its kill has returned.
        node = self.node
        if node is not None and not node.get_attribute(attr.DAEMON):
            task = kill.cancels_of(get_runner()).under_way(node.pk)
            if task is not None:
                await asyncio.shield(task)

    # -- parsing --------------------------------------------------------------------------
    def parse(self, folder: str) -> Any:
        node = self.node
        assert node is not None
        path = Path(folder)
        if not path.is_dir():  # the worker that retrieved it died: fetch the files again
            return plumpy.Wait(None, msg="Waiting to retrieve", data=RETRIEVE)
        try:
            # The retrieved files, the parser's outputs and reports, with the end: one commit.
            # The parser runs on the retrieved files before they are stored: the outputs
            # are written after it, so SQLite's write lock is not held while it runs.
            with self.closing_writes(), self.outputs_stored_at_end():
                retrieved = FolderData()
                for item in sorted(p for p in path.rglob("*") if p.is_file()):
                    retrieved.adopt_object_file(str(item.relative_to(path)), item)
                self.out("retrieved", retrieved)
                outcome = node.get_attribute(attr.JOB_OUTCOME, {})
                scheduler_code = self._scheduler_exit_code(outcome.get("failure"))
                stop = node.get_attribute(attr.STOPPED_BY_MONITOR) or self._stopped_beside(path)
                parser_code = None
                if not stop or stop.get("parse"):
                    try:
                        parser_code = self.parse_retrieved(retrieved, outcome)
                    except Exception as exc:
                        self.report(f"parser failed: {exc}")
                        parser_code = self.exit_codes.ERROR_PARSER_FAILED.format(message=str(exc))
        finally:
            # Once the end is committed: the files are read again should it not be.
            self.when_step_ends(functools.partial(_remove_in_background, path))
        if stop:
            if stop.get("override_exit_code", True):
                return self.monitor_exit_code()
            return parser_code or ExitCode(0)  # the monitor asked to keep the parser's verdict
        # The scheduler's verdict (killed for memory, time) wins unless the parser found a
        # failure of its own, which is more specific. Not when the command died with the
        # kill (no exit status, or a signal's): what the parser saw is the kill's doing.
        parser_failed = parser_code is not None and parser_code.status != 0
        killed = scheduler_code is not None and _ended_by_signal(outcome.get("exit_status"))
        if parser_failed and not killed:
            return parser_code
        return scheduler_code or ExitCode(0)

    def _stopped_beside(self, folder: Path) -> dict[str, Any] | None:
        """A stop decided beside the job (a monitor's guard), as plugins read it from the
        retrieved files: recorded as the monitor's own, or None."""
        node = self.node
        assert node is not None
        results, errors = gather("job_stopped_beside", node=node, folder=folder)
        for plugin, exc in errors:
            node.add_log("WARNING", f"plugin {plugin} failed to read the job's stop: {exc}")
        for plugin, stop in results:
            if not isinstance(stop, dict) or not isinstance(stop.get("name"), str):
                node.add_log("WARNING", f"plugin {plugin}: a stop must be a dict with a name")
                continue
            stop = {
                **stop,
                "message": str(stop.get("message", "")),
                "retrieve": True,
                "parse": False,
                "override_exit_code": True,
                "by": plugin,
            }
            node.set_attribute(attr.STOPPED_BY_MONITOR, stop)
            self.report(f"monitor {stop['name']} stopped the job beside it: {stop['message']}")
            return stop
        return None

    def finish_with(self, code: ExitCode) -> ExitCode:
        return code

    def _scheduler_exit_code(self, failure: str | None) -> ExitCode | None:
        mapping = {
            JobFailure.OUT_OF_MEMORY.value: "ERROR_SCHEDULER_OUT_OF_MEMORY",
            JobFailure.OUT_OF_WALLTIME.value: "ERROR_SCHEDULER_OUT_OF_WALLTIME",
            JobFailure.NODE_FAILURE.value: "ERROR_SCHEDULER_NODE_FAILURE",
            JobFailure.CANCELLED.value: "ERROR_SCHEDULER_CANCELLED",
        }
        label = mapping.get(failure or "")
        return self.exit_codes[label] if label else None
