"""``core.slurm``: submit with ``sbatch``, list with ``squeue``, ``scontrol`` and ``sacct``,
kill with ``scancel``.

SLURM forgets a finished job ``MinJobAge`` seconds (default 300) after it ends; until then
``scontrol show job`` still reports its state and exit code, which is how this scheduler
learns that a job ran out of memory or wall time. Where the cluster keeps accounting
(slurmdbd), ``sacct`` still knows the job after that, so a job that ended while nobody
polled keeps its state and exit code; ``sacct`` also gives what every finished job used
(peak memory, elapsed and CPU time), recorded as its measured usage. Without accounting
(``sacct`` missing or failing), a forgotten job is simply gone, as without this.

Beside it: reading SLURM's job states and ``scontrol`` records is in
:mod:`~veglia.plugins.schedulers.slurm_records`, ``sacct`` and its parsing in
:mod:`~veglia.plugins.schedulers.slurm_accounting`; what the batch schedulers share (times,
memory, job names, array summaries) is in :mod:`veglia.plugins.schedulers.directives`.
"""

from __future__ import annotations

import logging
import re
import shlex

from veglia.plugin_api import (
    JobFailure,
    JobInfo,
    JobTemplate,
    QueueInfo,
    Scheduler,
    SchedulerError,
    shown_output,
)
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
from veglia.plugins.schedulers.slurm_accounting import SACCT_COMMAND, parse_sacct, with_accounting
from veglia.plugins.schedulers.slurm_records import (
    FINISHED_STATES,
    job_info,
    parse_scontrol_record,
)

__all__ = ["SlurmScheduler", "SlurmSubmitError"]

LOGGER = logging.getLogger(__name__)

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


def _slurm_time(seconds: int) -> str:
    """``[D-]HH:MM:SS``, which sbatch's ``--time`` and scontrol's ``TimeLimit=`` both read.
    SLURM counts in minutes and rounds seconds up; the seconds are passed exactly."""
    days, rest = divmod(positive_int("max_wallclock_seconds", seconds), 86400)
    return f"{f'{days}-' if days else ''}{format_hms(rest)}"


