"""The Scheduler base class: job scripts, submission, job state queries and cancellation.

A scheduler turns a :class:`JobTemplate` into a submit script and parses the output of the
batch system's commands, which it runs through a transport. Implementations only write the
command lines and parsers; :meth:`Scheduler.submit`, :meth:`Scheduler.get_jobs` and
:meth:`Scheduler.kill` run them. ``core.direct`` is the reference implementation.
"""

from __future__ import annotations

import enum
import re
import shlex
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from veglia.exceptions import SchedulerError, SchedulerSubmitError

if TYPE_CHECKING:
    from collections.abc import Callable

    from veglia.transports import Transport

__all__ = [
    "JobFailure",
    "JobInfo",
    "JobResources",
    "JobState",
    "JobTemplate",
    "QueueInfo",
    "Scheduler",
    "SchedulerError",
    "SchedulerSubmitError",
]


class JobState(str, enum.Enum):
    """Where a job is, in the terms common to every batch system."""

    UNDETERMINED = "undetermined"
    QUEUED = "queued"
    QUEUED_HELD = "queued_held"
    RUNNING = "running"
    SUSPENDED = "suspended"
    DONE = "done"


class JobFailure(str, enum.Enum):
    """Why the batch system ended a job, when it did (used to resubmit with more)."""

    OUT_OF_MEMORY = "out_of_memory"
    OUT_OF_WALLTIME = "out_of_walltime"
    CANCELLED = "cancelled"
    NODE_FAILURE = "node_failure"
    FAILED = "failed"
    SUBMISSION = "submission"


