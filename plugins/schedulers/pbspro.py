"""``core.pbspro``: PBS Professional / OpenPBS through ``qsub``, ``qstat -f -x`` and ``qdel``.

``qstat -x`` includes finished jobs (state ``F``, kept for the server's
``job_history_duration``, two weeks by default) with their ``Exit_status``, so this
scheduler reports how jobs ended. PBS's own kills have negative exit statuses
(``-27`` memory, ``-29`` wall time); older servers and qdel'd jobs show 256 + signal
instead, where the resources used against those requested tell why.
"""

from __future__ import annotations

import logging
import re
import shlex

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
    check_directive_value,
    check_job_id,
    classify_by_messages,
    cores_per_machine,
    format_hms,
    kill_accepted,
    memory_mb,
    no_qos_error,
    no_whole_node_memory_error,
    parse_duration,
    positive_int,
    safe_job_name,
)

__all__ = ["PbsProScheduler", "TorqueScheduler", "parse_qstat_full"]

LOGGER = logging.getLogger(__name__)

_JOB_ID = re.compile(r"\d+(\[\d*\])?(\.[A-Za-z0-9][A-Za-z0-9.-]*)?")
#: ``    key = value``: an attribute line of ``qstat -f`` (four spaces, a name, " = ").
_ATTRIBUTE = re.compile(r" {4}([A-Za-z_][A-Za-z0-9_.]*) = (.*)")
_STATES = {
    "Q": JobState.QUEUED,
    "W": JobState.QUEUED,  # waiting for its -a start time or a stage-in
    "T": JobState.QUEUED,  # being moved to another queue
    "H": JobState.QUEUED_HELD,
    "R": JobState.RUNNING,
    "E": JobState.RUNNING,  # exiting: still has its nodes, files being staged out
    "B": JobState.RUNNING,  # an array with tasks started
    "S": JobState.SUSPENDED,
    "U": JobState.SUSPENDED,  # suspended because its workstation is busy
    "F": JobState.DONE,
    "X": JobState.DONE,  # a finished array task
    "C": JobState.DONE,  # Torque: completed (kept for keep_completed seconds)
}
# PBS's own exit statuses (JOB_EXEC_* in OpenPBS's job.h) for a job it killed.
_KILLED = {
    -26: JobFailure.OUT_OF_MEMORY,  # vmem
    -27: JobFailure.OUT_OF_MEMORY,  # mem
    -28: JobFailure.OUT_OF_WALLTIME,  # cput: more time is what helps, as for walltime
    -29: JobFailure.OUT_OF_WALLTIME,
    -20: JobFailure.NODE_FAILURE,  # the job's first node (mother superior) was lost
}
_GONE = re.compile(r"Unknown Job Id|Job has finished")
_OOM_MESSAGES = re.compile(r"PBS: job killed: v?mem|cgroup.*mem.*limit|oom[-_ ]kill", re.IGNORECASE)
_TIMEOUT_MESSAGES = re.compile(r"PBS: job killed: (walltime|cput)|exceeded walltime", re.I)
_SIZE = re.compile(r"(\d+)\s*([kmgtp]?)(b|w)", re.IGNORECASE)


def _check_job_id(job_id: str) -> str:
    return check_job_id(job_id, _JOB_ID, "a PBS job id (like 1234, 1234.server or 1234[].server)")


def _size_kb(text: str) -> int | None:
    """A PBS size (``2gb``, ``1950000kb``, ``512mb``, ``1073741824b``, ``w`` = 8 bytes) in kB."""
    match = _SIZE.fullmatch((text or "").strip())
    if not match:
        return None
    number, prefix, unit = int(match.group(1)), match.group(2).lower(), match.group(3).lower()
    size: int = number * 1024 ** "bkmgtp".index(prefix or "b") * (8 if unit == "w" else 1)
    return size // 1024


