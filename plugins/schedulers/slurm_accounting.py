"""SLURM's accounting: the ``sacct`` command that asks slurmdbd about finished jobs, and its
answer read as :class:`~veglia.schedulers.JobInfo` with what each job used (peak memory,
elapsed and CPU time). :class:`~veglia.plugins.schedulers.slurm.SlurmScheduler` runs it for
the jobs the controller reports finished or no longer knows, and merges its records with
the controller's (:func:`with_accounting`).
"""

from __future__ import annotations

import logging
import re
from typing import Any

from veglia.plugin_api import JobFailure, JobInfo, JobState, SchedulerError
from veglia.plugins.schedulers.slurm_records import (
    ACTIVE_STATES,
    FINISHED_STATES,
    parse_exit_code,
)

__all__ = [
    "SACCT_COMMAND",
    "parse_sacct",
    "parse_sacct_memory_kb",
    "parse_sacct_seconds",
    "with_accounting",
]

LOGGER = logging.getLogger(__name__)

# sacct: the job's allocation line and one line per step (``12.batch``, ``12.extern``,
# ``12.0``); memory (MaxRSS) is measured on steps only. The name comes last, as in squeue.
_SACCT_FIELDS = ["JobID", "State", "ExitCode", "ElapsedRaw", "TotalCPU", "MaxRSS"]
_SACCT_FIELDS += ["Partition", "JobName"]
SACCT_COMMAND = f"timeout 30 sacct --noheader --parsable2 --format={','.join(_SACCT_FIELDS)}"
# JobID as sacct prints it: 12, 14_2 (an array task), 14_[3-5] (tasks that never ran), each
# with an optional .step.
_SACCT_JOB_ID = re.compile(r"(\d+)(?:_(\d+|\[[^\]]*\]))?(?:\.(\S+))?")
# What sacct says when the cluster keeps no accounting: then it is as if there were no sacct.
_NO_ACCOUNTING = "accounting storage is disabled"

_UNITS = {"": 1, "K": 1, "M": 1024, "G": 1024**2, "T": 1024**3, "P": 1024**4}


def parse_sacct_memory_kb(text: str) -> int | None:
    """kB in a memory figure as sacct prints it (``MaxRSS``): ``72488K`` by default, or
    ``70.79M``, ``1.01G`` with ``--units``; a bare number is kB, sacct's own unit. None
    when empty (the step was never sampled) or not a figure."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)([KMGTP]?)\s*", text or "")
    if not match:
        return None
    return round(float(match.group(1)) * _UNITS[match.group(2)])


def parse_sacct_seconds(text: str) -> float | None:
    """Seconds in a time as sacct prints it: ``[D-][HH:]MM:SS[.mmm]`` (``TotalCPU`` has
    milliseconds: ``00:01.234``); None if not one."""
    match = re.fullmatch(r"\s*(?:(\d+)-)?((?:\d+:){0,2}\d+(?:\.\d+)?)\s*", text or "")
    if not match:
        return None
    seconds = 0.0
    for part in match.group(2).split(":"):
        seconds = seconds * 60 + float(part)
    return seconds + int(match.group(1) or 0) * 86400


def _sacct_usage(fields: dict[str, str], steps: list[dict[str, str]]) -> dict[str, Any] | None:
    """What a finished job used, as SLURM's accounting measured it: the largest MaxRSS of
    its steps (the batch script, srun steps), its elapsed time, and its CPU time as a
    percentage of one core over that time (as ``/usr/bin/time``'s ``%P``). None when no
    step has a MaxRSS: a job too short to be sampled (``JobAcctGatherFrequency``), or whose
    step records have not reached the database yet."""
    peaks = [parse_sacct_memory_kb(step["MaxRSS"]) for step in steps]
    known = [peak for peak in peaks if peak is not None]
    if not known:
        return None
    elapsed = int(fields["ElapsedRaw"]) if fields["ElapsedRaw"].isdigit() else None
    usage: dict[str, Any] = {
        "peak_memory_kb": max(known),
        "runtime_seconds": elapsed,
        "source": "sacct",
    }
    cpu = parse_sacct_seconds(fields["TotalCPU"])
    if cpu is not None and elapsed:
        usage["cpu_percent"] = round(100 * cpu / elapsed, 1)
    return usage


def _sacct_job_info(fields: dict[str, str], steps: list[dict[str, str]]) -> JobInfo:
    """A JobInfo from sacct's line of a job (and its steps' lines), named as scontrol's."""
    match = _SACCT_JOB_ID.fullmatch(fields["JobID"])
    assert match is not None  # checked by the caller
    raw_state = fields["State"].split(" ")[0].rstrip("+")  # "CANCELLED by 1001"
    info = JobInfo(
        job_id=fields["JobID"],
        state=JobState.DONE
        if raw_state in FINISHED_STATES
        else ACTIVE_STATES.get(raw_state, JobState.UNDETERMINED),
        raw_state=raw_state,
        queue=fields["Partition"] or None,
        title=fields["JobName"],
        wallclock_seconds=int(fields["ElapsedRaw"]) if fields["ElapsedRaw"].isdigit() else None,
        details={**fields, "source": "sacct"},
    )
    if match.group(2) is not None:  # an array task: as scontrol's, it names its array
        info.details["ArrayJobId"] = match.group(1)
    if info.state is JobState.DONE:
        info.failure = FINISHED_STATES[raw_state]
        # A job whose srun step the kernel killed for memory (cgroups) often ends FAILED, as
        # its script goes on and exits nonzero; the step says why.
        if any(step["State"].split(" ")[0] == "OUT_OF_MEMORY" for step in steps):
            info.failure = JobFailure.OUT_OF_MEMORY
        # scontrol's ExitCode is the batch script's; sacct's job line says 0:0 for a job
        # killed at its time limit or cancelled, whose batch step says 0:15.
        batch = next((step for step in steps if step["JobID"].endswith(".batch")), fields)
        info.exit_code = parse_exit_code(batch["ExitCode"])
        usage = _sacct_usage(fields, steps)
        if usage is not None:
            info.details["usage"] = usage
    return info


