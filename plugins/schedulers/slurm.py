"""``core.slurm``: submit with ``sbatch``, list with ``squeue``, ``scontrol`` and ``sacct``,
kill with ``scancel``.

SLURM forgets a finished job ``MinJobAge`` seconds (default 300) after it ends; until then
``scontrol show job`` still reports its state and exit code, which is how this scheduler
learns that a job ran out of memory or wall time. Where the cluster keeps accounting
(slurmdbd), ``sacct`` still knows the job after that, so a job that ended while nobody
polled keeps its state and exit code; ``sacct`` also gives what every finished job used
(peak memory, elapsed and CPU time), recorded as its measured usage. Without accounting
(``sacct`` missing or failing), a forgotten job is simply gone, as without this. What the
batch schedulers share (times, memory, job names, array summaries) is in
:mod:`veglia.plugins.schedulers.directives`.
"""

from __future__ import annotations

import logging
import re
import shlex
from typing import Any

from veglia.plugins.schedulers.directives import (
    BatchSubmitError,
    array_summaries,
    check_directive_value,
    check_job_id,
    classify_by_messages,
    format_hms,
    kill_accepted,
    memory_mb,
    parse_duration,
    positive_int,
    safe_job_name,
)
from veglia.schedulers import (
    JobFailure,
    JobInfo,
    JobState,
    JobTemplate,
    QueueInfo,
    Scheduler,
    SchedulerError,
)

__all__ = ["SlurmScheduler", "SlurmSubmitError", "parse_sacct_memory_kb", "parse_sacct_seconds"]
__all__ += ["parse_scontrol_record", "parse_slurm_time_input"]

LOGGER = logging.getLogger(__name__)


# -- SLURM specifics ------------------------------------------------------------------------
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


_JOB_ID = re.compile(r"\d+(_\d+)?")
_SUBMITTED = re.compile(r"(\d+)(;\S+)?")
# Fields squeue prints, named as scontrol names them so `details` has the same keys. The
# name comes last: it is the only field that may contain the separator.
# squeue's %i is the id as users write it (14_2 for a task, whose own JobId %A is 17).
_SQUEUE_FIELDS = {"Id": "%i", "ArrayJobId": "%F", "JobId": "%A", "ArrayTaskId": "%K"}
_SQUEUE_FIELDS |= {"JobState": "%T", "Reason": "%r", "Partition": "%P", "RunTime": "%M"}
_SQUEUE_FIELDS |= {"TimeLimit": "%l", "NumNodes": "%D", "JobName": "%j"}
_SQUEUE_FORMAT = "|".join(_SQUEUE_FIELDS.values())
_MARKER = "#veglia "
_INVALID_ID = "Invalid job id specified"
# sacct: the job's allocation line and one line per step (``12.batch``, ``12.extern``,
# ``12.0``); memory (MaxRSS) is measured on steps only. The name comes last, as in squeue.
_SACCT_FIELDS = ["JobID", "State", "ExitCode", "ElapsedRaw", "TotalCPU", "MaxRSS"]
_SACCT_FIELDS += ["Partition", "JobName"]
_SACCT_COMMAND = f"timeout 30 sacct --noheader --parsable2 --format={','.join(_SACCT_FIELDS)}"
# JobID as sacct prints it: 12, 14_2 (an array task), 14_[3-5] (tasks that never ran), each
# with an optional .step.
_SACCT_JOB_ID = re.compile(r"(\d+)(?:_(\d+|\[[^\]]*\]))?(?:\.(\S+))?")
# What sacct says when the cluster keeps no accounting: then it is as if there were no sacct.
_NO_ACCOUNTING = "accounting storage is disabled"
_KEY = re.compile(r"(?:^|\s)([A-Za-z_][A-Za-z0-9_/:.]*)=")

