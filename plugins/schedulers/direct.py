"""``core.direct``: run the job script right away in the background, no batch system."""

from __future__ import annotations

import re
import shlex

from veglia.plugin_api import (
    JobInfo,
    JobState,
    JobTemplate,
    Scheduler,
    SchedulerError,
    shown_output,
)

__all__ = ["DirectScheduler"]

# ps STAT letters (Linux procps): R running, S/D sleeping, T stopped, Z zombie.
_STATES = {
    "R": JobState.RUNNING,
    "S": JobState.RUNNING,
    "D": JobState.RUNNING,
    "I": JobState.RUNNING,
    "T": JobState.SUSPENDED,
    "t": JobState.SUSPENDED,
    "Z": JobState.DONE,
    "X": JobState.DONE,
}


class DirectScheduler(Scheduler):
    """Each job is a background bash process in its own session, tracked with ``ps``.

    A memory request is enforced with ``ulimit -v``; there is no wall-time limit (the engine
    kills a job that runs past it). Queues and accounts do not exist and are refused.
    """

    example_empty_listing = (1, "", "")
    #: How long a cancelled job's processes have to exit after SIGTERM before SIGKILL.
    kill_grace_seconds = 10.0

    def script_header(self, template: JobTemplate) -> list[str]:
        if template.queue_name or template.account:
            raise SchedulerError(
                "core.direct has no queues or accounts; remove queue_name/account or use a "
                "batch scheduler."
            )
        lines = [
            f"exec > {shlex.quote(template.stdout_name)} 2> {shlex.quote(template.stderr_name)}"
        ]
        if template.max_memory_kb:
            lines.append(f"ulimit -v {int(template.max_memory_kb)}")
        return lines

    def submit_command(self, script_name: str) -> str:
        # The job leads a process group of its own (bash's job control, `set -m`), so a
        # kill reaches its children. Transports run commands without a terminal, so no
        # hangup reaches it when the command returns. Not `setsid`: a program less to
        # start for each job (about a millisecond of CPU on a virtual machine).
        return (
            f"set -m; bash {shlex.quote(script_name)} > /dev/null 2>&1 < /dev/null & "
            "pid=$!; set +m; echo $pid"
        )

    def parse_submit_output(self, retval: int, stdout: str, stderr: str) -> str:
        job_id = stdout.strip()
        if retval != 0 or not job_id.isdigit():
            raise SchedulerError(
                f"Starting the job failed (exit {retval}): {shown_output(stderr, stdout)}"
            )
        return job_id

    def joblist_command(self, job_ids: list[str] | None = None, user: str | None = None) -> str:
        if job_ids:
            for job_id in job_ids:
                if not job_id.isdigit():
                    raise SchedulerError(f"{job_id!r} is not a core.direct job id (a PID).")
            return f"ps -o pid=,stat=,etimes=,comm= -p {','.join(job_ids)}"
        who = shlex.quote(user) if user else '"$(whoami)"'  # the shell must expand it
        return f"ps -o pid=,stat=,etimes=,comm= -u {who}"

    def parse_joblist_output(self, retval: int, stdout: str, stderr: str) -> list[JobInfo]:
        # ps exits 1 when none of the PIDs exists (and prints nothing): an empty list.
        if retval not in (0, 1) or stderr.strip() or (retval == 1 and stdout.strip()):
            raise SchedulerError(
                f"ps failed (exit {retval}): {(stderr.strip() or stdout.strip())[:500]}"
            )
        jobs = []
        for line in stdout.splitlines():
            match = re.match(r"\s*(\d+)\s+(\S+)\s+(\d+)\s*(.*)", line)
            if not match:
                if not line.strip():
                    continue
                # A job missing from the list counts as finished: one garbled listing must
                # be a failed poll, or it would end every job on the computer.
                raise SchedulerError(
                    f"ps printed a line veglia does not understand: {line[:200]!r}. Is `ps` "
                    "on the computer's PATH the procps one?"
                )
            pid, stat, elapsed, command = match.groups()
            state = _STATES.get(stat[0], JobState.UNDETERMINED)
            jobs.append(
                JobInfo(pid, state, raw_state=stat, title=command, wallclock_seconds=int(elapsed))
            )
        return jobs

    def kill_command(self, job_id: str) -> str:
        if not job_id.isdigit():
            raise SchedulerError(f"{job_id!r} is not a core.direct job id (a PID).")
        # SIGCONT after SIGTERM, as SLURM's scancel does: a stopped process (SIGSTOP, a
        # debugger let go) acts on its SIGTERM only once continued. Then wait until no
        # process of the group is left (a job's TERM trap runs the wraps' after-parts), so
        # that a job reported cancelled no longer runs; after the grace, SIGKILL, as SLURM
        # does after KillWait. Zombies do not count: their parent may be slow to reap them.
        # The status is the TERM's: whether the job was there.
        grace = max(1, round(self.kill_grace_seconds * 10))
        in_group = f"ps -e -o pgid=,stat= | grep -q '^ *{job_id} [^Z]'"
        return (
            f"kill -TERM -- -{job_id} && {{ kill -CONT -- -{job_id} 2>/dev/null; n=0; "
            f"while {in_group}; do n=$((n+1)); "
            f"if [ $n -eq {grace} ]; then kill -KILL -- -{job_id} 2>/dev/null; "
            f"elif [ $n -gt {grace + 50} ]; then break; fi; sleep 0.1; done; :; }}"
        )