def parse_qstat_full(text: str) -> list[dict[str, str]]:
    """The records of ``qstat -f``: ``Job Id: <id>`` then ``    key = value`` lines.

    Any other line continues the value before it: qstat wraps long values (``Variable_List``,
    ``exec_vnode``) onto lines indented with a tab (PBS Pro) or spaces (Torque), which go on
    without a separator; a line not indented at all is a newline inside the value (a
    multi-line ``comment``). Text before the first record is not qstat's: an error.
    """
    records: list[dict[str, str]] = []
    key = None
    for line in text.splitlines():
        attribute = _ATTRIBUTE.fullmatch(line)
        if line.startswith("Job Id:"):
            records.append({"Job_Id": line.partition(":")[2].strip()})
            key = None
        elif not line.strip():
            continue
        elif not records:
            raise SchedulerError(f"qstat printed a line veglia does not understand: {line[:200]!r}")
        elif attribute:
            key = attribute.group(1)
            records[-1][key] = attribute.group(2).strip()
        elif key is not None:
            wrapped = line[:1].isspace()
            records[-1][key] += line.strip() if wrapped else "\n" + line.rstrip()
        else:
            raise SchedulerError(f"qstat printed a line veglia does not understand: {line[:200]!r}")
    return records


def _used_at_least(fields: dict[str, str], resource: str, share: float) -> bool:
    """Whether the job used at least ``share`` of the ``resource`` it requested."""
    if resource == "walltime":
        used = parse_duration(fields.get("resources_used.walltime", ""))
        asked = parse_duration(fields.get("Resource_List.walltime", ""))
    else:
        used = _size_kb(fields.get("resources_used.mem", ""))
        asked = _size_kb(fields.get("Resource_List.mem", ""))
    return bool(used is not None and asked and used >= share * asked)


def _failure(fields: dict[str, str], status: int | None) -> JobFailure | None:
    """Why a finished job ended, from its Exit_status, comment and resource use."""
    comment = fields.get("comment", "")
    if status in _KILLED:
        return _KILLED[status]
    if _OOM_MESSAGES.search(comment):
        return JobFailure.OUT_OF_MEMORY
    if _TIMEOUT_MESSAGES.search(comment):
        return JobFailure.OUT_OF_WALLTIME
    if status is None:  # never ran: deleted while queued (substate 91, "terminated")
        return JobFailure.CANCELLED if fields.get("substate") == "91" else None
    if status in (265, 271, 137, 143):  # SIGKILL/SIGTERM, from PBS (256+) or the shell
        if _used_at_least(fields, "walltime", 1.0):
            return JobFailure.OUT_OF_WALLTIME
        if _used_at_least(fields, "mem", 0.95):
            return JobFailure.OUT_OF_MEMORY
        return JobFailure.CANCELLED if status >= 256 else JobFailure.FAILED
    return None if status == 0 else JobFailure.FAILED


def _job_info(fields: dict[str, str]) -> JobInfo:
    raw_state = fields.get("job_state", "")
    state = _STATES.get(raw_state, JobState.UNDETERMINED)
    info = JobInfo(
        job_id=fields["Job_Id"],
        state=state,
        raw_state=raw_state,
        reason=fields.get("comment", ""),
        queue=fields.get("queue") or None,
        title=fields.get("Job_Name", ""),
        wallclock_seconds=parse_duration(fields.get("resources_used.walltime", "")),
        details=fields,
    )
    if state is JobState.DONE:
        text = fields.get("Exit_status") or fields.get("exit_status", "")  # PBS Pro, Torque
        status = int(text) if re.fullmatch(r"-?\d+", text) else None
        # 256 + signal (PBS's "killed by a signal") as a shell reports it: 128 + signal.
        info.exit_code = status - 128 if status is not None and status > 256 else status
        info.failure = _failure(fields, status)
    return info


