"""``core.lsf``: IBM Spectrum LSF through ``bsub``, ``bjobs -a -o`` and ``bkill``.

LSF keeps a finished job in ``bjobs -a`` for ``CLEAN_PERIOD`` seconds (lsb.params, one hour
by default) as ``DONE`` or ``EXIT``, with its exit code and the ``TERM_*`` reason LSF killed
it for, so this scheduler reports how jobs ended: ``TERM_MEMLIMIT`` is out of memory,
``TERM_RUNLIMIT`` out of wall time. LSF also writes the reason into the job report it puts
in the job's stdout file, where ``classify_failure`` finds it once LSF has forgotten the job.

Formats follow IBM Spectrum LSF 10.1 documentation (ibm.com/docs/en/spectrum-lsf/10.1.0):
"bjobs -o" (customized output, ``delimiter=``), "LSB_BJOBS_CONSISTENT_EXIT_CODE" (the
"Job <N> is not found" and "No unfinished job found" lines, exit 0 or 255), "Termination
reasons displayed by bacct, bhist, and bjobs" (the ``TERM_*`` keywords), "bsub -M" (limit
units), "Enabling per-task memory reservation" (``rusage[mem]`` is per host), "bsub -hl",
"bsub -W", "bsub -cwd" and "Runtime resource usage limits" ("Cannot exceed queue's hard
limit(s). Job not submitted.").
"""

from __future__ import annotations

import logging
import math
import re
import shlex
from typing import TYPE_CHECKING

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
    BatchSubmitError,
    check_directive_value,
    check_job_id,
    classify_by_messages,
    cores_per_machine,
    kill_accepted,
    memory_mb,
    no_qos_error,
    no_whole_node_memory_error,
    parse_duration,
    positive_int,
    safe_job_name,
)

if TYPE_CHECKING:
    from veglia.plugin_api import Transport

__all__ = ["LsfScheduler", "LsfSubmitError"]

LOGGER = logging.getLogger(__name__)

_JOB_ID = re.compile(r"\d+")
_SUBMITTED = re.compile(r"Job <(\d+)> is submitted to (?:default )?queue <([^>]*)>\.?")
# The fields bjobs prints for each job, in order; "-" stands for an empty value. The name
# comes last: it is the only field a user chooses, so the only one that may hold the "|".
_FIELDS = ["jobid", "stat", "exit_code", "exit_reason", "queue", "submit_time"]
_FIELDS += ["start_time", "run_time", "max_mem", "pend_reason", "job_name"]
_FORMAT = " ".join(_FIELDS) + " delimiter='|'"
_RECORD_START = re.compile(r"\d+\|[A-Z]+")  # an id and a state: a record, not a message
# What bjobs says instead of a record, for an id it no longer knows (LSF forgets a job
# CLEAN_PERIOD after it ends) and for a user without jobs: absent jobs, not errors.
_NOT_FOUND = re.compile(r"Job <(\d+)(?:\[\d+\])?> is not found\.?")
_NO_JOBS = re.compile(r"No (?:unfinished |matching )?job found\.?")

