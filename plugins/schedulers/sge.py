"""``core.sge``: (Son of) Grid Engine through ``qsub -terse``, ``qstat -xml`` and ``qdel``.

Grid Engine forgets a job as soon as it ends: ``qstat`` lists only queued, running and
suspended jobs, and how a job ended is only in the accounting file (``qacct``, which scans
the whole file and is too slow to poll). So a finished job is simply missing from the list
here, and ``classify_failure`` has only the job's stderr to go by.
"""

from __future__ import annotations

import logging
import posixpath
import re
import shlex
import xml.etree.ElementTree as ET

from veglia.plugin_api import (
    JobFailure,
    JobInfo,
    JobState,
    JobTemplate,
    Scheduler,
    SchedulerError,
    shown_output,
)
from veglia.plugins.schedulers.directives import (
    array_summaries,
    check_directive_value,
    check_job_id,
    classify_by_messages,
    cores_per_machine,
    format_hms,
    kill_accepted,
    memory_mb,
    no_qos_error,
    no_whole_node_memory_error,
    positive_int,
    safe_job_name,
)

__all__ = ["SgeScheduler"]

LOGGER = logging.getLogger(__name__)

_JOB_ID = re.compile(r"\d+")
_SUBMITTED = re.compile(r"(\d+)(\.\d+-\d+:\d+)?")  # -terse prints 4101.1-10:1 for an array
_GONE = re.compile(r"does not exist")
# Grid Engine writes nothing of its own when it kills a job over h_vmem (an address-space
# limit: allocations fail) or h_rt (SIGKILL): what programs print when malloc fails is the
# only trace. A heuristic, that errs on asking for more memory.
_OOM_MESSAGES = re.compile(
    r"Cannot allocate memory|std::bad_alloc|\bMemoryError\b|xmalloc: .*cannot allocate"
)


def _check_job_id(job_id: str) -> str:
    return check_job_id(job_id, _JOB_ID, "a Grid Engine job id (digits)")


def _state(letters: str) -> JobState:
    """A state from qstat's letters (``qw``, ``hqw``, ``Eqw``, ``r``, ``Rr``, ``dr``, ``s``,
    ``t``...), most telling first: an error (``E``) or hold (``h``) keeps a job queued for
    good, suspension (``s``/``S``/``T``) stops a running one, ``d`` (being deleted) is not a
    state of its own."""
    if "E" in letters or "h" in letters:
        return JobState.QUEUED_HELD
    if re.search("[sST]", letters):
        return JobState.SUSPENDED
    if re.search("[rt]", letters):
        return JobState.RUNNING
    if re.search("[qw]", letters):
        return JobState.QUEUED
    return JobState.UNDETERMINED


def _job_info(element: ET.Element) -> JobInfo:
    fields = {child.tag: (child.text or "").strip() for child in element}
    fields["list_state"] = element.get("state", "")
    number = fields.get("JB_job_number", "")
    if not _JOB_ID.fullmatch(number):
        raise SchedulerError(f"qstat -xml listed a job without a job number: {fields}")
    job_id = number
    if fields.get("tasks"):  # an array: one entry per running task, one for the pending
        job_id = f"{number}.{fields['tasks']}"
        fields["ArrayJobId"] = number
    letters = fields.get("state", "")
    state = _state(letters)
    reason = ""
    if "E" in letters:
        reason = f"error state: `qstat -j {number}` says why, `qmod -cj {number}` clears it"
    elif "h" in letters:
        reason = "held"
    queue = fields.get("queue_name", "").split("@")[0]
    return JobInfo(
        job_id=job_id,
        state=state,
        raw_state=letters,
        reason=reason,
        queue=queue or None,
        title=fields.get("JB_name", ""),
        details=fields,
    )