@dataclass
class JobResources:
    """How many machines and processes a job asks for."""

    num_machines: int = 1
    num_mpiprocs_per_machine: int = 1
    num_cores_per_mpiproc: int = 1

    def __post_init__(self) -> None:
        for name in ("num_machines", "num_mpiprocs_per_machine", "num_cores_per_mpiproc"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise SchedulerError(
                    f"resources.{name} must be a whole number >= 1, not {value!r}."
                )

    @property
    def tot_num_mpiprocs(self) -> int:
        return self.num_machines * self.num_mpiprocs_per_machine

    @property
    def cpus(self) -> int:
        return self.tot_num_mpiprocs * self.num_cores_per_mpiproc


@dataclass
class JobTemplate:
    """Everything a submit script is made from."""

    commands: list[str]
    job_name: str = "veglia"
    working_directory: str = "."
    stdout_name: str = "_scheduler-stdout.txt"
    stderr_name: str = "_scheduler-stderr.txt"
    resources: JobResources = field(default_factory=JobResources)
    max_memory_kb: int | None = None
    max_wallclock_seconds: int | None = None
    queue_name: str | None = None
    account: str | None = None
    qos: str | None = None
    custom_scheduler_commands: str = ""
    prepend_text: str = ""
    append_text: str = ""
    environment: dict[str, str] = field(default_factory=dict)
    shebang: str = "#!/bin/bash"


@dataclass(slots=True)
class JobInfo:
    """One job as the batch system reports it."""

    job_id: str
    state: JobState
    raw_state: str = ""
    reason: str = ""
    failure: JobFailure | None = None
    exit_code: int | None = None
    queue: str | None = None
    title: str = ""
    wallclock_seconds: int | None = None
    #: The batch system's own fields. A finished job's ``details["usage"]``, where the batch
    #: system measured it (SLURM's sacct), is recorded as the job's usage: ``peak_memory_kb``,
    #: ``runtime_seconds``, ``cpu_percent`` (of one core) and ``source``.
    details: dict[str, Any] = field(default_factory=dict)

    def to_attributes(self) -> dict[str, Any]:
        """What a node keeps of the job's last poll (JSON; ``details`` only its usage)."""
        data: dict[str, Any] = {
            "job_id": self.job_id,
            "state": self.state.value,
            "raw_state": self.raw_state,
            "reason": self.reason,
            "failure": self.failure.value if self.failure else None,
            "exit_code": self.exit_code,
            "queue": self.queue,
            "wallclock_seconds": self.wallclock_seconds,
        }
        if self.details.get("usage"):
            data["usage"] = self.details["usage"]
        return data

    @classmethod
    def from_attributes(cls, data: dict[str, Any]) -> JobInfo:
        return cls(
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


@dataclass
class QueueInfo:
    """A queue (partition) and its limits; None means no limit is known."""

    name: str
    max_wallclock_seconds: int | None = None
    max_memory_kb: int | None = None
    max_nodes: int | None = None
    default: bool = False
    available: bool = True

    def allows(
        self,
        wallclock_seconds: int | None = None,
        memory_kb: int | None = None,
        nodes: int | None = None,
    ) -> bool:
        """Whether a job with these requests fits in the queue's limits."""
        checks = (
            (wallclock_seconds, self.max_wallclock_seconds),
            (memory_kb, self.max_memory_kb),
            (nodes, self.max_nodes),
        )
        return all(want is None or limit is None or want <= limit for want, limit in checks)


_ENVIRONMENT_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def environment_problem(variables: Any) -> str | None:
    """Why ``variables`` cannot be exported by a submit script, or None when they can.

    Names go into the script as they are, so only shell names are allowed; values are
    quoted, and must be text or numbers.
    """
    if not isinstance(variables, dict):
        return f"must be a dict of NAME: value, not {type(variables).__name__}"
    for name, value in variables.items():
        if not isinstance(name, str) or not _ENVIRONMENT_NAME.fullmatch(name):
            return (
                f"{name!r} is not an environment variable name: use letters, digits and "
                "underscores, not starting with a digit"
            )
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            return f"the value of {name} must be text or a number, not {type(value).__name__}"
    return None


class Scheduler(ABC):
    """One batch system. Subclasses write command lines and parse what they print."""

    #: ``(exit code, stdout, stderr)`` of the list command when it lists no job (for ids
    #: the batch system does not know): the scheduler contract test checks that it parses
    #: to no job, while garbage and a failed command raise :class:`SchedulerError`.
    example_empty_listing: ClassVar[tuple[int, str, str] | None] = None

    # -- script -----------------------------------------------------------------------
    @abstractmethod
    def script_header(self, template: JobTemplate) -> list[str]:
        """Directive lines (``#SBATCH ...``) for the template's requests."""

    def get_submit_script(self, template: JobTemplate) -> str:
        """The whole submit script: shebang, directives, environment, commands."""
        lines = [template.shebang, *self.script_header(template)]
        if template.custom_scheduler_commands:
            lines.append(template.custom_scheduler_commands.rstrip("\n"))
        lines.append("")
        problem = environment_problem(template.environment)
        if problem:
            raise SchedulerError(f"Environment variables: {problem}.")
        for key, value in template.environment.items():
            lines.append(f"export {key}={shlex.quote(str(value))}")
        if template.prepend_text:
            lines.append(template.prepend_text.rstrip("\n"))
        lines.extend(template.commands)
        if template.append_text:
            lines.append(template.append_text.rstrip("\n"))
        return "\n".join(lines) + "\n"

    # -- commands ---------------------------------------------------------------------
    @abstractmethod
    def submit_command(self, script_name: str) -> str:
        """The command line that submits ``script_name`` from the work directory."""

    @abstractmethod
    def parse_submit_output(self, retval: int, stdout: str, stderr: str) -> str:
        """The job id from the submit command's output; raise SchedulerError on failure."""

    @abstractmethod
    def joblist_command(self, job_ids: list[str] | None = None, user: str | None = None) -> str:
        """The command line that lists the given jobs (or all jobs of ``user``)."""

    #: How many ids a list command carries on its line at most. The line reaches the batch
    #: system's computer as one argument of its shell, which Linux caps at 128 kB (about
    #: 15,000 ids); past this many, a scheduler whose ``joblist_input`` returns
    #: :meth:`ids_input` leaves them off the line and reads them on standard input.
    IDS_ON_THE_LINE: int = 1000

    def joblist_input(self, job_ids: list[str]) -> bytes | None:
        """What the list command for ``job_ids`` reads on its standard input; None: nothing,
        the default. A scheduler whose list command could grow past what one argument holds
        returns :meth:`ids_input` here and writes a command reading them past
        ``IDS_ON_THE_LINE`` (:meth:`ids_not_listed` helps)."""
        return None

    def ids_input(self, job_ids: list[str], check: Callable[[str], str]) -> bytes | None:
        """For ``joblist_input``: past ``IDS_ON_THE_LINE`` ids, ``job_ids`` one a line, each
        passed through ``check`` (the scheduler's id check, as they reach a shell); None up
        to that many, which go on the command line."""
        if len(job_ids) <= self.IDS_ON_THE_LINE:
            return None
        return "".join(f"{check(job_id)}\n" for job_id in job_ids).encode()

    @staticmethod
    def ids_not_listed(listed: str) -> str:
        """A bash pipeline printing, one a line, the ids in ``$ids`` (read with
        ``ids=$(cat)`` from :meth:`ids_input`) that the bash command ``listed`` does not
        print as a whole line: one ``grep -vxF``, however many ids. A list command that
        lists all of the user's jobs then asks the batch system about just these."""
        return f'printf "%s\\n" $ids | grep -vxF -f <({listed})'

    @abstractmethod
    def parse_joblist_output(self, retval: int, stdout: str, stderr: str) -> list[JobInfo]:
        """Jobs from the list command's output.

        A job missing from the result counts as finished, so output that cannot be parsed,
        or a command that failed, must raise :class:`SchedulerError` (the poll is then
        retried and backed off), never give an empty or partial list."""

    @abstractmethod
    def kill_command(self, job_id: str) -> str:
        """The command line that cancels a job."""

    def parse_kill_output(self, retval: int, stdout: str, stderr: str) -> bool:
        """Whether the cancel command was accepted."""
        return retval == 0

    def classify_failure(self, info: JobInfo | None, scheduler_stderr: str) -> JobFailure | None:
        """Why the batch system ended a finished job, from its last info and the job's
        scheduler stderr file (batch systems often say "exceeded memory limit" only there).

        ``None`` means the batch system did not end the job itself.
        """
        return info.failure if info is not None else None

    def queues_command(self) -> str | None:
        """The command line that lists the queues and their limits (None: cannot)."""
        return None

    def parse_queues_output(self, retval: int, stdout: str, stderr: str) -> list[QueueInfo]:
        """Queues from the queues command's output."""
        return []

    def unsatisfiable_reason(self, reason: str) -> bool:
        """Whether a pending job's ``reason`` means it can never start in its queue as it
        is (a request over the queue's limits, a queue that is down)."""
        return False

    def move_command(
        self, job_id: str, queue: str, wallclock_seconds: int | None, running: bool
    ) -> str | None:
        """The command line that moves a job to ``queue`` with a new wall-time limit
        (``wallclock_seconds``; None keeps the job's), or None when this batch system cannot
        move a job in that state (``running``: the job has started; else it is pending).

        The engine moves a job whose similar jobs took longer than its queue allows (see
        docs/pipelines.md, "Moving a job to a longer queue"); it asks for each job, so an
        implementation may say yes for pending jobs only. Validate ``job_id`` as
        ``kill_command`` does."""
        return None

    def parse_move_output(self, retval: int, stdout: str, stderr: str) -> None:
        """Raise :class:`SchedulerError` with the batch system's message when the move
        command failed; by default an exit status other than 0 is a failure."""
        if retval != 0:
            message = (stderr.strip() or stdout.strip() or "(no output)")[:2000]
            raise SchedulerError(f"Moving the job failed (exit {retval}): {message}")

    # -- run through a transport ---------------------------------------------------------
    def get_jobs(self, transport: Transport, job_ids: list[str]) -> dict[str, JobInfo]:
        """The jobs the batch system still knows of, by id, in one command for all.

        A job missing from the result has left the batch system. A batch system that keeps
        finished jobs a while (SLURM, PBS Pro, LSF) returns them too, with state DONE, their
        exit code and ``failure``.
        """
        if not job_ids:
            return {}
        retval, stdout, stderr = self.run_joblist(transport, job_ids)
        return {info.job_id: info for info in self.parse_joblist_output(retval, stdout, stderr)}

    def run_joblist(self, transport: Transport, job_ids: list[str]) -> tuple[int, str, str]:
        """The list command for ``job_ids`` run with its standard input: ``(exit code,
        stdout, stderr)``. For a ``get_jobs`` of one's own, which then reads them."""
        return transport.exec_command(
            self.joblist_command(job_ids), stdin=self.joblist_input(job_ids), timeout=120
        )

    def kill(self, transport: Transport, job_id: str) -> bool:
        retval, stdout, stderr = transport.exec_command(self.kill_command(job_id), timeout=120)
        return self.parse_kill_output(retval, stdout, stderr)

    def move(
        self,
        transport: Transport,
        job_id: str,
        queue: str,
        wallclock_seconds: int | None,
        running: bool,
    ) -> None:
        """Move the job to ``queue`` with the new wall-time limit; :class:`SchedulerError`
        with the batch system's message when it refused, or when it cannot move a job in
        that state (``move_command`` is None)."""
        command = self.move_command(job_id, queue, wallclock_seconds, running)
        if command is None:
            state = "running" if running else "pending"
            raise SchedulerError(
                f"{type(self).__name__} cannot move a {state} job to another queue; leave it "
                "where it is, or cancel it and submit it again in the other queue."
            )
        retval, stdout, stderr = transport.exec_command(command, timeout=120)
        self.parse_move_output(retval, stdout, stderr)

    def get_queues(self, transport: Transport) -> list[QueueInfo]:
        """The queues the batch system offers, with their limits ([] when it cannot say)."""
        command = self.queues_command()
        if command is None:
            return []
        retval, stdout, stderr = transport.exec_command(command, timeout=120)
        return self.parse_queues_output(retval, stdout, stderr)