_STATES = {
    "PEND": JobState.QUEUED,
    "WAIT": JobState.QUEUED,  # a member of a chunk job, waiting for the chunk to run
    "PROV": JobState.QUEUED,  # dispatched to a power-saved host that is waking up
    "PSUSP": JobState.QUEUED_HELD,  # suspended while pending (bstop, bsub -H): waits for bresume
    "RUN": JobState.RUNNING,
    "USUSP": JobState.SUSPENDED,
    "SSUSP": JobState.SUSPENDED,
    "DONE": JobState.DONE,
    "PDONE": JobState.DONE,  # done, post-execution command done too
    "PERR": JobState.DONE,  # done, post-execution command failed
    "EXIT": JobState.DONE,
    "UNKWN": JobState.UNDETERMINED,  # mbatchd lost contact with the execution host
    "ZOMBI": JobState.UNDETERMINED,
}
# Why LSF ended an EXIT job, by its TERM_* keyword. CPU time counts as wall time, as in
# core.pbspro: more time is what helps. Swap (bsub -v, SWAPLIMIT) counts as memory.
# Preemption, a lost host, a load threshold or a closed run window are not the job's fault:
# resubmitting it as it is helps, as after a node failure.
_TERMINATIONS: dict[str, JobFailure] = {
    **dict.fromkeys(["TERM_MEMLIMIT", "TERM_SWAP"], JobFailure.OUT_OF_MEMORY),
    **dict.fromkeys(["TERM_RUNLIMIT", "TERM_CPULIMIT"], JobFailure.OUT_OF_WALLTIME),
    **dict.fromkeys(
        ["TERM_OWNER", "TERM_ADMIN", "TERM_FORCE_OWNER", "TERM_FORCE_ADMIN", "TERM_DEADLINE",
         "TERM_BUCKET_KILL", "TERM_REMOVE_HUNG_JOB", "TERM_ORPHAN_SYSTEM"],
        JobFailure.CANCELLED,
    ),
    **dict.fromkeys(
        ["TERM_PREEMPT", "TERM_ZOMBIE", "TERM_LOAD", "TERM_WINDOW", "TERM_RC", "TERM_MC_RECALL",
         "TERM_CWD_NOTEXIST", "TERM_SLURM", "TERM_RMS", "TERM_KUBE", "TERM_CSM_ALLOC"],
        JobFailure.NODE_FAILURE,
    ),
}  # fmt: skip
# Whether bjobs prints the keyword, its description or both is not spelled out in IBM's
# bjobs -o page, so the descriptions of the two kills that resubmission can fix count too.
_MEMORY_TEXT = re.compile(r"LSF (memory|swap) usage limit", re.IGNORECASE)
_RUNTIME_TEXT = re.compile(r"LSF (run ?time|CPU usage) limit", re.IGNORECASE)
_TERM_KEYWORD = re.compile(r"\bTERM_[A-Z_]+")
# The job report LSF writes into the job's stdout file ("TERM_MEMLIMIT: job killed after
# reaching LSF memory usage limit.", then "Exited with exit code 130.").
_OOM_REPORT = re.compile(
    r"^\s*TERM_(MEMLIMIT|SWAP)\b|job killed after reaching LSF (memory|swap) usage limit",
    re.IGNORECASE | re.MULTILINE,
)
_TIMEOUT_REPORT = re.compile(
    r"^\s*TERM_(RUNLIMIT|CPULIMIT)\b|job killed after reaching LSF (run ?time|CPU usage) limit",
    re.IGNORECASE | re.MULTILINE,
)
# What bsub says when the job itself is wrong: resubmitting it unchanged fails again...
_PERMANENT = re.compile(
    "no such queue|cannot exceed queue's hard limit|too many (processors|tasks|slots) "
    "requested|resrsv_limit|limit .*exceed|bad resource requirement|error in (rusage|span|"
    "select|order|same|cu|affinity) section|expected number|duplicate section|cannot be used "
    "in the resource requirement|user cannot use the queue|not authorized|permission denied|"
    r"project\b.*(not found|invalid|not (a )?valid|does not exist)|no such project|illegal "
    "option|invalid option|bad argument|unknown option|no such file",
    re.IGNORECASE,
)
# ... and when mbatchd is busy or unreachable (checked first: these win).
_TRANSIENT = re.compile(
    "lsf is down|not responding|please wait|try again|temporarily|timed? ?out|cannot connect|"
    "connection refused|communication (failure|time ?out)|lim is down|failed in an lsf "
    "library call|still trying",
    re.IGNORECASE,
)
# Of the permanent refusals, those about what the job asks for: another queue or a smaller
# request may be accepted.
_RESOURCE_REQUEST = re.compile(
    "cannot exceed queue's hard limit|too many (processors|tasks|slots) requested|"
    "resrsv_limit|limit .*exceed",
    re.IGNORECASE,
)
# Pending reasons that mean the job cannot start in its queue as it is. "Inactivated by its
# run/dispatch window" is left out: the window opens again.
_UNSATISFIABLE = re.compile(
    r"queue is (inactive\b|inactivated by (the )?(LSF )?administrator)", re.IGNORECASE
)
_GONE = re.compile(r"Job has already finished|No matching job found")


class LsfSubmitError(BatchSubmitError):
    """bsub refused the job.

    ``permanent`` is True when submitting the same script again cannot work (an unknown
    queue, a limit over the queue's, a malformed resource request) and False when it may
    work later (mbatchd did not answer); unknown messages count as not permanent, since
    retrying is harmless and giving up on a transient error is not. ``bsub_message``
    (``output``) is what bsub printed, ``retval`` its exit code.
    """

    command = "bsub"
    permanent_messages = _PERMANENT
    transient_messages = _TRANSIENT
    resource_messages = _RESOURCE_REQUEST
    fix_advice = (
        "Submitting it again will fail the same way: fix the job's queue, project, "
        "resources, wall time or memory."
    )
    retry_advice = "This may be temporary (mbatchd may be busy); try again later."

    @property
    def bsub_message(self) -> str:
        return self.output


