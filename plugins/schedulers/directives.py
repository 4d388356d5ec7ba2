"""What the batch schedulers share: directive values, times, memory, job names and ids, array
summaries, refusals of requests a batch system lacks, and the submit error they raise.

Every scheduler module imports from here, never from another scheduler: ``core.pbspro`` and
``core.sge`` need no SLURM, and a change to SLURM's parsing cannot break them. Only what
more than one scheduler uses belongs here; a helper one batch system needs stays in its
module.
"""

from __future__ import annotations

import logging
import math
import re
from typing import ClassVar

from veglia.plugin_api import (
    JobFailure,
    JobInfo,
    JobResources,
    JobState,
    SchedulerError,
    SchedulerSubmitError,
)

__all__ = [
    "BatchSubmitError",
    "array_summaries",
    "check_directive_value",
    "check_job_id",
    "classify_by_messages",
    "cores_per_machine",
    "format_hms",
    "kill_accepted",
    "memory_mb",
    "no_qos_error",
    "no_whole_node_memory_error",
    "parse_duration",
    "positive_int",
    "safe_job_name",
]


# -- values in directive lines ---------------------------------------------------------------
def positive_int(name: str, value: object) -> int:
    """``value`` as a whole number >= 1, or a SchedulerError naming the template field."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SchedulerError(f"{name} must be a whole number >= 1, not {value!r}.")
    return value


def check_directive_value(what: str, value: str) -> str:
    """``value`` if it fits in a ``#SBATCH``/``#PBS``/``#$``/``#BSUB`` line as one word, else
    an error: a space or quote there would silently split or break the directive."""
    if not value or re.search(r"[\s'\"\\]", value):
        raise SchedulerError(
            f"{what} {value!r} must be one word without spaces or quotes: batch systems read "
            "it from a directive line. Rename it."
        )
    return value


def safe_job_name(name: str, max_length: int = 128, letter_first: bool = False) -> str:
    """``name`` with everything but letters, digits, ``_.-`` replaced by ``_``: batch systems
    reject or mangle spaces, ``:``, ``/``, ``@`` and friends in job names."""
    cleaned = re.sub(r"[^A-Za-z0-9_.-]", "_", name.strip()) or "veglia"
    if letter_first and not cleaned[0].isalpha():
        cleaned = "j" + cleaned
    return cleaned[:max_length]


def check_job_id(job_id: str, pattern: re.Pattern[str], what: str) -> str:
    """``job_id`` when it is the whole of ``pattern``, else an error saying it is not
    ``what`` (``"a PBS job id (like 1234 or 1234.server)"``): ids go into command lines."""
    if not isinstance(job_id, str) or not pattern.fullmatch(job_id):
        raise SchedulerError(f"{job_id!r} is not {what}.")
    return job_id


# -- times ----------------------------------------------------------------------------------
def format_hms(seconds: int) -> str:
    """``HH:MM:SS`` with as many hours as needed (``90000`` -> ``25:00:00``)."""
    hours, rest = divmod(seconds, 3600)
    return f"{hours:02d}:{rest // 60:02d}:{rest % 60:02d}"


def parse_duration(text: str) -> int | None:
    """Seconds in a time as batch systems *print* it (``squeue``, ``scontrol``, ``sinfo``,
    ``qstat``, ``bjobs -hms``): ``[D-]HH:MM:SS``, ``MM:SS`` or a bare number of seconds;
    None if not one.

    Not for times a person writes for SLURM: there ``--time=30`` means 30 *minutes*
    (``veglia.plugins.schedulers.slurm_records.parse_slurm_time_input``)."""
    match = re.fullmatch(r"\s*(?:(\d+)-)?(\d+(?::\d+){0,2})\s*", text or "")
    if not match:
        return None
    seconds = 0
    for part in match.group(2).split(":"):
        seconds = seconds * 60 + int(part)
    return seconds + int(match.group(1) or 0) * 86400


# -- resources ------------------------------------------------------------------------------
def memory_mb(kb: int, per: int = 1) -> int:
    """Kilobytes as whole megabytes (shared by ``per`` slots), rounded up: asking for less
    than requested fails jobs."""
    return max(1, math.ceil(kb / 1024 / per))


def cores_per_machine(resources: JobResources) -> int:
    """Cores a job asks for on each machine: its processes there times their cores."""
    return resources.num_mpiprocs_per_machine * resources.num_cores_per_mpiproc


def no_qos_error(
    system: str, instead: str = "queue_name or custom_scheduler_commands"
) -> SchedulerError:
    """The error for a QOS asked of a batch system that has none."""
    return SchedulerError(f"{system} has no QOS; remove qos, or use {instead} for what it meant.")


def no_whole_node_memory_error(system: str) -> SchedulerError:
    """The error for ``max_memory_kb = 0`` (all of a node's memory, as SLURM's ``--mem=0``)
    asked of a batch system that has no such request."""
    return SchedulerError(
        f"max_memory_kb = 0 asks for all of a node's memory, which {system} has no request "
        "for: leave it unset, or give the memory in kB."
    )


# -- listings -------------------------------------------------------------------------------
_SUMMARY_ORDER = [JobState.RUNNING, JobState.SUSPENDED, JobState.QUEUED, JobState.QUEUED_HELD]
_SUMMARY_ORDER += [JobState.UNDETERMINED, JobState.DONE]


def array_summaries(infos: list[JobInfo]) -> list[JobInfo]:
    """One JobInfo per job array, under the id the submit command printed, which is the id
    the engine tracks; tasks name their array in ``details["ArrayJobId"]``.

    The array is as active as its most active task; once every task is done it is DONE
    with the first task failure and the first nonzero exit code.
    """
    known = {info.job_id for info in infos}
    tasks: dict[str, list[JobInfo]] = {}
    for info in infos:
        master = info.details.get("ArrayJobId", "")
        if master and info.job_id != master and master not in known:
            tasks.setdefault(master, []).append(info)
    summaries = []
    for master, members in tasks.items():
        state = min((t.state for t in members), key=_SUMMARY_ORDER.index)
        summary = JobInfo(
            job_id=master,
            state=state,
            raw_state="ARRAY",
            queue=members[0].queue,
            title=members[0].title,
            details={"ArrayTasks": [t.job_id for t in members]},
        )
        if state is JobState.DONE:
            summary.failure = next((t.failure for t in members if t.failure), None)
            codes = [t.exit_code for t in members if t.exit_code is not None]
            summary.exit_code = next((c for c in codes if c), codes[0] if codes else None)
        summaries.append(summary)
    return summaries


# -- kill and failures ----------------------------------------------------------------------
def kill_accepted(
    command: str,
    retval: int,
    stdout: str,
    stderr: str,
    *,
    gone: re.Pattern[str],
    logger: logging.Logger,
) -> bool:
    """True when the cancel command succeeded or said the job is already gone (``gone``
    matches its output): either way it will not run on. False otherwise (permission denied,
    the server unreachable), with the command's message logged as a warning."""
    text = (stderr + stdout).strip()
    if retval == 0 or gone.search(text):
        return True
    logger.warning("%s failed (exit %s): %s", command, retval, text)
    return False


