"""``example.setsid``: a scheduler of the package's own, written against veglia.plugin_api.

Each job runs as a background ``setsid bash`` (a session of its own, so a kill reaches its
children), tracked with ``ps``.
"""

from __future__ import annotations

import re
import shlex

from veglia.plugin_api import JobInfo, JobState, JobTemplate, Scheduler, SchedulerError

_STATES = {"R": JobState.RUNNING, "S": JobState.RUNNING, "D": JobState.RUNNING}


class SetsidScheduler(Scheduler):
    """Background jobs in their own session; a job's id is its PID."""

    example_empty_listing = (1, "", "")

    def script_header(self, template: JobTemplate) -> list[str]:
        if template.queue_name or template.account:
            raise SchedulerError("example.setsid has no queues or accounts; remove them.")
        out, err = shlex.quote(template.stdout_name), shlex.quote(template.stderr_name)
        return [f"exec > {out} 2> {err}"]

    def submit_command(self, script_name: str) -> str:
        script = shlex.quote(script_name)
        return f"setsid bash {script} > /dev/null 2>&1 < /dev/null & echo $!"

    def parse_submit_output(self, retval: int, stdout: str, stderr: str) -> str:
        job_id = stdout.strip()
        if retval != 0 or not job_id.isdigit():
            raise SchedulerError(f"setsid failed (exit {retval}): {stderr.strip()[:500]}")
        return job_id

    def joblist_command(self, job_ids: list[str] | None = None, user: str | None = None) -> str:
        if not job_ids:
            who = shlex.quote(user) if user else '"$(whoami)"'
            return f"ps -o pid=,stat=,etimes= -u {who}"
        return f"ps -o pid=,stat=,etimes= -p {','.join(_pid(job_id) for job_id in job_ids)}"

    def parse_joblist_output(self, retval: int, stdout: str, stderr: str) -> list[JobInfo]:
        if retval not in (0, 1) or stderr.strip() or (retval == 1 and stdout.strip()):
            raise SchedulerError(f"ps failed (exit {retval}): {stderr.strip()[:500]}")
        jobs = []
        for line in stdout.splitlines():
            if not line.strip():
                continue
            match = re.fullmatch(r"\s*(\d+)\s+(\S+)\s+(\d+)\s*", line)
            if not match:
                raise SchedulerError(f"ps printed a line not understood: {line[:200]!r}")
            pid, stat, elapsed = match.groups()
            state = _STATES.get(stat[0], JobState.DONE if stat[0] == "Z" else JobState.SUSPENDED)
            jobs.append(JobInfo(pid, state, raw_state=stat, wallclock_seconds=int(elapsed)))
        return jobs

    def kill_command(self, job_id: str) -> str:
        return f"kill -TERM -- -{_pid(job_id)}"


def _pid(job_id: str) -> str:
    if not job_id.isdigit():
        raise SchedulerError(f"{job_id!r} is not an example.setsid job id (a PID).")
    return job_id
