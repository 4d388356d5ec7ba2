"""The fake scheduler: a :class:`~veglia.schedulers.Scheduler` whose jobs the test drives
through a :class:`~veglia.testing.FakeCluster`."""

from __future__ import annotations

import re
import shlex
import tempfile

from veglia.exceptions import SchedulerError
from veglia.schedulers import JobFailure, JobInfo, JobState, JobTemplate, Scheduler
from veglia.testing.cluster import FakeCluster

__all__ = ["FakeScheduler"]

_MARKER = "#veglia-fake-scheduler"
_SUBMITTED = re.compile(r"veglia-fake-submitted (/.*)")
_KILLED = re.compile(r"veglia-fake-killed (\d+)")
_JOB_ID = re.compile(r"\d+")
#: Listings longer than this are read from a file (see ``joblist_command``).
_INLINE_LINES = 1000
_FIELDS = ("job_id", "state", "raw_state", "exit_code", "failure", "wallclock_seconds", "reason")


def _check_job_id(job_id: str) -> str:
    if not isinstance(job_id, str) or not _JOB_ID.fullmatch(job_id):
        raise SchedulerError(f"{job_id!r} is not a FakeScheduler job id (digits).")
    return job_id


class FakeScheduler(Scheduler):
    """A scheduler whose jobs the test drives, through a :class:`FakeCluster`.

    It talks through the transport as a real one does: the submit command (run in the work
    dir) prints where the script is, and the job gets an id and waits, queued; the list
    command prints the states the test set; the kill command marks the job cancelled.
    Nothing runs until the test says so: :meth:`FakeCluster.start`,
    :meth:`~FakeCluster.finish`, or :meth:`~FakeCluster.run` to run the script for real.

    Every FakeScheduler made without ``cluster`` shares :attr:`cluster`: the engine makes a
    new scheduler whenever it needs one (``Computer.get_scheduler()``), so a test reaches
    the jobs the engine submitted through ``FakeScheduler.cluster``; reset it between tests.

    Scripts get one ``#FAKE`` directive line per template request, and send the job's
    output to the template's stdout and stderr files; every request is accepted.
    """

    example_empty_listing = (0, f"{_MARKER}\n", "")

    #: The cluster of every FakeScheduler made without one (an instance may have its own).
    cluster: FakeCluster = FakeCluster()

    def __init__(self, cluster: FakeCluster | None = None) -> None:
        if cluster is not None:
            self.cluster = cluster

    # -- script -------------------------------------------------------------------------------
    def script_header(self, template: JobTemplate) -> list[str]:
        res = template.resources
        requests = {
            "job-name": template.job_name,
            "nodes": res.num_machines,
            "mpiprocs-per-node": res.num_mpiprocs_per_machine,
            "cores-per-mpiproc": res.num_cores_per_mpiproc,
            "memory-kb": template.max_memory_kb,
            "walltime-seconds": template.max_wallclock_seconds,
            "queue": template.queue_name,
            "account": template.account,
            "qos": template.qos,
        }
        lines = [
            f"#FAKE --{name}={' '.join(str(value).split())}"  # one line, whatever it holds
            for name, value in requests.items()
            if value is not None
        ]
        stdout, stderr = shlex.quote(template.stdout_name), shlex.quote(template.stderr_name)
        return [*lines, f"exec > {stdout} 2> {stderr}"]

    # -- submit -------------------------------------------------------------------------------
    def submit_command(self, script_name: str) -> str:
        return f'printf "veglia-fake-submitted %s/%s\\n" "$PWD" {shlex.quote(script_name)}'

    def parse_submit_output(self, retval: int, stdout: str, stderr: str) -> str:
        lines = stdout.strip().splitlines()
        match = _SUBMITTED.fullmatch(lines[-1]) if lines else None
        if retval != 0 or not match:
            raise SchedulerError(
                f"The fake submission failed (exit {retval}): {stderr.strip() or stdout.strip()}"
            )
        workdir, _, script = match.group(1).rpartition("/")
        return self.cluster._submit(workdir or "/", f"{workdir}/{script}")

    # -- list ---------------------------------------------------------------------------------
    def joblist_command(self, job_ids: list[str] | None = None, user: str | None = None) -> str:
        """A ``printf`` of the cluster's jobs as they are now (all of them without
        ``job_ids``; ``user`` is ignored): one ``id|state|raw state|exit code|failure|
        wallclock seconds|reason`` line each, after a marker line."""
        wanted = {_check_job_id(job_id) for job_id in job_ids} if job_ids else None
        with self.cluster._changed:
            if wanted is None:
                infos = list(self.cluster.jobs.values())
            else:
                infos = [self.cluster.jobs[i] for i in sorted(wanted) if i in self.cluster.jobs]
            lines = [_MARKER] + [
                "|".join(
                    [
                        info.job_id,
                        info.state.value,
                        info.raw_state,
                        "" if info.exit_code is None else str(info.exit_code),
                        info.failure.value if info.failure else "",
                        "" if info.wallclock_seconds is None else str(info.wallclock_seconds),
                        " ".join(info.reason.split()),
                    ]
                )
                for info in infos
            ]
        if len(lines) <= _INLINE_LINES:
            return "printf '%s\\n' " + " ".join(shlex.quote(line) for line in lines)
        # A command line holds at most 128 kB: a long listing is read from a file, as a
        # real batch system's client reads its controller's answer.
        with tempfile.NamedTemporaryFile(
            "w", prefix="veglia-fake-listing-", suffix=".txt", delete=False
        ) as listing:
            listing.write("\n".join(lines) + "\n")
        path = shlex.quote(listing.name)
        return f"cat {path}; rc=$?; rm -f {path}; exit $rc"

    def parse_joblist_output(self, retval: int, stdout: str, stderr: str) -> list[JobInfo]:
        lines = [line for line in stdout.splitlines() if line.strip()]
        if retval != 0 or not lines or lines[0] != _MARKER:
            raise SchedulerError(
                f"The fake listing failed (exit {retval}): "
                f"{(stderr.strip() or stdout.strip() or '(no output)')[:500]}"
            )
        infos = []
        for line in lines[1:]:
            values = line.split("|", len(_FIELDS) - 1)
            if len(values) != len(_FIELDS) or not _JOB_ID.fullmatch(values[0]):
                raise SchedulerError(f"The fake listing has a line it does not know: {line!r}")
            job_id, state, raw_state, exit_code, failure, wallclock, reason = values
            try:
                info = JobInfo(
                    job_id,
                    JobState(state),
                    raw_state=raw_state,
                    reason=reason,
                    exit_code=int(exit_code) if exit_code else None,
                    failure=JobFailure(failure) if failure else None,
                    wallclock_seconds=int(wallclock) if wallclock else None,
                )
            except ValueError:
                raise SchedulerError(f"The fake listing has a wrong value: {line!r}") from None
            known = self.cluster.jobs.get(job_id)
            if known is not None:
                info.title, info.details = known.title, dict(known.details)
            infos.append(info)
        return infos

    # -- kill ---------------------------------------------------------------------------------
    def kill_command(self, job_id: str) -> str:
        return f"printf 'veglia-fake-killed %s\\n' {_check_job_id(job_id)}"

    def parse_kill_output(self, retval: int, stdout: str, stderr: str) -> bool:
        """True when the kill command ran; the job is then cancelled (DONE, CANCELLED)."""
        match = _KILLED.search(stdout)
        if retval != 0 or not match:
            return False
        self.cluster._cancel(match.group(1))
        return True
