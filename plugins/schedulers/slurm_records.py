"""SLURM's words for a job, read: its states as ``squeue`` and ``scontrol`` print them, a
``scontrol show job`` record, an exit code, a time written for SLURM, and the
:class:`~veglia.schedulers.JobInfo` they make. Used by :mod:`.slurm` and, for the states and
exit codes, by :mod:`.slurm_accounting`.
"""

from __future__ import annotations

import re

from veglia.plugin_api import JobFailure, JobInfo, JobState
from veglia.plugins.schedulers.directives import parse_duration

__all__ = [
    "ACTIVE_STATES",
    "FINISHED_STATES",
    "job_info",
    "parse_exit_code",
    "parse_scontrol_record",
    "parse_slurm_time_input",
]

ACTIVE_STATES = {
    # CONFIGURING: nodes allocated (booting, perhaps) but the script has not started.
    **dict.fromkeys(["PENDING", "REQUEUED", "REQUEUE_FED", "CONFIGURING"], JobState.QUEUED),
    **dict.fromkeys(["REQUEUE_HOLD", "RESV_DEL_HOLD"], JobState.QUEUED_HELD),
    **dict.fromkeys(["SUSPENDED", "STOPPED"], JobState.SUSPENDED),
    **dict.fromkeys(
        ["RUNNING", "COMPLETING", "RESIZING", "SIGNALING", "STAGE_OUT"],
        JobState.RUNNING,
    ),
}
# Terminal states and why the job ended (None: it ended on its own, successfully).
# DEADLINE: past its --deadline, where more wall time would not help; PREEMPTED: not the
# job's fault, so resubmitting it as is helps, as after a node failure.
FINISHED_STATES: dict[str, JobFailure | None] = {
    "COMPLETED": None,
    **dict.fromkeys(["FAILED", "SPECIAL_EXIT"], JobFailure.FAILED),
    **dict.fromkeys(["CANCELLED", "DEADLINE", "REVOKED"], JobFailure.CANCELLED),
    "TIMEOUT": JobFailure.OUT_OF_WALLTIME,
    "OUT_OF_MEMORY": JobFailure.OUT_OF_MEMORY,
    **dict.fromkeys(["NODE_FAIL", "BOOT_FAIL", "PREEMPTED"], JobFailure.NODE_FAILURE),
}
_HELD_REASONS = {"JobHeldUser", "JobHeldAdmin"}


def parse_slurm_time_input(text: str) -> int | None:
    """Seconds in a time written for SLURM (``--time``, a partition's ``MaxTime``), by the
    sbatch manual's rules: ``M``, ``M:S``, ``H:M:S``, ``D-H``, ``D-H:M``, ``D-H:M:S``;
    None if not one."""
    match = re.fullmatch(r"\s*(?:(\d+)-)?(\d+(?::\d+){0,2})\s*", text or "")
    if not match:
        return None
    days, clock = match.group(1), [int(part) for part in match.group(2).split(":")]
    if days is not None:  # D-H, D-H:M, D-H:M:S
        hours, minutes, seconds = [*clock, 0, 0][:3]
        return int(days) * 86400 + hours * 3600 + minutes * 60 + seconds
    if len(clock) == 3:
        return clock[0] * 3600 + clock[1] * 60 + clock[2]
    if len(clock) == 2:
        return clock[0] * 60 + clock[1]
    return clock[0] * 60


_KEY = re.compile(r"(?:^|\s)([A-Za-z_][A-Za-z0-9_/:.]*)=")


def parse_scontrol_record(text: str) -> dict[str, str]:
    """The ``Key=Value`` pairs of one ``scontrol show job`` record (one- or multi-line form).

    Values may contain spaces (``JobName=fail three``) and ``=`` (``TRES=cpu=1,mem=2G``): a
    value runs up to the next whitespace-led ``Key=``. ``JobName`` is cut at `` UserId=``,
    which always follows it, so a name with ``a=b`` in it does not break the record. With
    ``-d`` the per-node fields (``Nodes=``, ``CPU_IDs=``, ``Mem=``) repeat once per node;
    the first node's are kept.
    """
    text = " ".join(text.split("\n"))
    fields: dict[str, str] = {}
    name = re.search(r"(?:^|\s)JobName=(.*?) UserId=", text)
    if name:
        fields["JobName"] = name.group(1).strip()
        text = text[: name.start()] + text[name.end() - len(" UserId=") :]
    matches = list(_KEY.finditer(text))
    for match, following in zip(matches, [*matches[1:], None], strict=True):
        end = following.start() if following else len(text)
        fields.setdefault(match.group(1), text[match.end() : end].strip())
    return fields


def parse_exit_code(text: str) -> int | None:
    """``ExitCode=N:S``: N, or 128+S when a signal killed the job (as a shell reports it)."""
    match = re.fullmatch(r"(\d+):(\d+)", text or "")
    if not match:
        return None
    code, signal = int(match.group(1)), int(match.group(2))
    return 128 + signal if signal else code


def job_info(fields: dict[str, str]) -> JobInfo:
    """A JobInfo from scontrol's (or squeue's, under scontrol's names) fields."""
    raw_state = fields.get("JobState", "").split(" ")[0].rstrip("+")
    reason = fields.get("Reason", "")
    reason = "" if reason in ("None", "(null)") else reason
    job_id = fields["JobId"]
    task = fields.get("ArrayTaskId", "N/A")
    if task not in ("", "N/A") and fields.get("ArrayJobId"):  # JobId=17 ArrayJobId=14 ...
        job_id = f"{fields['ArrayJobId']}_{task if task.isdigit() else f'[{task}]'}"
    info = JobInfo(
        job_id=job_id,
        state=ACTIVE_STATES.get(raw_state, JobState.UNDETERMINED),
        raw_state=raw_state,
        reason=reason,
        queue=fields.get("Partition") or None,
        title=fields.get("JobName", ""),
        wallclock_seconds=parse_duration(fields.get("RunTime", "")),
        details=fields,
    )
    if raw_state == "PENDING" and reason in _HELD_REASONS:
        info.state = JobState.QUEUED_HELD
    elif raw_state in FINISHED_STATES:
        info.state = JobState.DONE
        info.failure = FINISHED_STATES[raw_state]
        info.exit_code = parse_exit_code(fields.get("ExitCode", ""))
    return info
