"""core.direct runs, lists and kills real background jobs through the local transport."""

from __future__ import annotations

import time

import pytest

from veglia.plugins.schedulers.direct import DirectScheduler
from veglia.plugins.transports.local import LocalTransport
from veglia.schedulers import JobState, JobTemplate, SchedulerError
from veglia_fixtures.profiles import job_group_left


@pytest.fixture
def workdir(tmp_path):
    return str(tmp_path)


def _submit(scheduler, transport, workdir, commands, **options):
    script = scheduler.get_submit_script(JobTemplate(commands=commands, **options))
    transport.write_bytes(f"{workdir}/job.sh", script.encode())
    command = scheduler.submit_command("job.sh")
    return scheduler.parse_submit_output(*transport.exec_command(command, workdir=workdir))


def _wait_gone(scheduler, transport, job_id, seconds=10):
    deadline = time.monotonic() + seconds
    while job_id in scheduler.get_jobs(transport, [job_id]):
        assert time.monotonic() < deadline, f"job {job_id} still runs"
        time.sleep(0.1)


def _wait_for_file(transport, path, seconds=5):
    """Until the job has written ``path`` (it has reached that point of its script)."""
    deadline = time.monotonic() + seconds
    while not transport.exists(path):
        assert time.monotonic() < deadline, f"{path} not written after {seconds} s"
        time.sleep(0.05)


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
        _wait_for_file(transport, f"{workdir}/child.pid")
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


def test_threads_per_process_reach_the_job_as_omp_num_threads(profile):
    from veglia import engine, orm
    from veglia.entry_points import CalculationFactory

    shell = CalculationFactory("core.shell")
    outputs = engine.run(
        shell,
        command=orm.Str('echo "threads=$OMP_NUM_THREADS"'),
        metadata={"options": {"resources": {"num_machines": 1, "num_cores_per_mpiproc": 3}}},
    )
    assert outputs["stdout"].get_content() == b"threads=3\n"
    mine = engine.run(
        shell,
        command=orm.Str('echo "threads=$OMP_NUM_THREADS"'),
        metadata={
            "options": {
                "resources": {"num_machines": 1, "num_cores_per_mpiproc": 3},
                "environment_variables": {"OMP_NUM_THREADS": 1},
            }
        },
    )
    assert mine["stdout"].get_content() == b"threads=1\n"  # the job's own value wins


def test_a_ps_printing_garbage_keeps_jobs_waiting_and_never_ends_them(profile, run_cli, tmp_path):
    """The acceptance run: a wrapper earlier on PATH makes `ps` print garbage."""
    import os
    import shutil

    from veglia import engine, orm
    from veglia.entry_points import CalculationFactory
    from veglia_fixtures.profiles import wait_for

    fake = tmp_path / "bin"
    fake.mkdir()
    ps = fake / "ps"
    ps.write_text("#!/bin/sh\necho aaa\n")
    ps.chmod(0o755)
    env = {"PATH": f"{fake}:{os.environ['PATH']}"}
    assert run_cli("-p", "test", "daemon", "start", "1", env=env).exit_code == 0
    try:
        node = engine.submit(CalculationFactory("core.shell"), command=orm.Str("sleep 1; echo ok"))
        wait_for(
            [node],
            lambda n: any("ps printed a line" in log.message for log in n.logs),
            timeout=60,
        )
        time.sleep(4)  # well past the job's own end
        assert not node.refresh().is_terminated, "garbage from ps ended the job"
        ps.write_text(f'#!/bin/sh\nexec {shutil.which("ps")} "$@"\n')  # the fix
        wait_for([node], lambda n: n.is_terminated, timeout=90)
        assert node.is_finished_ok, node.exit_message
    finally:
        run_cli("-p", "test", "daemon", "stop")


def test_a_cancel_returns_only_once_the_job_has_run_its_term_trap_and_exited(workdir):
    """Nothing reported cancelled keeps running: a job whose TERM trap takes a second (the
    wraps' after-parts) is gone when the cancel returns."""
    scheduler = DirectScheduler()
    with LocalTransport() as transport:
        job_id = _submit(
            scheduler,
            transport,
            workdir,
            [
                "trap 'sleep 1; echo trapped > trap.txt; exit 143' TERM",
                "touch ready; sleep 60 & wait",
            ],
        )
        _wait_for_file(transport, f"{workdir}/ready")
        assert scheduler.kill(transport, job_id)
        assert job_group_left(job_id) == []
        assert transport.read_bytes(f"{workdir}/trap.txt") == b"trapped\n"


def test_a_job_that_ignores_term_is_killed_after_the_grace(workdir):
    scheduler = DirectScheduler()
    scheduler.kill_grace_seconds = 0.5
    with LocalTransport() as transport:
        job_id = _submit(
            scheduler, transport, workdir, ["trap '' TERM; touch ready; while :; do sleep 1; done"]
        )
        _wait_for_file(transport, f"{workdir}/ready")
        started = time.monotonic()
        assert scheduler.kill(transport, job_id)
        assert job_group_left(job_id) == []
        assert time.monotonic() - started < 5