_ACTIVE = {
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
_FINISHED: dict[str, JobFailure | None] = {
    "COMPLETED": None,
    **dict.fromkeys(["FAILED", "SPECIAL_EXIT"], JobFailure.FAILED),
    **dict.fromkeys(["CANCELLED", "DEADLINE", "REVOKED"], JobFailure.CANCELLED),
    "TIMEOUT": JobFailure.OUT_OF_WALLTIME,
    "OUT_OF_MEMORY": JobFailure.OUT_OF_MEMORY,
    **dict.fromkeys(["NODE_FAIL", "BOOT_FAIL", "PREEMPTED"], JobFailure.NODE_FAILURE),
}
_HELD_REASONS = {"JobHeldUser", "JobHeldAdmin"}
# What sbatch says when the job itself is wrong (resubmitting it unchanged fails again)...
_PERMANENT = re.compile(
    "invalid (account|partition|qos|generic resource|feature|option)|requested time limit is "
    "invalid|memory specification can not be satisfied|requested node configuration is not "
    "available|node count specification invalid|more processors requested than permitted|"
    "unrecognized option|dos line breaks|unable to open file|does not look like a batch "
    "script|command not found",
    re.IGNORECASE,
)
# ... and when the controller is busy or unreachable (checked first: these win). An
# accounting/QOS policy refusal is usually a submit limit, which waiting lifts.
_TRANSIENT = re.compile(
    "socket timed out|unable to contact slurm controller|temporarily unable|resource "
    "temporarily unavailable|connection refused|zero bytes were transmitted|not responding|"
    "job violates accounting/qos policy",
    re.IGNORECASE,
)
# Of the permanent refusals, those about what the job asks for: another partition or a
# smaller request may be accepted.
_RESOURCE_REQUEST = re.compile(
    "requested time limit is invalid|memory specification can not be satisfied|requested "
    "node configuration is not available|node count specification invalid|more processors "
    "requested than permitted",
    re.IGNORECASE,
)
# Pending reasons that mean the job cannot start in its partition as it is.
_UNSATISFIABLE = {
    "PartitionTimeLimit", "PartitionNodeLimit", "PartitionDown", "PartitionInactive",
    "PartitionConfig", "BadConstraints", "ReqNodeNotAvail", "DependencyNeverSatisfied",
}  # fmt: skip
_OOM_MESSAGES = re.compile(
    r"exceeded (job |step )?memory limit|oom[-_ ]kill|out_of_memory", re.IGNORECASE
)
_TIMEOUT_MESSAGE = re.compile(r"DUE TO TIME LIMIT")
# What scancel says of a job that will not run on anyway.
_GONE = re.compile(f"{re.escape(_INVALID_ID)}|already completing or completed")


class SlurmSubmitError(BatchSubmitError):
    """sbatch refused the job.

    ``permanent`` is True when submitting the same script again cannot work (unknown
    partition or account, a time or memory request the partition does not allow) and False
    when it may work later (the controller did not answer); unknown messages count as not
    permanent, since retrying is harmless and giving up on a transient error is not.
    ``sbatch_message`` (``output``) is what sbatch printed, ``retval`` its exit code.
    """

    command = "sbatch"
    permanent_messages = _PERMANENT
    transient_messages = _TRANSIENT
    resource_messages = _RESOURCE_REQUEST
    fix_advice = (
        "Submitting it again will fail the same way: fix the job's queue, account, "
        "resources, wall time or memory."
    )
    retry_advice = "This may be temporary (the SLURM controller may be busy); try again later."

    @property
    def sbatch_message(self) -> str:
        return self.output


def _check_job_id(job_id: str) -> str:
    return check_job_id(job_id, _JOB_ID, "a SLURM job id (digits, optionally _N for an array task)")


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


def _exit_code(text: str) -> int | None:
    """``ExitCode=N:S``: N, or 128+S when a signal killed the job (as a shell reports it)."""
    match = re.fullmatch(r"(\d+):(\d+)", text or "")
    if not match:
        return None
    code, signal = int(match.group(1)), int(match.group(2))
    return 128 + signal if signal else code


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


def _job_info(fields: dict[str, str]) -> JobInfo:
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
        state=_ACTIVE.get(raw_state, JobState.UNDETERMINED),
        raw_state=raw_state,
        reason=reason,
        queue=fields.get("Partition") or None,
        title=fields.get("JobName", ""),
        wallclock_seconds=parse_duration(fields.get("RunTime", "")),
        details=fields,
    )
    if raw_state == "PENDING" and reason in _HELD_REASONS:
        info.state = JobState.QUEUED_HELD
    elif raw_state in _FINISHED:
        info.state = JobState.DONE
        info.failure = _FINISHED[raw_state]
        info.exit_code = _exit_code(fields.get("ExitCode", ""))
    return info


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
        if raw_state in _FINISHED
        else _ACTIVE.get(raw_state, JobState.UNDETERMINED),
        raw_state=raw_state,
        queue=fields["Partition"] or None,
        title=fields["JobName"],
        wallclock_seconds=int(fields["ElapsedRaw"]) if fields["ElapsedRaw"].isdigit() else None,
        details={**fields, "source": "sacct"},
    )
    if match.group(2) is not None:  # an array task: as scontrol's, it names its array
        info.details["ArrayJobId"] = match.group(1)
    if info.state is JobState.DONE:
        info.failure = _FINISHED[raw_state]
        # A job whose srun step the kernel killed for memory (cgroups) often ends FAILED, as
        # its script goes on and exits nonzero; the step says why.
        if any(step["State"].split(" ")[0] == "OUT_OF_MEMORY" for step in steps):
            info.failure = JobFailure.OUT_OF_MEMORY
        # scontrol's ExitCode is the batch script's; sacct's job line says 0:0 for a job
        # killed at its time limit or cancelled, whose batch step says 0:15.
        batch = next((step for step in steps if step["JobID"].endswith(".batch")), fields)
        info.exit_code = _exit_code(batch["ExitCode"])
        usage = _sacct_usage(fields, steps)
        if usage is not None:
            info.details["usage"] = usage
    return info