class SlurmScheduler(Scheduler):
    """SLURM through ``sbatch``, ``squeue``, ``scontrol``, ``sacct`` and ``scancel``.

    Resource mapping: ``--nodes`` = num_machines, ``--ntasks-per-node`` =
    num_mpiprocs_per_machine, ``--cpus-per-task`` = num_cores_per_mpiproc, ``--mem`` (per
    node, MB rounded up) = max_memory_kb, ``--time`` = max_wallclock_seconds. Jobs are
    submitted with ``--no-requeue``: a requeued job would rerun in the same work dir behind
    the engine's back, which then sees it finish twice.
    """

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
            lines.append(f"#SBATCH --time={_slurm_time(template.max_wallclock_seconds)}")
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
        message = shown_output(stderr, stdout)
        if retval == 0:
            raise SchedulerError(
                f"sbatch exited 0 but printed no job id: {message}. The job may have been "
                "submitted: check `squeue --me` before submitting it again."
            )
        raise SlurmSubmitError.from_output(retval, message)

    # -- list -----------------------------------------------------------------------------
    def joblist_command(self, job_ids: list[str] | None = None, user: str | None = None) -> str:
        """One bash line: ``squeue`` for every id at once, then ``scontrol show job`` for
        each id squeue did not list (finished jobs, which squeue leaves out), then ``sacct``
        for the ids scontrol reported finished or no longer knew (their usage, and the state
        of jobs SLURM forgot), at most 1,000 ids a call, each section led by a ``#veglia``
        marker line for the parser. scontrol and sacct are skipped when squeue itself
        failed: with the controller down, more timeouts would help nobody. While every job
        is queued or running, nothing runs but squeue.

        Past ``IDS_ON_THE_LINE`` ids the line would grow past what one argument may hold:
        the ids come on standard input (``joblist_input``) and squeue lists all the user's
        jobs.
        """
        squeue = f"squeue --noheader --array --format={shlex.quote(_SQUEUE_FORMAT)}"
        if not job_ids:
            who = shlex.quote(user) if user else '"$(whoami)"'
            return (
                f'q=$({squeue} --user={who} 2>&1); echo "{_MARKER}squeue rc=$?"; '
                'printf "%s\\n" "$q"'
            )
        ids = [_check_job_id(job_id) for job_id in job_ids]
        if len(ids) > self.IDS_ON_THE_LINE:
            take, listing = "ids=$(cat); ", f'{squeue} --user="$(whoami)"'
        else:
            take, listing = f"ids='{' '.join(ids)}'; ", f"{squeue} --jobs={','.join(ids)}"
        finished = "|".join(sorted(FINISHED_STATES))
        # The ids squeue listed: as users write them (%i), and the array's own (%F).
        listed = "printf \"%s\\n\" \"$q\" | cut -s -d'|' -f1,2 | tr '|' '\\n'"
        return (
            f"{take}q=$({listing} 2>&1); rc=$?; "
            f'echo "{_MARKER}squeue rc=$rc"; printf "%s\\n" "$q"; '
            f'if [ $rc -eq 0 ] || [[ $q == *"{_INVALID_ID}"* ]]; then a=; '
            f"f='JobState=({finished})( |$)'; "
            f"for id in $({self.ids_not_listed(listed)}); do "
            f's=$(scontrol --oneliner --details show job "$id" 2>&1); c=$?; '
            f'echo "{_MARKER}scontrol $id rc=$c"; printf "%s\\n" "$s"; '
            f'if [[ $s =~ $f || ( $c -ne 0 && $s == *"{_INVALID_ID}"* ) ]]; then a="$a $id"; fi; '
            "done; "
            'for j in $(printf "%s\\n" $a | xargs -r -n 1000 | tr " " ","); do '
            f"t=$({SACCT_COMMAND} --jobs=$j 2>&1); "
            f'echo "{_MARKER}sacct rc=$?"; printf "%s\\n" "$t"; done; fi'
        )

    def joblist_input(self, job_ids: list[str]) -> bytes | None:
        return self.ids_input(job_ids, _check_job_id)

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
            if name == "sacct":  # one section a 1,000 ids
                part = parse_sacct(code, lines)
                if part is not None:
                    accounted = [*(accounted or []), *part]
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
            infos = with_accounting(infos, accounted)
        return infos + array_summaries(infos)

    @staticmethod
    def _parse_squeue(lines: list[str]) -> list[JobInfo]:
        infos = []
        for line in lines:
            values = line.split("|", len(_SQUEUE_FIELDS) - 1)
            if len(values) == len(_SQUEUE_FIELDS) and _JOB_ID.fullmatch(values[0]):
                infos.append(job_info(dict(zip(_SQUEUE_FIELDS, values, strict=True))))
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
        return [job_info(parse_scontrol_record(record)) for record in records]

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

    # -- move -------------------------------------------------------------------------------
    def move_command(
        self, job_id: str, queue: str, wallclock_seconds: int | None, running: bool
    ) -> str | None:
        """``scontrol update JobId=N Partition=Q TimeLimit=T`` while the job is pending;
        None once it runs: scontrol refuses to change a running job's partition ("Job is no
        longer pending execution for job N", exit 1, recorded here), and only the SLURM
        administrator may raise a running job's time limit (scontrol(1), TimeLimit)."""
        if running:
            return None
        partition = shlex.quote(check_directive_value("queue_name", queue))
        command = f"scontrol update JobId={_check_job_id(job_id)} Partition={partition}"
        if wallclock_seconds is not None:
            command += f" TimeLimit={_slurm_time(wallclock_seconds)}"
        return command

    def parse_move_output(self, retval: int, stdout: str, stderr: str) -> None:
        if retval != 0:
            raise SchedulerError(
                f"scontrol update refused to move the job (exit {retval}): "
                f"{shown_output(stderr, stdout)}"
            )

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