def with_accounting(infos: list[JobInfo], accounted: list[JobInfo]) -> list[JobInfo]:
    """squeue's and scontrol's jobs, with sacct's usage on those that finished, and the
    finished jobs that only sacct still knows.

    The controller's word wins where it has one: it is current, while the database hears of
    a job's end a moment later. A job the controller no longer knows cannot be queued or
    running, whatever the database says (a record left open when slurmctld lost its state):
    only sacct's finished jobs are added."""
    known = {info.job_id: info for info in infos}
    for record in accounted:
        info = known.get(record.job_id)
        if info is None:
            if record.state is JobState.DONE:
                infos.append(record)
        elif info.state is JobState.DONE and "usage" in record.details:
            info.details["usage"] = record.details["usage"]
    return infos


def parse_sacct(code: int, lines: list[str]) -> list[JobInfo] | None:
    """The finished jobs sacct reports, or None when it cannot say (no accounting)."""
    text = "\n".join(lines).strip()
    if code != 0 or _NO_ACCOUNTING in text:
        # No accounting here, or its daemon is down: as before sacct, a job that
        # scontrol forgot counts as finished, with no state of its own; not an error.
        if code in (126, 127) or _NO_ACCOUNTING in text:
            LOGGER.debug("no SLURM accounting (sacct exit %s): %s", code, text[:500])
        else:
            LOGGER.warning(
                "sacct failed (exit %s): %s. Jobs SLURM forgot count as finished without "
                "their state, and no usage is recorded from SLURM's accounting.",
                code,
                text[:500],
            )
        return None
    jobs: dict[str, dict[str, str]] = {}
    steps: dict[str, list[dict[str, str]]] = {}
    for line in lines:
        if line.startswith("sacct: "):  # a warning on stderr, beside the records
            LOGGER.warning("%s", line)
            continue
        values = line.split("|", len(_SACCT_FIELDS) - 1)
        match = _SACCT_JOB_ID.fullmatch(values[0]) if values[0] else None
        if len(values) != len(_SACCT_FIELDS) or not match:
            if not line.strip():
                continue
            # Not skipped: a job missing from the list counts as finished.
            raise SchedulerError(f"sacct printed a line veglia does not understand: {line[:200]!r}")
        fields = dict(zip(_SACCT_FIELDS, values, strict=True))
        job_id = values[0].split(".", 1)[0]
        if match.group(3) is None:
            jobs[job_id] = fields
        else:
            steps.setdefault(job_id, []).append(fields)
    return [_sacct_job_info(fields, steps.get(job_id, [])) for job_id, fields in jobs.items()]