class SgeScheduler(Scheduler):
    """Grid Engine (SGE, SoGE, OGS, Univa/Altair GE).

    Resources: ``-pe <parallel_environment> <slots>`` with slots = all cores of the job
    (asked only when more than one), ``-l h_rt`` wall time, ``-l h_vmem`` memory, ``-q``
    queue, ``-P`` project (the template's account); Grid Engine has no QOS. h_vmem counts
    per slot, so the memory per machine is divided by the slots per machine. Jobs run in
    their submission directory (``-cwd``), with the shebang's shell (``-S``, since Grid
    Engine otherwise uses the queue's shell, often csh), and not rerunnable (``-r n``).

    The parallel environment is site-specific (``qconf -spl`` lists them): pass it as
    ``SgeScheduler(parallel_environment="mpi")`` or set it in a subclass; it defaults to
    ``smp``.
    """

    example_empty_listing = (
        0,
        '<?xml version="1.0"?>\n<job_info xmlns:xsd="http://www.w3.org/2001/XMLSchema">\n'
        "  <queue_info>\n  </queue_info>\n  <job_info>\n  </job_info>\n</job_info>\n",
        "",
    )
    parallel_environment: str = "smp"

    def __init__(self, parallel_environment: str | None = None) -> None:
        if parallel_environment is not None:
            self.parallel_environment = check_directive_value(
                "parallel_environment", parallel_environment
            )

    def script_header(self, template: JobTemplate) -> list[str]:
        if template.qos:
            raise no_qos_error("Grid Engine")
        shell = (template.shebang[2:].split() or ["/bin/bash"])[0]
        if posixpath.basename(shell) == "env":  # "#!/usr/bin/env bash": -S needs a path
            shell = "/bin/bash"
        res = template.resources
        lines = [
            f"#$ -N {safe_job_name(template.job_name, letter_first=True)}",
            f"#$ -o {check_directive_value('stdout_name', template.stdout_name)}",
            f"#$ -e {check_directive_value('stderr_name', template.stderr_name)}",
            "#$ -cwd",
            f"#$ -S {check_directive_value('shebang', shell)}",
            "#$ -r n",
        ]
        if res.cpus > 1:
            lines.append(f"#$ -pe {self.parallel_environment} {res.cpus}")
        if template.max_wallclock_seconds is not None:
            seconds = positive_int("max_wallclock_seconds", template.max_wallclock_seconds)
            lines.append(f"#$ -l h_rt={format_hms(seconds)}")
        if template.max_memory_kb == 0:
            raise no_whole_node_memory_error("SGE")
        if template.max_memory_kb is not None:
            kb = positive_int("max_memory_kb", template.max_memory_kb)
            lines.append(f"#$ -l h_vmem={memory_mb(kb, per=cores_per_machine(res))}M")
        if template.queue_name:
            lines.append(f"#$ -q {check_directive_value('queue_name', template.queue_name)}")
        if template.account:
            lines.append(f"#$ -P {check_directive_value('account', template.account)}")
        return lines

    # -- submit -------------------------------------------------------------------------
    def submit_command(self, script_name: str) -> str:
        return f"qsub -terse {shlex.quote(script_name)}"

    def parse_submit_output(self, retval: int, stdout: str, stderr: str) -> str:
        lines = stdout.strip().splitlines()
        match = _SUBMITTED.fullmatch(lines[-1].strip()) if lines else None
        if retval == 0 and match:
            return match.group(1)
        raise SchedulerError(
            f"qsub refused the job (exit {retval}): "
            f"{shown_output(stderr, stdout)}\n"
            "Check the queue, project, parallel environment (`qconf -spl`) and limits."
        )

    # -- list -----------------------------------------------------------------------------
    def joblist_command(self, job_ids: list[str] | None = None, user: str | None = None) -> str:
        """``qstat -xml`` for the user's jobs: qstat cannot select jobs by id in its list
        form, so the result also holds the user's other jobs (callers look up by id)."""
        for job_id in job_ids or []:
            _check_job_id(job_id)
        who = shlex.quote(user) if user else '"$(whoami)"'
        return f"qstat -xml -u {who}"

    def parse_joblist_output(self, retval: int, stdout: str, stderr: str) -> list[JobInfo]:
        if retval != 0:
            raise SchedulerError(
                f"qstat failed (exit {retval}): {(stderr.strip() or stdout.strip())[:2000]}. "
                "Is the qmaster up? The same command on the computer shows more."
            )
        try:
            root = ET.fromstring(stdout.strip())
        except ET.ParseError as exc:
            raise SchedulerError(
                f"qstat -xml printed what is not XML ({exc}): {stdout.strip()[:500]!r}"
            ) from None
        if root.tag != "job_info" or root.find("queue_info") is None:
            # Every real listing has <queue_info> (empty when nothing runs); without it this
            # is not qstat's answer, and an empty list would end every job.
            raise SchedulerError(
                f"qstat -xml printed XML without <queue_info>: {stdout.strip()[:500]!r}"
            )
        infos = [_job_info(element) for element in root.iter("job_list")]
        return infos + array_summaries(infos)

    # -- move -------------------------------------------------------------------------------
    def move_command(
        self, job_id: str, queue: str, wallclock_seconds: int | None, running: bool
    ) -> str | None:
        """None: not moved. ``qalter -q`` changes a pending job's queue, but its new wall
        time would need ``qalter -l h_rt=...``, and qalter's ``-l`` replaces the job's
        whole list of resource requests (its ``h_vmem`` too), so a move could silently
        drop the memory request."""
        _check_job_id(job_id)
        return None

    # -- kill -------------------------------------------------------------------------------
    def kill_command(self, job_id: str) -> str:
        return f"qdel {_check_job_id(job_id)}"

    def parse_kill_output(self, retval: int, stdout: str, stderr: str) -> bool:
        """True when qdel accepted, or the job no longer exists; False (with qdel's message
        logged) otherwise."""
        return kill_accepted("qdel", retval, stdout, stderr, gone=_GONE, logger=LOGGER)

    def classify_failure(self, info: JobInfo | None, scheduler_stderr: str) -> JobFailure | None:
        return classify_by_messages(info, scheduler_stderr, out_of_memory=_OOM_MESSAGES)