def classify_by_messages(
    info: JobInfo | None,
    scheduler_stderr: str,
    *,
    out_of_memory: re.Pattern[str],
    out_of_walltime: re.Pattern[str] | None = None,
) -> JobFailure | None:
    """Why a finished job ended: the batch system's own kill message in the job's output
    files wins (it is there even after the batch system forgot the job), memory first;
    else what the last listing said."""
    if out_of_memory.search(scheduler_stderr or ""):
        return JobFailure.OUT_OF_MEMORY
    if out_of_walltime is not None and out_of_walltime.search(scheduler_stderr or ""):
        return JobFailure.OUT_OF_WALLTIME
    return info.failure if info is not None else None


# -- submission -----------------------------------------------------------------------------
class BatchSubmitError(SchedulerSubmitError):
    """A batch system's submit command refused the job.

    ``permanent`` is True when submitting the same script again cannot work and False when
    it may work later; ``output`` is what the command printed, ``retval`` its exit code.
    Subclasses name the command and the messages that tell its refusals apart, and
    :meth:`from_output` classifies one: a transient message wins, an unknown one counts as
    not permanent, since retrying is harmless and giving up on a transient error is not.
    """

    #: The submit command, as messages name it (``sbatch``).
    command: ClassVar[str] = "the submit command"
    #: Refusals of the job itself: resubmitting it unchanged fails again.
    permanent_messages: ClassVar[re.Pattern[str] | None] = None
    #: A busy or unreachable server (checked first: these win).
    transient_messages: ClassVar[re.Pattern[str] | None] = None
    #: Of the permanent refusals, those about what the job asks for: another queue or a
    #: smaller request may be accepted.
    resource_messages: ClassVar[re.Pattern[str] | None] = None
    #: What to do about a permanent refusal, and about one that may pass.
    fix_advice: ClassVar[str] = "Submitting it again will fail the same way: fix the job."
    retry_advice: ClassVar[str] = "This may be temporary; try again later."

    def __init__(
        self,
        message: str,
        *,
        permanent: bool,
        output: str,
        retval: int,
        resource_request: bool = False,
    ) -> None:
        super().__init__(message, permanent=permanent, resource_request=resource_request)
        self.output = output
        self.retval = retval

    @classmethod
    def from_output(cls, retval: int, output: str) -> BatchSubmitError:
        """The error for a refusal that printed ``output`` and exited ``retval``."""

        def found(pattern: re.Pattern[str] | None) -> bool:
            return bool(pattern is not None and pattern.search(output))

        permanent = not found(cls.transient_messages) and found(cls.permanent_messages)
        advice = cls.fix_advice if permanent else cls.retry_advice
        return cls(
            f"{cls.command} refused the job (exit {retval}): {output}\n{advice}",
            permanent=permanent,
            resource_request=permanent and found(cls.resource_messages),
            output=output,
            retval=retval,
        )
