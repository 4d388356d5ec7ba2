"""The calc job: upload, submit, poll, retrieve and parse one job on a computer.

The transport work happens in the WAITING state, one command at a time (``upload``,
``submit``, ``update``, ``retrieve``). Each command ends in a new WAITING state, so every
step is checkpointed before the next begins; a process loaded from its checkpoint re-runs
only the step it was in, and the steps are idempotent (see :mod:`calcjob_tasks`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import plumpy
from plumpy.process_states import KillInterruption, PauseInterruption, ProcessState

from veglia.engine import calcjob_tasks as tasks
from veglia.engine.calcinfo import CalcInfo
from veglia.engine.exit_codes import ExitCode
from veglia.engine.job_options import plugin_calcjob_options
from veglia.engine.monitors import (
    load_monitor,
    parse_monitors,
    provenance_of,
    validate_monitors_port,
)
from veglia.engine.process import Process, plain_data
from veglia.engine.trace import TraceRecord, build_record, finish_record
from veglia.engine.waiting import InterruptibleWaiting
from veglia.exceptions import TransportError, TransportTaskFailed, UnsafeWorkdirError
from veglia.orm.computers import Code, Computer, load_computer
from veglia.orm.nodes import CalcJobNode, FolderData, RemoteData
from veglia.schedulers import (
    JobFailure,
    JobInfo,
    JobState,
    SchedulerError,
    SchedulerSubmitError,
)

__all__ = ["CalcJob", "TransportTaskFailed"]

UPLOAD, SUBMIT, UPDATE, RETRIEVE = "upload", "submit", "update", "retrieve"
BLOCKED = "blocked"
_ALWAYS_RETRIEVED = ["_scheduler-stdout.txt", "_scheduler-stderr.txt", tasks.EXIT_STATUS_FILE]


def _non_negative_int(value: Any, _: Any = None) -> str | None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
        return f"must be a whole number >= 0, not {value!r}"
    return None


def _positive_int(value: Any, _: Any = None) -> str | None:
    if value is not None and (not isinstance(value, int) or value <= 0):
        return f"must be a whole number > 0, not {value!r}"
    return None


def _patterns(value: Any, _: Any = None) -> str | None:
    from veglia.relative_paths import checked_relative

    for pattern in value or []:
        try:
            checked_relative(pattern, "retrieve pattern")
        except ValueError as exc:
            return str(exc)
    return None


def _environment(value: Any, _: Any = None) -> str | None:
    from veglia.schedulers import environment_problem

    return None if value is None else environment_problem(value)


def _resources(value: Any, _: Any = None) -> str | None:
    from veglia.schedulers import JobResources

    try:
        JobResources(**value)
    except (TypeError, SchedulerError) as exc:
        return str(exc)
    return None


class JobWaiting(InterruptibleWaiting):
    """WAITING with the transport work of the current command; interruptible by kill/pause."""

    async def execute(self) -> Any:
        process: CalcJob = self.process  # type: ignore[assignment]
        command = self.data
        try:
            if command == UPLOAD:
                result = await self._interruptible(process.do_upload(), finish_first=True)
                if result == BLOCKED:
                    return self._next(BLOCKED, "Blocked until `veglia process unblock`")
                return self._next(SUBMIT, "Waiting to submit")
            if command == SUBMIT:
                result = await self._interruptible(process.do_submit(), finish_first=True)
                if isinstance(result, ExitCode):
                    return self.create_state(ProcessState.RUNNING, process.finish_with, result)
                if result == BLOCKED:
                    return self._next(BLOCKED, "Blocked until `veglia process unblock`")
                return self._next(UPDATE, "Waiting for the scheduler")
            if command == BLOCKED:
                blocked = process.node.get_attribute("blocked") if process.node else None
                if blocked:  # paused here until unblocked (or played), then uploaded anew
                    raise PauseInterruption(f"blocked: {_first_line(blocked['reason'])}")
                return self._next(UPLOAD, "Waiting to upload")
            if command == UPDATE:
                while not await self._interruptible(process.do_update(), finish_first=False):
                    pass
                stop = process.node.get_attribute("stopped_by_monitor") if process.node else None
                if stop and not stop.get("retrieve"):
                    return self.create_state(
                        ProcessState.RUNNING, process.finish_with, process.monitor_exit_code()
                    )
                return self._next(RETRIEVE, "Waiting to retrieve")
            if command == RETRIEVE:
                folder = await self._interruptible(process.do_retrieve(), finish_first=True)
                return self.create_state(ProcessState.RUNNING, process.parse, str(folder))
            raise RuntimeError(f"unknown calc job command {command!r}")
        except TransportTaskFailed as exc:
            process.computer_unreachable(f"{command} failed on every attempt: {exc}")
            process.mark_unreachable()
            raise PauseInterruption(f"{command} failed on every attempt: {exc}") from None
        except KillInterruption:
            await process.do_kill()
            raise

    def _next(self, command: str, message: str) -> Any:
        return self.create_state(ProcessState.WAITING, None, msg=message, data=command)


class CalcJob(Process):
    """Base class of calculations that run a job on a computer through its scheduler."""

    _node_class = CalcJobNode

    @classmethod
    def get_state_classes(cls) -> dict[Any, Any]:
        states = dict(super().get_state_classes())
        states[ProcessState.WAITING] = JobWaiting
        return states

    @classmethod
    def spec(cls) -> Any:
        # Plugins add options (calcjob_options): the spec is built anew when they change.
        from veglia.plugin_manager import get_plugin_manager

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
        spec.input_namespace("metadata.options", required=False)
        options = [
            ("resources", dict, _resources, "num_machines, num_mpiprocs_per_machine, ..."),
            (
                "max_memory_kb",
                int,
                _non_negative_int,
                "Memory the job may use, in kB (0: all of a node's, where the scheduler has "
                "such a request, as SLURM's --mem=0).",
            ),
            ("max_wallclock_seconds", int, _positive_int, "Wall time the job may run."),
            ("queue_name", str, None, "Queue (partition) to submit to."),
            ("account", str, None, "Account to charge."),
            ("qos", str, None, "Quality of service."),
            ("custom_scheduler_commands", str, None, "Extra directive lines."),
            ("prepend_text", str, None, "Shell lines before the command."),
            ("append_text", str, None, "Shell lines after the command."),
            ("environment_variables", dict, _environment, "Variables exported in the job."),
            ("additional_retrieve_list", list, _patterns, "More file patterns to retrieve."),
            ("parser_name", str, None, "Entry point of the parser (veglia.parsers)."),
            ("withmpi", bool, None, "Run the code through the computer's mpirun."),
            ("right_size", bool, None, "Adjust requests from similar jobs' history."),
        ]
        for name, valid_type, validator, help_text in options:
            spec.input(
                f"metadata.options.{name}",
                valid_type=valid_type,
                required=False,
                validator=validator,
                help=help_text,
            )
        # Then the options plugins add (the calcjob_options hook), read by those plugins.
        for option in plugin_calcjob_options({name for name, *_ in options}):
            spec.input(
                f"metadata.options.{option.name}",
                valid_type=option.valid_type,
                required=False,
                validator=option.validator,
                help=option.help,
                **({} if option.default is None else {"default": option.default}),
            )
        spec.inputs["metadata"]["options"]["resources"].default = lambda: {"num_machines": 1}
        spec.input(
            "monitors",
            required=False,
            valid_type=dict,
            validator=validate_monitors_port,
            help="Monitors called at each scheduler poll: name -> {entry_point, kwargs, ...}.",
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
        from veglia.entry_points import ParserFactory

        parser = ParserFactory(parser_name)(self)
        return parser.parse(retrieved, outcome)

    # -- the node --------------------------------------------------------------------------
    @property
    def options(self) -> dict[str, Any]:
        return dict(self.inputs.get("metadata", {}).get("options", {})) if self.inputs else {}

    @property
    def code(self) -> Code | None:
        return self.inputs.get("code") if self.inputs else None

    @property
    def computer(self) -> Computer:
        computer = self.__dict__.get("_computer")
        if computer is None:
            if self.code is not None:
                computer = self.code.computer
            else:
                from veglia.manage import get_profile

                label = self.metadata.get("computer") or get_profile().get_option(
                    "computer.default"
                )
                computer = load_computer(label)
            self.__dict__["_computer"] = computer
        return computer

    def prepare_node(self, node: Any) -> None:
        computer = self.computer
        node.computer_pk = computer.pk
        attributes = {
            "options": plain_data(self.options),
            "computer": computer.label,
            "similarity_key": self.similarity_key(),
        }
        monitors = parse_monitors(self.inputs.get("monitors") or {})
        if monitors:
            attributes["monitors"] = [m.to_dict() for m in monitors]
            attributes["monitor_provenance"] = {
                m.name: provenance_of(m.entry_point, load_monitor(m.entry_point)) for m in monitors
            }
        if self.code is not None:
            attributes["code"] = {
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

    def _caching_enabled(self) -> bool:
        from veglia.manage import get_profile

        explicit = self.metadata.get("cache")
        return bool(get_profile().get_option("caching.enabled") if explicit is None else explicit)

    def _from_cache(self) -> ExitCode | None:
        """With caching on: the outputs of an identical finished job, copied, or None."""
        from veglia.engine.caching import calcjob_hash, clone, find_cached
        from veglia.engine.process import flatten_inputs

        node = self.node
        if node is None:
            return None
        inputs = flatten_inputs(
            {k: v for k, v in self.inputs.items() if k not in self.non_db_inputs}
        )
        # Always recorded, so a later job with caching on can reuse this one.
        digest = calcjob_hash(self, inputs)
        node.set_attribute("cache_hash", digest)
        if not self._caching_enabled():
            return None
        source = find_cached(digest, node.pk)
        if source is None:
            return None
        for label, output in source.outputs.items():
            self.out(label.replace("__", "."), clone(output))
        # The GPU block travels with the outputs: a cached job still reports it.
        copied = {
            k: source.get_attribute(k)
            for k in ("gpu_metrics",)
            if source.get_attribute(k) is not None
        }
        node.set_attributes({"cached_from": {"pk": source.pk, "uuid": source.uuid}, **copied})
        self.report(f"cached from process {source.pk}: not run again")
        return ExitCode(source.exit_status or 0, source.exit_message)

    # -- transport steps -----------------------------------------------------------------------
    async def _with_retries(self, name: str, function: Any, *args: Any) -> Any:
        from veglia.engine.runner import get_runner

        runner = get_runner()
        delay = runner.retry_interval
        for attempt in range(1, runner.retry_attempts + 1):
            try:
                async with runner.lease_transport(self.computer) as lease:
                    result = await lease.run(function, lease.transport, *args)
                self._computer_reached()
                return result
            except (TransportError, OSError) as exc:
                self.report(f"{name} attempt {attempt}/{runner.retry_attempts} failed: {exc}")
                if attempt == runner.retry_attempts:
                    raise TransportTaskFailed(str(exc)) from None
                await asyncio.sleep(delay)
                delay *= 2
        raise AssertionError("unreachable")

    def _computer_reached(self) -> None:
        from veglia.notifications import clear_event, event_pending, notify

        label = self.computer.label
        key = f"unreachable-{label}"
        # A stat per task; the one that ends the outage says so, once.
        if event_pending(key) and clear_event(key):
            notify(
                "computer_back",
                f"computer {label} is back",
                f"veglia reaches {label} ({self.computer.hostname}) again; the jobs it paused "
                "for the outage go on by themselves.",
            )

    def mark_unreachable(self) -> None:
        """Paused for an outage, not by a person: the daemon plays it when the computer is
        back (``veglia.engine.outages``)."""
        node = self.node
        assert node is not None
        since = (node.get_attribute("unreachable") or {}).get("since") or time.time()
        node.set_attribute("unreachable", {"computer": self.computer.label, "since": since})

    def computer_unreachable(self, reason: str) -> None:
        """One notification per outage of a computer, not one per job or poll."""
        from veglia.notifications import notify_once

        label = self.computer.label
        notify_once(
            f"unreachable-{label}",
            "computer_unreachable",
            f"computer {label} is unreachable",
            f"veglia could not reach {label} ({self.computer.hostname}) and paused its jobs, "
            f"process {self.pid} first: {reason}\n\nOnce it is back: `veglia process play "
            "--all`.",
        )

    def _workdir(self, transport: Any) -> str:
        """The job's folder; its root is made private and checked first (once per
        connection): a root another user controls is refused."""
        from veglia.workdir_root import private_root

        assert self.node is not None
        root = self.computer.get_workdir(transport.whoami(), transport.home())
        return self.computer.job_workdir(private_root(transport, root), self.node.uuid)

    async def do_upload(self) -> str | None:
        node = self.node
        assert node is not None
        try:
            await self._upload()
        except UnsafeWorkdirError as exc:
            if not node.get_attribute("daemon"):
                raise  # a foreground run ends with the reason; nobody would unblock it
            return self._block(str(exc), f"veglia refused the work dir of {self.computer.label}")
        return None

    async def _upload(self) -> None:
        node = self.node
        assert node is not None
        self._right_size()
        sandbox = Path(tempfile.mkdtemp(prefix="veglia-sandbox-"))
        try:
            calcinfo = self.prepare_for_submission(sandbox)
            script = tasks.build_template(node, calcinfo, self.code, self.computer)
            retrieve = [
                tasks.checked_retrieve_pattern(pattern)
                for pattern in [
                    *calcinfo.retrieve_list,
                    *self.options.get("additional_retrieve_list", []),
                ]
            ]
            files = {
                str(path.relative_to(sandbox)): path.read_bytes()
                for path in sorted(p for p in sandbox.rglob("*") if p.is_file())
            }
            node.put_objects({**files, tasks.SCRIPT_NAME: script.encode()})

            def upload(transport: Any) -> str:
                workdir = self._workdir(transport)
                tasks.upload(transport, node, workdir, sandbox, calcinfo, script)
                return workdir

            workdir = await self._with_retries("upload", upload)
        finally:
            shutil.rmtree(sandbox, ignore_errors=True)
        node.set_attributes({"remote_workdir": workdir, "retrieve_list": retrieve})
        if "remote_folder" not in node.outputs:  # replayed after a crash: one output only
            self.out("remote_folder", RemoteData(workdir, self.computer.label))
        self.report(f"uploaded to {self.computer.label}:{workdir}")

    async def do_submit(self) -> ExitCode | None:
        node = self.node
        assert node is not None
        if node.job_id:  # submitted before a restart: never twice
            if not any(log.message.startswith("submitted job") for log in node.logs):
                # The worker died between recording the job id and saying so.
                self.report(f"submitted job {node.job_id}")
            return None
        try:
            job_id = await self._with_retries(
                "submit", tasks.submit, self.computer, node.remote_workdir
            )
        except SchedulerError as exc:
            if not getattr(exc, "permanent", True):
                raise TransportTaskFailed(str(exc)) from None
            if isinstance(exc, SchedulerSubmitError) and not exc.resource_request:
                return self._block(str(exc))
            # A request the queue cannot give: a restart policy may pick another queue.
            self.report(f"submission rejected: {exc}")
            node.set_attribute(
                "submission_rejected",
                {"message": str(exc), "resource_request": getattr(exc, "resource_request", False)},
            )
            await self._record_queues()
            return self.exit_codes.ERROR_SUBMISSION_REJECTED.format(message=str(exc))
        node.set_attributes(
            {
                "job_id": job_id,
                "scheduler_state": JobState.QUEUED.value,
                "submitted_at": time.time(),
            }
        )
        self.report(f"submitted job {job_id}")
        self._trace_updated("SUBMITTED")
        return None

    def _block(self, reason: str, cause: str = "") -> str:
        """A submission no retry can fix: hold the job, tell the user once per cause."""
        from veglia.notifications import notify_once

        node = self.node
        assert node is not None
        label = self.computer.label
        first_line = _first_line(reason)
        node.set_attribute("blocked", {"reason": reason, "time": time.time(), "computer": label})
        self.report(f"blocked: {reason}")
        notify_once(
            _blocked_event(label, reason),
            "jobs_blocked",
            f"jobs on {label} are blocked: {first_line[:120]}",
            (
                cause
                or f"The scheduler of {label} refused process {node.pk} (and will refuse "
                "any job asking the same)"
            )
            + f":\n\n{reason}\n\nThe jobs wait. Fix the cause (the account, queue, option "
            "or work dir), then resume them with `veglia process unblock --all`, or "
            "`veglia process unblock PK --option NAME=VALUE` to change a job's option.",
        )
        return BLOCKED

    def on_playing(self) -> None:
        super().on_playing()
        node = self.node
        if node is not None and node.get_attribute("unreachable"):
            node.delete_attribute("unreachable")
        if node is not None and node.get_attribute("blocked"):
            from veglia.notifications import clear_event

            blocked = node.get_attribute("blocked")
            node.delete_attribute("blocked")
            self.report("unblocked: uploading and submitting again")
            clear_event(_blocked_event(blocked.get("computer", ""), blocked["reason"]))

    def _right_size(self) -> None:
        """Requests against the history of similar jobs (option ``resources.right_size``)."""
        from veglia.engine.history import recommend
        from veglia.manage import get_profile

        node = self.node
        assert node is not None
        explicit = self.options.get("right_size")
        mode = "off" if explicit is False else get_profile().get_option("resources.right_size")
        options = dict(node.options)
        requests = ("max_memory_kb", "max_wallclock_seconds")
        if mode == "off" or node.get_attribute("right_sized") is not None:
            return
        if mode != "apply" and all(options.get(name) is None for name in requests):
            return  # 'warn' and 'lower' only judge requests that were made
        advice = recommend(node.get_attribute("similarity_key"), exclude_pk=node.pk)
        changed = {}
        for name, recommended, floor, unit in (
            ("max_memory_kb", advice.memory_kb, 1024, "kB"),
            ("max_wallclock_seconds", advice.wallclock_seconds, 60, "s"),
        ):
            if recommended is None:
                continue
            recommended = max(recommended, floor)
            requested = options.get(name)
            if mode == "apply" or (
                requested is not None and requested > 2 * recommended and mode == "lower"
            ):
                if requested != recommended:
                    changed[name] = (requested, recommended)
                    options[name] = recommended
            elif requested is not None and requested > 2 * recommended:
                self.report(
                    f"{name} = {requested} {unit} is over twice the {recommended} {unit} that "
                    f"{advice.samples} similar jobs needed (mean + 1 SD); set the profile "
                    "option resources.right_size to 'lower' to lower such requests"
                )
        if not changed:
            return
        record = {name: {"from": old, "to": new} for name, (old, new) in changed.items()}
        node.set_attributes({"options": options, "right_sized": record})
        for name, (old, new) in changed.items():
            self.report(
                f"right-sized {name} from {old} to {new} (mean + 1 SD of {advice.samples} "
                "similar jobs)"
            )

    async def _record_queues(self) -> None:
        """The queues and their limits, on the node, for a restart policy to choose from."""
        from veglia.engine.queues import queues_of
        from veglia.engine.runner import get_runner

        node = self.node
        assert node is not None
        try:
            async with get_runner().lease_transport(self.computer) as lease:
                queues = await lease.run(queues_of, self.computer, lease.transport)
        except (TransportError, OSError) as exc:
            node.add_log("DEBUG", f"could not list the queues: {exc}")
            queues = queues_of(self.computer, None)
        node.set_attribute("queues", [dataclasses.asdict(q) for q in queues])

    async def do_update(self) -> bool:
        """One poll; True when the job has left the scheduler or is done."""
        from veglia.engine.runner import get_runner

        node = self.node
        assert node is not None and node.job_id
        try:
            info = await get_runner().poller(self.computer).next_update(node.job_id)
        except (TransportError, SchedulerError) as exc:
            return await self._update_failed(exc)
        self._update_failures = 0
        done = info is None or info.state == JobState.DONE
        changes = {"scheduler_state": JobState.DONE.value if done else info.state.value}
        if (
            info is not None
            and info.state == JobState.RUNNING
            and not node.get_attribute("started_at")
        ):
            changes["started_at"] = time.time()
        if info is not None:
            changes["last_job_info"] = _job_info_attributes(info)
        if any(node.get_attribute(key) != value for key, value in changes.items()):
            node.set_attributes(changes)  # one write, and none while nothing changes
            if "started_at" in changes:
                self._trace_updated("RUNNING")
        if not done and node.get_attribute("monitors"):
            return await self._run_monitors()
        return done

    async def _run_monitors(self) -> bool:
        """After a poll: the job's monitors; True when one of them stopped the job."""
        from veglia.engine.monitor_runner import MonitorRunner
        from veglia.engine.runner import get_runner

        async with get_runner().lease_transport(self.computer) as lease:
            outcome = await MonitorRunner(self).run_cycle(lease)
        if outcome is None:
            return False
        name, result = outcome
        assert self.node is not None
        self.node.set_attribute(
            "stopped_by_monitor",
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
        await self.do_kill()
        await self._wait_until_gone()
        await self._record_queues()  # for a restart policy that moves the job
        return True

    async def _wait_until_gone(self, polls: int = 30) -> None:
        """After a cancel: until the scheduler no longer runs the job (no orphan is left)."""
        from veglia.engine.runner import get_runner

        assert self.node is not None
        for _ in range(polls):
            info = await get_runner().poller(self.computer).next_update(self.node.job_id)
            if info is None or info.state == JobState.DONE:
                self.node.set_attributes({"scheduler_state": JobState.DONE.value})
                return
        self.report(f"job {self.node.job_id} still listed {polls} polls after its cancel")

    def monitor_exit_code(self) -> ExitCode:
        assert self.node is not None
        stop = self.node.get_attribute("stopped_by_monitor") or {}
        return self.exit_codes.STOPPED_BY_MONITOR.format(
            name=stop.get("name", "?"), message=stop.get("message", "")
        )

    async def _update_failed(self, exc: Exception) -> bool:
        from veglia.engine.runner import get_runner

        runner = get_runner()
        failures = getattr(self, "_update_failures", 0) + 1
        self._update_failures = failures
        self.report(f"update attempt {failures}/{runner.retry_attempts} failed: {exc}")
        if failures >= runner.retry_attempts:
            self._update_failures = 0
            raise TransportTaskFailed(str(exc))
        await asyncio.sleep(runner.retry_interval * 2 ** (failures - 1))
        return False

    async def do_retrieve(self) -> Path:
        node = self.node
        assert node is not None
        last = node.get_attribute("last_job_info")
        last_info = _job_info_from_attributes(last) if last else None
        patterns = [*node.get_attribute("retrieve_list", []), *_ALWAYS_RETRIEVED]
        folder, outcome = await self._with_retries(
            "retrieve", tasks.retrieve, self.computer, node.remote_workdir, patterns, last_info
        )
        node.set_attributes({"job_outcome": outcome})
        if outcome.get("skipped"):
            self.report(
                "not retrieved, as not regular files (links, FIFOs, devices): "
                + ", ".join(outcome["skipped"][:20])
            )
        await self._collect_trace()
        # A plugin's measurement first (a trace it read, for this very job). Then
        # what the batch system measured (SLURM's sacct) over /usr/bin/time: the scheduler
        # counts every process of the job, the prepend and append text too, as it does
        # against the job's memory request, which right-sizing sets; time's %M is the
        # largest single process of each command (an MPI run or a pipe counts once), and a
        # job killed for memory never writes it. time's figure stays in job_outcome.
        usage = (
            _measured_usage(node.get_attribute("trace_record"))
            or (last or {}).get("usage")
            or outcome.get("usage")
        )
        dropped = (outcome.get("usage") or {}).pop("dropped", 0)
        if dropped:
            self.report(f"{dropped} line(s) of {tasks.USAGE_FILE} were not sane numbers: dropped")
        if usage and usage.get("peak_memory_kb") is not None:
            node.set_attribute("usage", usage)
        if outcome.get("failure") in (
            JobFailure.OUT_OF_MEMORY.value,
            JobFailure.OUT_OF_WALLTIME.value,
        ):
            await self._record_queues()
        self.report(f"retrieved {sum(1 for p in folder.rglob('*') if p.is_file())} files")
        return folder

    # -- trace -------------------------------------------------------------------------
    async def _collect_trace(self) -> None:
        """The job's trace record, with what plugins add from its work dir (GPU metrics)."""
        from veglia.engine.runner import get_runner

        node = self.node
        assert node is not None
        workdir = node.remote_workdir
        try:
            async with get_runner().lease_transport(self.computer) as lease:

                def collect(transport: Any) -> TraceRecord:
                    transport.cwd = workdir or "/"
                    return self._record_with_plugins(transport)

                record = await lease.run(collect, lease.transport)
        except (TransportError, OSError) as exc:  # the trace must never cost the job
            node.add_log("DEBUG", f"trace collected without the computer: {exc}")
            record = self._record_with_plugins(None)
        self._store_record(record)

    def _record_with_plugins(self, transport: Any) -> TraceRecord:
        from veglia.plugin_manager import call_each

        assert self.node is not None
        record = build_record(self.node, self.computer)
        for plugin, exc in call_each(
            "collect_trace", node=self.node, transport=transport, record=record
        ):
            self.node.add_log("WARNING", f"plugin {plugin} failed to collect the trace: {exc}")
        return record

    def _store_record(self, record: TraceRecord) -> None:
        assert self.node is not None
        values: dict[str, Any] = {"trace_record": record.to_dict()}
        if record.gpu_metrics is not None:
            values["gpu_metrics"] = record.gpu_metrics
        self.node.set_attributes(values)

    def on_terminal_state_recorded(self) -> None:
        super().on_terminal_state_recorded()
        self._trace_ready()

    def _trace_updated(self, status: str) -> None:
        from veglia.plugin_manager import call_each, has_implementations

        if not has_implementations("trace_updated"):
            return  # no reporter listens: build nothing on the hot path
        node = self.node
        assert node is not None
        record = build_record(node, self.computer, status)
        for plugin, exc in call_each("trace_updated", node=node, record=record):
            node.add_log("WARNING", f"plugin {plugin} failed to report the trace: {exc}")

    def _trace_ready(self) -> None:
        from veglia.plugin_manager import call_each

        node = self.node
        assert node is not None
        data = node.get_attribute("trace_record")
        record = TraceRecord.from_dict(data) if data else self._record_with_plugins(None)
        if record.gpu_metrics is None and node.get_attribute("gpu_metrics") is not None:
            record.gpu_metrics = node.get_attribute("gpu_metrics")  # copied from the cache
        finish_record(record, node.refresh())
        self._store_record(record)
        for plugin, exc in call_each("trace_ready", node=node, record=record):
            node.add_log("WARNING", f"plugin {plugin} failed to report the trace: {exc}")

    def _job_active(self) -> bool:
        node = self.node
        return bool(
            node is not None
            and node.job_id
            and not node.get_attribute("job_cancelled")
            and node.get_attribute("scheduler_state") != JobState.DONE.value
        )

    async def do_kill(self) -> None:
        if not self._job_active():
            return
        assert self.node is not None
        await self._with_retries("kill", tasks.kill, self.computer, self.node.job_id)
        self.node.set_attributes({"job_cancelled": True})
        self.report(f"cancelled job {self.node.job_id}")
        await self._collect_trace()

    def on_kill(self, msg: Any) -> None:
        # Killed while not stepping (paused, or loaded but not running): JobWaiting did not
        # get to cancel the job, so do it here, blocking, rather than leave an orphan.
        if self._job_active():
            assert self.node is not None
            with self.computer.get_transport() as transport:
                tasks.kill(transport, self.computer, self.node.job_id)
            self.node.set_attributes({"job_cancelled": True})
            self.report(f"cancelled job {self.node.job_id}")
        super().on_kill(msg)

    # -- parsing --------------------------------------------------------------------------
    def parse(self, folder: str) -> Any:
        node = self.node
        assert node is not None
        path = Path(folder)
        if not path.is_dir():  # the worker that retrieved it died: fetch the files again
            return plumpy.Wait(None, msg="Waiting to retrieve", data=RETRIEVE)
        try:
            retrieved = FolderData()
            for item in sorted(p for p in path.rglob("*") if p.is_file()):
                retrieved.put_object_from_file(str(item.relative_to(path)), item)
            self.out("retrieved", retrieved)
            outcome = node.get_attribute("job_outcome", {})
            scheduler_code = self._scheduler_exit_code(outcome.get("failure"))
            stop = node.get_attribute("stopped_by_monitor")
            parser_code = None
            if not stop or stop.get("parse"):
                try:
                    parser_code = self.parse_retrieved(retrieved, outcome)
                except Exception as exc:
                    self.report(f"parser failed: {exc}")
                    parser_code = self.exit_codes.ERROR_PARSER_FAILED.format(message=str(exc))
        finally:
            shutil.rmtree(path, ignore_errors=True)
        if stop:
            if stop.get("override_exit_code", True):
                return self.monitor_exit_code()
            return parser_code or ExitCode(0)  # the monitor asked to keep the parser's verdict
        # The scheduler's verdict (killed for memory, time) wins unless the parser found a
        # failure of its own, which is more specific.
        if parser_code is not None and parser_code.status != 0:
            return parser_code
        return scheduler_code or ExitCode(0)

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


def _first_line(text: str) -> str:
    return text.splitlines()[0] if text else ""


def _blocked_event(computer: str, reason: str) -> str:
    """One notification key per computer and cause, however many jobs it blocks."""
    import hashlib

    digest = hashlib.sha256(_first_line(reason).encode()).hexdigest()[:12]
    return f"blocked-{computer}-{digest}"


def _measured_usage(record: dict[str, Any] | None) -> dict[str, Any] | None:
    """Peak memory and run time a plugin measured and put on the trace record (bytes and
    ms there); None when none did, or its numbers are not ones a machine could make."""
    record = record or {}
    source, peak, realtime = (record.get(k) for k in ("measured_by", "peak_rss", "realtime"))

    def sane(value: Any, limit: float) -> bool:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        if isinstance(value, float) and not math.isfinite(value):
            return False
        return 0 <= value < limit  # a 400-digit int compares; it cannot become a float

    if not source or not sane(peak, 2**63):
        return None
    return {
        "peak_memory_kb": int(peak) // 1024,
        "runtime_seconds": realtime / 1000 if sane(realtime, 2**53) else None,
        "source": source,
    }


def _job_info_attributes(info: JobInfo) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "job_id": info.job_id,
        "state": info.state.value,
        "raw_state": info.raw_state,
        "reason": info.reason,
        "failure": info.failure.value if info.failure else None,
        "exit_code": info.exit_code,
        "queue": info.queue,
        "wallclock_seconds": info.wallclock_seconds,
    }
    if info.details.get("usage"):  # what the batch system measured (SLURM's sacct)
        attributes["usage"] = info.details["usage"]
    return attributes


def _job_info_from_attributes(data: dict[str, Any]) -> JobInfo:
    return JobInfo(
        job_id=data["job_id"],
        state=JobState(data["state"]),
        raw_state=data.get("raw_state", ""),
        reason=data.get("reason", ""),
        failure=JobFailure(data["failure"]) if data.get("failure") else None,
        exit_code=data.get("exit_code"),
        queue=data.get("queue"),
        wallclock_seconds=data.get("wallclock_seconds"),
        details={"usage": data["usage"]} if data.get("usage") else {},
    )