def _with_accounting(infos: list[JobInfo], accounted: list[JobInfo]) -> list[JobInfo]:
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


class SlurmScheduler(Scheduler):
    """SLURM through ``sbatch``, ``squeue``, ``scontrol``, ``sacct`` and ``scancel``.

    Resource mapping: ``--nodes`` = num_machines, ``--ntasks-per-node`` =
    num_mpiprocs_per_machine, ``--cpus-per-task`` = num_cores_per_mpiproc, ``--mem`` (per
    node, MB rounded up) = max_memory_kb, ``--time`` = max_wallclock_seconds. Jobs are
    submitted with ``--no-requeue``: a requeued job would rerun in the same work dir behind
    the engine's back, which then sees it finish twice.
    """

    reports_finished_jobs = True
    example_empty_listing = (
        0,
        f"{_MARKER}squeue rc=1\nslurm_load_jobs error: {_INVALID_ID}\n"
        f"{_MARKER}scontrol 999 rc=1\nslurm_load_jobs error: {_INVALID_ID}\n"
        f"{_MARKER}sacct rc=0\n\n",  # with accounting; sacct knows no such job either
        "",
    )

    def script_header(self, template: JobTemplate) -> list[str]:
        resources = template.resources
        lines = [
            f"#SBATCH --job-name={safe_job_name(template.job_name)}",
            f"#SBATCH --output={check_directive_value('stdout_name', template.stdout_name)}",
            f"#SBATCH --error={check_directive_value('stderr_name', template.stderr_name)}",
            "#SBATCH --no-requeue",
            f"#SBATCH --nodes={resources.num_machines}",
            f"#SBATCH --ntasks-per-node={resources.num_mpiprocs_per_machine}",
            f"#SBATCH --cpus-per-task={resources.num_cores_per_mpiproc}",
        ]
        if template.max_wallclock_seconds is not None:
            seconds = positive_int("max_wallclock_seconds", template.max_wallclock_seconds)
            days, rest = divmod(seconds, 86400)
            # SLURM counts in minutes and rounds seconds up; D-HH:MM:SS passes them exactly.
            lines.append(f"#SBATCH --time={f'{days}-' if days else ''}{format_hms(rest)}")
        if template.max_memory_kb == 0:  # the sbatch manual: all the memory of each node
            lines.append("#SBATCH --mem=0")
        elif template.max_memory_kb is not None:
            kb = positive_int("max_memory_kb", template.max_memory_kb)
            lines.append(f"#SBATCH --mem={memory_mb(kb)}")
        for option, what, value in (
            ("partition", "queue_name", template.queue_name),
            ("account", "account", template.account),
            ("qos", "qos", template.qos),
        ):
            if value:
                lines.append(f"#SBATCH --{option}={check_directive_value(what, value)}")
        return lines

    # -- submit -------------------------------------------------------------------------
    def submit_command(self, script_name: str) -> str:
        return f"sbatch --parsable {shlex.quote(script_name)}"

    def parse_submit_output(self, retval: int, stdout: str, stderr: str) -> str:
        lines = stdout.strip().splitlines()
        match = _SUBMITTED.fullmatch(lines[-1].strip()) if lines else None
        if retval == 0 and match:
            return match.group(1)
        message = stderr.strip() or stdout.strip() or "(no output)"
        if retval == 0:
            raise SchedulerError(
                f"sbatch exited 0 but printed no job id: {message}. The job may have been "
                "submitted: check `squeue --me` before submitting it again."
            )
        raise SlurmSubmitError.from_output(retval, message)

    # -- list -----------------------------------------------------------------------------
    def joblist_command(self, job_ids: list[str] | None = None, user: str | None = None) -> str:
        """One bash line: ``squeue`` for every id at once, then ``scontrol show job`` for
        each id squeue did not list (finished jobs, which squeue leaves out), then one
        ``sacct`` for the ids scontrol reported finished or no longer knew (their usage, and
        the state of jobs SLURM forgot), each section led by a ``#veglia`` marker line for
        the parser. scontrol and sacct are skipped when squeue itself failed: with the
        controller down, more timeouts would help nobody. While every job is queued or
        running, nothing runs but squeue.
        """
        squeue = f"squeue --noheader --array --format={shlex.quote(_SQUEUE_FORMAT)}"
        if not job_ids:
            who = shlex.quote(user) if user else '"$(whoami)"'
            return (
                f'q=$({squeue} --user={who} 2>&1); echo "{_MARKER}squeue rc=$?"; '
                'printf "%s\\n" "$q"'
            )
        ids = [_check_job_id(job_id) for job_id in job_ids]
        finished = "|".join(sorted(_FINISHED))
        return (
            f"q=$({squeue} --jobs={','.join(ids)} 2>&1); rc=$?; "
            f'echo "{_MARKER}squeue rc=$rc"; printf "%s\\n" "$q"; '
            f'if [ $rc -eq 0 ] || [[ $q == *"{_INVALID_ID}"* ]]; then a=; '
            f"f='JobState=({finished})( |$)'; "
            f"for id in {' '.join(ids)}; do "
            f'printf "%s\\n" "$q" | grep -qE "^([^|]*[|])?$id[|]" || {{ '
            f's=$(scontrol --oneliner --details show job "$id" 2>&1); c=$?; '
            f'echo "{_MARKER}scontrol $id rc=$c"; printf "%s\\n" "$s"; '
            f'if [[ $s =~ $f || ( $c -ne 0 && $s == *"{_INVALID_ID}"* ) ]]; then a=$a,$id; fi; }}; '
            "done; "
            f'if [ -n "$a" ]; then t=$({_SACCT_COMMAND} --jobs=${{a#,}} 2>&1); '
            f'echo "{_MARKER}sacct rc=$?"; printf "%s\\n" "$t"; fi; fi'
        )

    def parse_joblist_output(self, retval: int, stdout: str, stderr: str) -> list[JobInfo]:
        sections: list[tuple[str, int, list[str]]] = []
        for line in stdout.splitlines():
            marker = re.fullmatch(rf"{_MARKER}(squeue|sacct|scontrol \S+) rc=(\d+)", line.strip())
            if marker:
                sections.append((marker.group(1), int(marker.group(2)), []))
            elif sections:
                sections[-1][2].append(line)
        if not sections:
            raise SchedulerError(
                f"Listing SLURM jobs failed (exit {retval}): "
                f"{(stderr.strip() or stdout.strip() or '(no output)')[:2000]}. "
                "Are squeue and scontrol installed and on the PATH of a non-interactive shell?"
            )
        infos: list[JobInfo] = []
        accounted: list[JobInfo] | None = None
        for name, code, lines in sections:
            text = "\n".join(lines).strip()
            if name == "sacct":
                accounted = self._parse_sacct(code, lines)
                continue
            if code != 0:
                if _INVALID_ID in text:  # unknown or long-forgotten ids: absent, not an error
                    continue
                raise SchedulerError(
                    f"`{name.split()[0]}` failed (exit {code}): {text[:2000]}. "
                    "Is the SLURM controller up? The same command on the computer shows more."
                )
            if name == "squeue":
                infos.extend(self._parse_squeue(lines))
            else:
                infos.extend(self._parse_scontrol(lines))
        if accounted:
            infos = _with_accounting(infos, accounted)
        return infos + array_summaries(infos)

    @staticmethod
    def _parse_squeue(lines: list[str]) -> list[JobInfo]:
        infos = []
        for line in lines:
            values = line.split("|", len(_SQUEUE_FIELDS) - 1)
            if len(values) == len(_SQUEUE_FIELDS) and _JOB_ID.fullmatch(values[0]):
                infos.append(_job_info(dict(zip(_SQUEUE_FIELDS, values, strict=True))))
            elif line.strip():
                # Not skipped: a job missing from the list counts as finished.
                raise SchedulerError(
                    f"squeue printed a line veglia does not understand: {line[:200]!r}"
                )
        return infos

    @staticmethod
    def _parse_scontrol(lines: list[str]) -> list[JobInfo]:
        records: list[str] = []
        for line in lines:
            if line.startswith("JobId="):
                records.append(line)
            elif records and line[:1].isspace() and line.strip():  # multi-line form
                records[-1] += "\n" + line
            elif line.strip():
                raise SchedulerError(
                    f"scontrol printed a line veglia does not understand: {line[:200]!r}"
                )
        return [_job_info(parse_scontrol_record(record)) for record in records]

    @staticmethod
    def _parse_sacct(code: int, lines: list[str]) -> list[JobInfo] | None:
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
                raise SchedulerError(
                    f"sacct printed a line veglia does not understand: {line[:200]!r}"
                )
            fields = dict(zip(_SACCT_FIELDS, values, strict=True))
            job_id = values[0].split(".", 1)[0]
            if match.group(3) is None:
                jobs[job_id] = fields
            else:
                steps.setdefault(job_id, []).append(fields)
        return [_sacct_job_info(fields, steps.get(job_id, [])) for job_id, fields in jobs.items()]

    # -- queues -------------------------------------------------------------------------
    def queues_command(self) -> str:
        return "sinfo --noheader --format='%P|%l|%m|%D|%a'"

    def parse_queues_output(self, retval: int, stdout: str, stderr: str) -> list[QueueInfo]:
        """One QueueInfo per partition; a partition listed on several lines (nodes of other
        sizes or states) gets the largest node memory and the sum of the nodes."""
        if retval != 0:
            raise SchedulerError(f"sinfo failed (exit {retval}): {stderr.strip()[:2000]}")
        queues: dict[str, QueueInfo] = {}
        for line in stdout.splitlines():
            parts = line.strip().split("|")
            if len(parts) != 5:
                continue
            name, limit, memory, nodes, available = parts
            default = name.endswith("*")
            name = name.rstrip("*")
            memory_kb = int(memory.rstrip("+")) * 1024 if memory.rstrip("+").isdigit() else None
            queue = queues.setdefault(
                name,
                QueueInfo(
                    name,
                    max_wallclock_seconds=parse_duration(limit),
                    default=default,
                    available=available == "up",
                    max_nodes=0,
                ),
            )
            if memory_kb is not None:
                queue.max_memory_kb = max(queue.max_memory_kb or 0, memory_kb)
            queue.max_nodes = (queue.max_nodes or 0) + (int(nodes) if nodes.isdigit() else 0)
        return list(queues.values())

    def unsatisfiable_reason(self, reason: str) -> bool:
        return reason.split(",")[0].strip("() ") in _UNSATISFIABLE

    # -- kill -------------------------------------------------------------------------------
    def kill_command(self, job_id: str) -> str:
        return f"scancel {_check_job_id(job_id)}"

    def parse_kill_output(self, retval: int, stdout: str, stderr: str) -> bool:
        """True when scancel accepted, or the job is already gone (unknown id, or already
        completing): either way it will not run on. False otherwise (permission denied,
        controller unreachable), with scancel's message logged as a warning."""
        return kill_accepted("scancel", retval, stdout, stderr, gone=_GONE, logger=LOGGER)

    def classify_failure(self, info: JobInfo | None, scheduler_stderr: str) -> JobFailure | None:
        """SLURM's own kill messages in the job's stderr win over the final state: with
        ``JobAcctGatherParams=OverMemoryKill`` a memory kill ends as ``FAILED``
        (``JobLaunchFailure``, signal 9) and only slurmstepd's "exceeded memory limit"
        tells why; and the info may be missing once SLURM has forgotten the job."""
        return classify_by_messages(
            info, scheduler_stderr, out_of_memory=_OOM_MESSAGES, out_of_walltime=_TIMEOUT_MESSAGE
        )
