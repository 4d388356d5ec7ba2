"""The fake batch system behind :class:`~veglia.testing.FakeScheduler`: its jobs, driven by
the test."""

from __future__ import annotations

import itertools
import os
import shlex
import threading
import time

from veglia.exceptions import SchedulerSubmitError
from veglia.schedulers import JobFailure, JobInfo, JobState
from veglia.transports import Transport

__all__ = ["FakeCluster"]


class FakeCluster:
    """The batch system behind :class:`FakeScheduler`: its jobs, as the test sets them.

    Thread-safe, so a test can drive jobs from a thread while the engine runs a calc job
    in the foreground (:meth:`wait_for_submission` tells it when the job arrived).
    """

    def __init__(self) -> None:
        #: Jobs by id, in submission order; a forgotten job is removed.
        self.jobs: dict[str, JobInfo] = {}
        #: Every id ever submitted, in order.
        self.submitted: list[str] = []
        self._ids = itertools.count(1001)
        #: Job ids by (work dir, script): a submission replayed gets its first job's id.
        self._submissions: dict[tuple[str, str], str] = {}
        self._refusals: list[SchedulerSubmitError] = []
        self._changed = threading.Condition()

    def reset(self) -> None:
        """Forget every job and pending refusal (between tests)."""
        with self._changed:
            self.jobs.clear()
            self.submitted.clear()
            self._submissions.clear()
            self._refusals.clear()

    def job(self, job_id: str) -> JobInfo:
        """The job as the cluster reports it; KeyError when it does not know it."""
        with self._changed:
            return self.jobs[job_id]

    def refuse_next_submission(self, message: str, *, permanent: bool = True) -> None:
        """Make the next submission fail with a :class:`SchedulerSubmitError`."""
        with self._changed:
            self._refusals.append(SchedulerSubmitError(message, permanent=permanent))

    def set_state(
        self,
        job_id: str,
        state: JobState,
        reason: str = "",
        wallclock_seconds: int | None = None,
    ) -> None:
        """Move a job to ``state`` (queued, held, running, suspended...), with the
        scheduler's ``reason`` and the seconds it has run."""
        with self._changed:
            info = self.jobs[job_id]
            info.state, info.raw_state, info.reason = state, state.value.upper(), reason
            info.wallclock_seconds = wallclock_seconds
            self._changed.notify_all()

    def start(self, job_id: str) -> None:
        """The job starts running."""
        self.set_state(job_id, JobState.RUNNING)

    def finish(self, job_id: str, exit_code: int = 0, failure: JobFailure | None = None) -> None:
        """The job ends with ``exit_code``; ``failure`` says why the batch system ended it
        (out of memory, out of wall time...), None when it ended on its own."""
        with self._changed:
            info = self.jobs[job_id]
            info.state, info.raw_state = JobState.DONE, "DONE"
            info.exit_code, info.failure = exit_code, failure
            self._changed.notify_all()

    def forget(self, job_id: str) -> None:
        """The cluster forgets the job (as SLURM does ``MinJobAge`` after it ends): it no
        longer appears in listings, which the engine takes as finished."""
        with self._changed:
            self.jobs.pop(job_id, None)
            self._changed.notify_all()

    def run(self, job_id: str, transport: Transport, timeout: float | None = 600) -> int:
        """Run the job's script for real: with bash in its work dir through ``transport``
        (a FakeTransport on the same sandbox, ``core.local``...), then finish it with the
        script's exit code, which is returned."""
        info = self.job(job_id)
        self.start(job_id)
        script = shlex.quote(info.details["script"])
        code, _, _ = transport.exec_command(
            f"bash {script}", workdir=info.details["workdir"], timeout=timeout
        )
        self.finish(job_id, exit_code=code)
        return code

    def wait_for_submission(self, count: int = 1, timeout: float = 60) -> str:
        """Block until ``count`` jobs were submitted in all; the id of the ``count``-th."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while len(self.submitted) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no job submitted to the FakeCluster in {timeout} s")
                self._changed.wait(left)
            return self.submitted[count - 1]

    # -- what FakeScheduler calls -----------------------------------------------------------
    def _submit(self, workdir: str, script: str) -> str:
        with self._changed:
            if self._refusals:
                raise self._refusals.pop(0)
            replayed = self._submissions.get((workdir, script))  # the same one, again
            if replayed is not None and replayed in self.jobs:
                return replayed
            job_id = str(next(self._ids))
            self._submissions[(workdir, script)] = job_id
            self.jobs[job_id] = JobInfo(
                job_id,
                JobState.QUEUED,
                raw_state="QUEUED",
                title=os.path.basename(script),
                details={"workdir": workdir, "script": script},
            )
            self.submitted.append(job_id)
            self._changed.notify_all()
            return job_id

    def _cancel(self, job_id: str) -> None:
        with self._changed:
            info = self.jobs.get(job_id)
            if info is not None and info.state is not JobState.DONE:
                info.state, info.raw_state = JobState.DONE, "CANCELLED"
                info.failure = JobFailure.CANCELLED
                self._changed.notify_all()