def _check_job_id(job_id: str) -> str:
    return check_job_id(job_id, _JOB_ID, "an LSF job id (digits)")


def _run_seconds(text: str) -> int | None:
    """bjobs' ``run_time``: ``1234 second(s)``, or ``HH:MM:SS`` under ``bjobs -hms``."""
    match = re.fullmatch(r"\s*(\d+)\s*second\(s\)\s*", text)
    return int(match.group(1)) if match else parse_duration(text)


def _failure(fields: dict[str, str], raw_state: str) -> JobFailure | None:
    """Why an ended job ended: None for DONE, else from its exit reason."""
    if raw_state != "EXIT":
        return None
    reason = fields["exit_reason"]
    keyword = _TERM_KEYWORD.search(reason)
    if keyword and keyword.group(0) in _TERMINATIONS:
        return _TERMINATIONS[keyword.group(0)]
    if _MEMORY_TEXT.search(reason):
        return JobFailure.OUT_OF_MEMORY
    if _RUNTIME_TEXT.search(reason):
        return JobFailure.OUT_OF_WALLTIME
    return JobFailure.FAILED


def _job_info(fields: dict[str, str]) -> JobInfo:
    raw_state = fields["stat"]
    state = _STATES.get(raw_state, JobState.UNDETERMINED)
    if raw_state not in _STATES:
        LOGGER.warning("bjobs reported job %s in state %r", fields["jobid"], raw_state)
    info = JobInfo(
        job_id=fields["jobid"],
        state=state,
        raw_state=raw_state,
        reason=fields["pend_reason"] or fields["exit_reason"],
        queue=fields["queue"] or None,
        title=fields["job_name"],
        wallclock_seconds=_run_seconds(fields["run_time"]),
        details=fields,
    )
    if state is JobState.DONE:
        code = fields["exit_code"]
        # DONE means exit 0; bjobs shows "-" for it on some versions.
        info.exit_code = int(code) if code.isdigit() else (0 if raw_state != "EXIT" else None)
        info.failure = _failure(fields, raw_state)
    return info


