"""core.direct runs, lists and kills real background jobs through the local transport."""

from __future__ import annotations

import time

import pytest

from veglia.plugins.schedulers.direct import DirectScheduler
from veglia.plugins.transports.local import LocalTransport
from veglia.schedulers import JobState, JobTemplate, SchedulerError


@pytest.fixture
def workdir(tmp_path):
    return str(tmp_path)


def _submit(scheduler, transport, workdir, commands, **options):
    script = scheduler.get_submit_script(JobTemplate(commands=commands, **options))
    transport.write_bytes(f"{workdir}/job.sh", script.encode())
    return scheduler.submit(transport, workdir, "job.sh")


def _wait_gone(scheduler, transport, job_id, seconds=10):
    deadline = time.monotonic() + seconds
    while job_id in scheduler.get_jobs(transport, [job_id]):
        assert time.monotonic() < deadline, f"job {job_id} still runs"
        time.sleep(0.1)


def test_job_runs_in_its_workdir_and_writes_its_outputs(workdir):
    scheduler = DirectScheduler()
    with LocalTransport() as transport:
        job_id = _submit(
            scheduler,
            transport,
            workdir,
            ["echo out; echo err >&2; pwd > where.txt"],
            environment={"GREETING": "hi there"},
            prepend_text='echo "$GREETING" > env.txt',
        )
        _wait_gone(scheduler, transport, job_id)
        assert transport.read_bytes(f"{workdir}/_scheduler-stdout.txt") == b"out\n"
        assert transport.read_bytes(f"{workdir}/_scheduler-stderr.txt") == b"err\n"
        assert transport.read_bytes(f"{workdir}/where.txt").decode().strip() == workdir
        assert transport.read_bytes(f"{workdir}/env.txt") == b"hi there\n"


def test_running_job_is_listed_and_kill_stops_its_children(workdir):
    scheduler = DirectScheduler()
    with LocalTransport() as transport:
        job_id = _submit(scheduler, transport, workdir, ["sleep 60 & echo $! > child.pid; wait"])
        info = scheduler.get_jobs(transport, [job_id])[job_id]
        assert info.state is JobState.RUNNING
        deadline = time.monotonic() + 5
        while not transport.exists(f"{workdir}/child.pid"):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        child = transport.read_bytes(f"{workdir}/child.pid").decode().strip()
        assert scheduler.kill(transport, job_id)
        _wait_gone(scheduler, transport, job_id)
        _wait_gone(scheduler, transport, child)


def test_finished_jobs_are_not_listed(workdir):
    scheduler = DirectScheduler()
    with LocalTransport() as transport:
        assert scheduler.get_jobs(transport, ["999999999"]) == {}


def test_queues_are_refused_with_a_reason():
    with pytest.raises(SchedulerError, match="no queues"):
        DirectScheduler().get_submit_script(JobTemplate(commands=["true"], queue_name="short"))