class PbsProScheduler(Scheduler):
    """PBS Professional and OpenPBS.

    Resources are one ``select`` chunk per machine: ``select=N:ncpus=M*C:mpiprocs=M
    :ompthreads=C[:mem=<MB>mb]`` (memory per machine), ``walltime``, ``-q`` queue and ``-A``
    account; PBS has no QOS. Jobs are submitted not rerunnable (``-r n``), so a node failure
    does not rerun them behind the engine's back. PBS starts jobs in the home directory: the
    script changes to ``$PBS_O_WORKDIR``, the directory it was submitted from.
    """

    example_empty_listing = (35, "", "qstat: Unknown Job Id 999.server\n")

    #: The batch system's name in messages.
    system = "PBS Pro"

    def script_header(self, template: JobTemplate) -> list[str]:
        if template.qos:
            raise no_qos_error(self.system)
        if template.max_memory_kb == 0:
            raise no_whole_node_memory_error(self.system)
        lines = [
            f"#PBS -N {safe_job_name(template.job_name, max_length=236, letter_first=True)}",
            f"#PBS -o {check_directive_value('stdout_name', template.stdout_name)}",
            f"#PBS -e {check_directive_value('stderr_name', template.stderr_name)}",
            "#PBS -r n",
            *self.resource_lines(template),
        ]
        if template.max_wallclock_seconds is not None:
            seconds = positive_int("max_wallclock_seconds", template.max_wallclock_seconds)
            lines.append(f"#PBS -l walltime={format_hms(seconds)}")
        if template.queue_name:
            lines.append(f"#PBS -q {check_directive_value('queue_name', template.queue_name)}")
        if template.account:
            lines.append(f"#PBS -A {check_directive_value('account', template.account)}")
        return lines

    def resource_lines(self, template: JobTemplate) -> list[str]:
        """Machines, cores and memory: one ``select`` chunk per machine."""
        res = template.resources
        chunk = (
            f"{res.num_machines}:ncpus={cores_per_machine(res)}"
            f":mpiprocs={res.num_mpiprocs_per_machine}:ompthreads={res.num_cores_per_mpiproc}"
        )
        if template.max_memory_kb is not None:
            kb = positive_int("max_memory_kb", template.max_memory_kb)
            chunk += f":mem={memory_mb(kb)}mb"
        return [f"#PBS -l select={chunk}"]

    def get_submit_script(self, template: JobTemplate) -> str:
        """The base script with ``cd "$PBS_O_WORKDIR"`` before its first command: after
        every directive, custom ones included, since PBS reads none past a command."""
        lines = super().get_submit_script(template).split("\n")
        first = next(
            (i for i, line in enumerate(lines) if i and line.strip() and line[0] != "#"),
            len(lines) - 1,
        )
        lines.insert(first, 'cd "$PBS_O_WORKDIR" || exit 1')
        return "\n".join(lines)

    # -- submit -------------------------------------------------------------------------
    def submit_command(self, script_name: str) -> str:
        return f"qsub {shlex.quote(script_name)}"

    def parse_submit_output(self, retval: int, stdout: str, stderr: str) -> str:
        lines = stdout.strip().splitlines()
        job_id = lines[-1].strip() if lines else ""
        if retval == 0 and _JOB_ID.fullmatch(job_id):
            return job_id
        raise SchedulerError(
            f"qsub refused the job (exit {retval}): "
            f"{shown_output(stderr, stdout)}\n"
            "Check the queue, account and resource requests against `qstat -Qf <queue>`."
        )

    # -- list -----------------------------------------------------------------------------
    def joblist_command(self, job_ids: list[str] | None = None, user: str | None = None) -> str:
        """``qstat -f -x`` for the ids (finished ones included); for a user, the ids come
        from ``qselect -x -u``, since ``qstat -f`` cannot filter by user itself.

        Past ``IDS_ON_THE_LINE`` ids the line would grow past what one argument may hold:
        the ids come on standard input (``joblist_input``) and ``xargs`` hands them to
        ``qstat -f -x`` as many a call, so each id gets the answer it gets on the line (an
        unknown one "Unknown Job Id"; GNU xargs exits 123 where a qstat exited other than 0
        or 255, and on a 255 stops with a message of its own: a failed poll). The ids are
        not matched against a listing of the user's jobs, as SLURM's are: ``qstat -f`` takes
        no ``-u``, and qstat(1B) says a job that peer scheduling moved to another server
        appears only when asked for by id; missing from a listing, it would count as ended.
        """
        if not job_ids:
            who = shlex.quote(user) if user else '"$(whoami)"'
            return f'ids=$(qselect -x -u {who}) && if [ -n "$ids" ]; then qstat -f -x $ids; fi'
        ids = [_check_job_id(job_id) for job_id in job_ids]
        if len(ids) > self.IDS_ON_THE_LINE:
            return f"xargs -n {self.IDS_ON_THE_LINE} qstat -f -x"
        return "qstat -f -x " + " ".join(shlex.quote(job_id) for job_id in ids)

    def joblist_input(self, job_ids: list[str]) -> bytes | None:
        return self.ids_input(job_ids, _check_job_id)

    def parse_joblist_output(self, retval: int, stdout: str, stderr: str) -> list[JobInfo]:
        # qstat exits nonzero when any id is unknown (history expired) but lists the others.
        errors = [line for line in stderr.strip().splitlines() if not _GONE.search(line)]
        if errors or (retval != 0 and not stderr.strip()):
            raise SchedulerError(
                f"qstat failed (exit {retval}): {' '.join(errors) or stdout.strip()[:2000]}. "
                "Is the PBS server up? The same command on the computer shows more."
            )
        return [_job_info(fields) for fields in parse_qstat_full(stdout)]

    # -- move -------------------------------------------------------------------------------
    def move_command(
        self, job_id: str, queue: str, wallclock_seconds: int | None, running: bool
    ) -> str | None:
        """``qmove QUEUE ID``, then ``qalter -l walltime=HH:MM:SS ID``, while the job is
        queued; None once it runs (pbs_movejob(3B): "A job in the Running, Transiting, or
        Exiting state cannot be moved."). Moved first: the job's walltime fits the longer
        queue it goes to, while the new one may be over the old queue's limit."""
        if running:
            return None
        job = shlex.quote(_check_job_id(job_id))
        command = f"qmove {shlex.quote(check_directive_value('queue_name', queue))} {job}"
        if wallclock_seconds is not None:
            seconds = positive_int("max_wallclock_seconds", wallclock_seconds)
            command += f" && qalter -l walltime={format_hms(seconds)} {job}"
        return command

    def parse_move_output(self, retval: int, stdout: str, stderr: str) -> None:
        if retval != 0:
            raise SchedulerError(
                f"qmove or qalter refused to move the job (exit {retval}): "
                f"{shown_output(stderr, stdout)}"
            )

    # -- kill -------------------------------------------------------------------------------
    def kill_command(self, job_id: str) -> str:
        return f"qdel {shlex.quote(_check_job_id(job_id))}"

    def parse_kill_output(self, retval: int, stdout: str, stderr: str) -> bool:
        """True when qdel accepted, or the job is already gone or finished; False (with
        qdel's message logged) otherwise."""
        return kill_accepted("qdel", retval, stdout, stderr, gone=_GONE, logger=LOGGER)

    def classify_failure(self, info: JobInfo | None, scheduler_stderr: str) -> JobFailure | None:
        """PBS's "=>> PBS: job killed: mem/walltime ... exceeded limit" line in the job's
        stderr wins; it is there even after the server has forgotten the job."""
        return classify_by_messages(
            info, scheduler_stderr, out_of_memory=_OOM_MESSAGES, out_of_walltime=_TIMEOUT_MESSAGES
        )


class TorqueScheduler(PbsProScheduler):
    """Torque (and the PBS it grew from): PBS Pro's commands and ``qstat -f``, whose
    finished jobs show as state ``C`` with a lowercase ``exit_status``, but resources as
    ``nodes=N:ppn=P`` and one ``mem`` for the whole job (max_memory_kb is per machine, as
    for the other schedulers, so it is multiplied by the machines)."""

    system = "Torque"

    def resource_lines(self, template: JobTemplate) -> list[str]:
        res = template.resources
        lines = [f"#PBS -l nodes={res.num_machines}:ppn={cores_per_machine(res)}"]
        if template.max_memory_kb is not None:
            kb = positive_int("max_memory_kb", template.max_memory_kb)
            lines.append(f"#PBS -l mem={memory_mb(kb) * res.num_machines}mb")
        return lines