class LsfScheduler(Scheduler):
    """IBM Spectrum LSF (10.1 Fix Pack 2 or later: limits carry explicit units).

    Resources: ``-n`` = all cores of the job (num_machines x num_mpiprocs_per_machine x
    num_cores_per_mpiproc: an LSF slot is a core), ``span[ptile=...]`` = the cores of one
    machine, so the job gets num_machines hosts (the engine exports OMP_NUM_THREADS when
    the job sets num_cores_per_mpiproc). Memory is per machine, like ``--mem`` in SLURM:
    ``-M <MB>MB`` with ``-hl`` (cgroup enforcement per host rather than per task) and the same
    amount reserved with ``rusage[mem=<MB>MB]``, which LSF reserves per host by default.
    Explicit ``MB`` makes both independent of the cluster's ``LSF_UNIT_FOR_LIMITS``. Wall
    time is ``-W`` in whole minutes, rounded up. ``-q`` queue, ``-P`` project (the template's
    account); LSF has no QOS. Jobs run in ``-cwd`` (the submission directory unless set),
    which overrides a site's ``DEFAULT_JOB_CWD``, and are never rerunnable (``-rn``), so a
    host failure does not rerun them behind the engine's back.
    """

    example_empty_listing = (255, "", "Job <999> is not found\n")

    def script_header(self, template: JobTemplate) -> list[str]:
        if template.max_memory_kb == 0:
            raise no_whole_node_memory_error("LSF")
        if template.qos:
            raise no_qos_error(
                "LSF", "queue_name, account (an LSF project) or custom_scheduler_commands"
            )
        res = template.resources
        per_machine = cores_per_machine(res)
        megabytes = None
        if template.max_memory_kb is not None:
            megabytes = memory_mb(positive_int("max_memory_kb", template.max_memory_kb))
        # One -R with every section: several -R options are merged only by newer releases.
        requirement = f"span[ptile={per_machine}]"
        if megabytes is not None:
            requirement += f" rusage[mem={megabytes}MB]"
        workdir = check_directive_value("working_directory", template.working_directory)
        lines = [
            f"#BSUB -J {safe_job_name(template.job_name)}",
            f"#BSUB -o {check_directive_value('stdout_name', template.stdout_name)}",
            f"#BSUB -e {check_directive_value('stderr_name', template.stderr_name)}",
            f"#BSUB -cwd {workdir}",
            "#BSUB -rn",
            f"#BSUB -n {res.num_machines * per_machine}",
            f'#BSUB -R "{requirement}"',
        ]
        if megabytes is not None:
            lines += [f"#BSUB -M {megabytes}MB", "#BSUB -hl"]
        if template.max_wallclock_seconds is not None:
            seconds = positive_int("max_wallclock_seconds", template.max_wallclock_seconds)
            # -W takes [hour:]minute; asking for less than requested would kill the job early.
            lines.append(f"#BSUB -W {math.ceil(seconds / 60)}")
        if template.queue_name:
            lines.append(f"#BSUB -q {check_directive_value('queue_name', template.queue_name)}")
        if template.account:
            lines.append(f"#BSUB -P {check_directive_value('account', template.account)}")
        return lines

    # -- submit -------------------------------------------------------------------------
    def submit_command(self, script_name: str) -> str:
        # From standard input bsub reads the #BSUB lines of the script itself.
        return f"bsub < {shlex.quote(script_name)}"

    def parse_submit_output(self, retval: int, stdout: str, stderr: str) -> str:
        for line in stdout.splitlines():
            match = _SUBMITTED.fullmatch(line.strip())
            if match:
                if retval != 0:  # the job exists: raising would submit it a second time
                    LOGGER.warning("bsub exited %s after submitting job %s", retval, match[1])
                return match.group(1)
        message = shown_output(stderr, stdout)
        if retval == 0:
            raise SchedulerError(
                f"bsub exited 0 but printed no job id: {message}. The job may have been "
                "submitted: check `bjobs -a` before submitting it again."
            )
        raise LsfSubmitError.from_output(retval, message)

    # -- list -----------------------------------------------------------------------------
    def joblist_command(self, job_ids: list[str] | None = None, user: str | None = None) -> str:
        """``bjobs -a`` (finished jobs included) in veglia's ``-o`` format, for the ids or
        for all jobs of ``user`` (by default, of whoever runs it).

        Past ``IDS_ON_THE_LINE`` ids the line would grow past what one argument may hold:
        the ids come on standard input (``joblist_input``), bjobs lists all the caller's
        jobs, and the ids it did not list are asked for by id, that many a call, so bjobs
        itself says "Job <N> is not found" of those it no longer knows, as it does when all
        are on the line. When the listing fails (mbatchd down), nothing more runs, and the
        command exits with the listing's code; "No job found" (exit 0 or 255) is an answer.
        """
        command = f'bjobs -a -noheader -o "{_FORMAT}"'
        if not job_ids:
            return f"{command} -u {shlex.quote(user)}" if user else command
        ids = [_check_job_id(job_id) for job_id in job_ids]
        if len(ids) <= self.IDS_ON_THE_LINE:
            return f"{command} {' '.join(ids)}"
        listed = 'printf "%s\\n" "$l" | cut -s -d\'|\' -f1'
        # bjobs reads from /dev/null: the loop's standard input is the ids still to ask.
        return (
            f'ids=$(cat); l=$({command} 2>&1); rc=$?; printf "%s\\n" "$l"; '
            f'[ $rc -eq 0 ] || [[ $l == *"job found"* ]] || exit $rc; '
            f"{self.ids_not_listed(listed)} | xargs -r -n {self.IDS_ON_THE_LINE} | "
            f"while read -r j; do {command} $j </dev/null; done"
        )

    def joblist_input(self, job_ids: list[str]) -> bytes | None:
        return self.ids_input(job_ids, _check_job_id)

    def parse_joblist_output(self, retval: int, stdout: str, stderr: str) -> list[JobInfo]:
        return self._parse_joblist(retval, stdout, stderr)[0]

    def _parse_joblist(
        self, retval: int, stdout: str, stderr: str
    ) -> tuple[list[JobInfo], set[str]]:
        """The jobs bjobs listed and the ids it said it does not know. Every other line,
        on either stream, is an error: a job missing from the list counts as finished, so a
        listing veglia half understands must not pass for a short one."""
        infos: list[JobInfo] = []
        unknown: set[str] = set()
        problems: list[str] = []
        answered = False  # "No job found": an answer, even with LSF's exit 255
        for line in (stdout + "\n" + stderr).splitlines():
            text = line.strip()
            if not text:
                continue
            if _NO_JOBS.fullmatch(text):
                answered = True
                continue
            not_found = _NOT_FOUND.fullmatch(text)
            if not_found:
                unknown.add(not_found.group(1))
                continue
            values = [v.strip() for v in text.split("|", len(_FIELDS) - 1)]
            if len(values) == len(_FIELDS) and _RECORD_START.fullmatch(f"{values[0]}|{values[1]}"):
                fields = {k: "" if v == "-" else v for k, v in zip(_FIELDS, values, strict=True)}
                infos.append(_job_info(fields))
            else:
                problems.append(text)
        if problems or (retval != 0 and not (infos or unknown or answered)):
            shown = shown_output("\n".join(problems), stderr, stdout)
            raise SchedulerError(
                f"bjobs failed or printed what veglia does not understand (exit {retval}): "
                f"{shown}\nIs mbatchd up, and bjobs on the PATH of a non-interactive "
                "shell? The same command on the computer shows more."
            )
        return infos, unknown

    def get_jobs(self, transport: Transport, job_ids: list[str]) -> dict[str, JobInfo]:
        """As the base class, and bjobs must account for every id: listed, or "is not
        found". Silence about a job is an error rather than its end."""
        if not job_ids:
            return {}
        retval, stdout, stderr = self.run_joblist(transport, job_ids)
        infos, unknown = self._parse_joblist(retval, stdout, stderr)
        jobs = {info.job_id: info for info in infos}
        silent = [job_id for job_id in job_ids if job_id not in jobs and job_id not in unknown]
        if silent:
            raise SchedulerError(
                f"bjobs said nothing about job(s) {', '.join(silent)} (exit {retval}): "
                f"{(stderr.strip() or stdout.strip() or '(no output)')[:2000]}"
            )
        return jobs

    # -- queues ---------------------------------------------------------------------------
    def queues_command(self) -> None:
        """None: the queues' limits are not read from LSF. ``bqueues -o`` field names for
        the limits differ between fix packs and ``bqueues -l`` prints them in several
        layouts; a misread limit would move jobs to the wrong queue, so declare the queues
        on the computer or in the profile instead."""
        return None

    def unsatisfiable_reason(self, reason: str) -> bool:
        return bool(_UNSATISFIABLE.search(reason or ""))

    # -- move -------------------------------------------------------------------------------
    def move_command(
        self, job_id: str, queue: str, wallclock_seconds: int | None, running: bool
    ) -> str | None:
        """``bswitch QUEUE ID``, then ``bmod -W MINUTES ID``, pending or running: bswitch(1)
        "Switches unfinished jobs from one queue to another", and for a job already
        dispatched "its nice value and resource limits remain the same", hence the bmod of
        the run limit, which for a running job needs ``LSB_MOD_ALL_JOBS=Y`` in lsf.conf
        (set at installation). Switched first: the job's old limit fits the longer queue."""
        job = _check_job_id(job_id)
        command = f"bswitch {shlex.quote(check_directive_value('queue_name', queue))} {job}"
        if wallclock_seconds is not None:
            seconds = positive_int("max_wallclock_seconds", wallclock_seconds)
            command += f" && bmod -W {math.ceil(seconds / 60)} {job}"
        return command

    def parse_move_output(self, retval: int, stdout: str, stderr: str) -> None:
        if retval != 0:
            raise SchedulerError(
                f"bswitch or bmod refused to move the job (exit {retval}): "
                f"{shown_output(stderr, stdout)}"
            )

    # -- kill -------------------------------------------------------------------------------
    def kill_command(self, job_id: str) -> str:
        return f"bkill {_check_job_id(job_id)}"

    def parse_kill_output(self, retval: int, stdout: str, stderr: str) -> bool:
        """True when bkill accepted ("Job <N> is being terminated"), or the job is already
        over ("Job has already finished") or forgotten ("No matching job found"): either
        way it will not run on. False otherwise (permission denied, mbatchd unreachable),
        with bkill's message logged as a warning."""
        return kill_accepted("bkill", retval, stdout, stderr, gone=_GONE, logger=LOGGER)

    def classify_failure(self, info: JobInfo | None, scheduler_stderr: str) -> JobFailure | None:
        """The job report's "TERM_MEMLIMIT: job killed after reaching LSF memory usage
        limit." (or TERM_RUNLIMIT's) in the job's output files wins: it is there even after
        LSF has forgotten the job."""
        return classify_by_messages(
            info, scheduler_stderr, out_of_memory=_OOM_REPORT, out_of_walltime=_TIMEOUT_REPORT
        )
