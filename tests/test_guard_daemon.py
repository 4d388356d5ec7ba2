"""Monitor guards with a real daemon (issue #32): the daemon keeps the heartbeat the guards
read; a guard stops a job while the daemon is stopped, and the daemon, started again, ends
the process as if the monitor had stopped it; with the daemon running, the monitor alone
stops the job and the guard stands down. Direct scheduler on this machine."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from veglia import engine, orm
from veglia.entry_points import CalculationFactory
from veglia_fixtures.profiles import wait_for
from veglia_fixtures.services import ssh_computer

ShellJob = CalculationFactory("core.shell")


def _guarded_localhost(heartbeat: Path) -> None:
    computer = orm.load_computer("localhost")
    computer.properties.update(
        guards=True,
        guard_interval=1,
        guard_away_after=4,
        guard_grace=2,
        guard_heartbeat=str(heartbeat),
    )
    computer.save()


def _submit_stalled_job(builder) -> orm.CalcJobNode:
    """A job that writes nothing and sleeps, watched by ``stalled_output`` (2 s), whose own
    check comes only every 10 minutes: its guard is what stops the job. Once it runs."""
    builder.command = orm.Str("sleep 600")
    builder.monitors = {
        "quiet": {
            "entry_point": "core.stalled_output",
            "kwargs": {"path": "out.txt", "seconds": 2},
            "minimum_poll_interval": 600,
        }
    }
    node = engine.submit(builder)
    wait_for([node], lambda n: n.get_attribute("scheduler_state") == "running", timeout=120)
    return node


def _until(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return not Path(f"/proc/{pid}/stat").read_text().split(") ")[-1].startswith("Z")


def test_a_guard_stops_a_stalled_job_while_the_daemon_is_stopped(
    profile, daemon, run_cli, tmp_path
):
    heartbeat = tmp_path / "beat" / "heartbeat"
    _guarded_localhost(heartbeat)
    daemon(1)
    node = _submit_stalled_job(ShellJob.get_builder())
    assert heartbeat.is_file()  # the daemon touched it before submitting
    workdir = Path(node.refresh().remote_workdir)
    pid = int(node.job_id)
    assert run_cli("-p", "test", "daemon", "stop").exit_code == 0
    stopped_at = time.monotonic()

    record_file = workdir / "_veglia_guard.json"
    _until(record_file.is_file, 30, "the guard's record")
    _until(lambda: not _alive(pid), 10, "the job to end")
    record = json.loads(record_file.read_text())
    assert record["monitor"] == "quiet" and record["daemon_away"] is True
    assert record["message"].startswith("out.txt does not exist for")
    # Away after 4 s without a heartbeat, checked every second.
    assert time.monotonic() - stopped_at < 20

    daemon(1)
    wait_for([node], lambda n: n.is_terminated, timeout=60)
    assert node.exit_status == 150
    assert "Monitor quiet stopped the job" in node.exit_message
    assert node.exit_message.endswith("(while the daemon was away)")
    shown = run_cli("-p", "test", "process", "show", str(node.pk)).output
    assert "while the daemon was away" in shown
    assert any("stopped the job beside it" in log.message for log in node.logs)


def test_with_the_daemon_running_the_monitor_stops_the_job_and_the_guard_stands_down(
    profile, daemon, tmp_path
):
    _guarded_localhost(tmp_path / "heartbeat")
    daemon(1)
    builder = ShellJob.get_builder()
    builder.command = orm.Str("echo BOOM > out.txt; sleep 600")
    builder.monitors = {
        "boom": {
            "entry_point": "core.file_pattern",
            "kwargs": {"path": "out.txt", "pattern": "BOOM"},
        }
    }
    node = engine.submit(builder)
    wait_for([node], lambda n: n.is_terminated, timeout=60)
    assert node.exit_status == 150 and "away" not in node.exit_message
    stop = node.get_attribute("stopped_by_monitor")
    assert stop["name"] == "boom" and "by" not in stop  # the daemon's own monitor
    folder = node.outputs.retrieved
    assert "_veglia_guard.json" not in folder.list_object_names()
    assert b"stood down" in folder.get_object_content("_veglia_guard.log")


@pytest.mark.parametrize("scheduler", ["core.slurm", "core.direct"])
def test_over_ssh_a_guard_stops_the_job_while_the_daemon_is_stopped(
    profile, daemon, run_cli, services_env, ssh_params, scheduler, request
):
    """On the real SLURM and on the direct scheduler, over SSH: the daemon stopped, a stalled
    job ends within one guard interval of the daemon counting as away, its process gone and
    ``squeue`` empty; the daemon started again ends it Killed by its monitor's stop."""
    from veglia.manage import get_profile

    if scheduler == "core.slurm":
        request.getfixturevalue("slurm")
    ssh_computer(
        "guarded",
        services_env,
        ssh_params,
        scheduler,
        guards=True,
        guard_interval=1,
        guard_away_after=4,
        guard_grace=2,
    )
    daemon(1)
    builder = ShellJob.get_builder()
    builder.metadata.computer = "guarded"
    if scheduler == "core.slurm":
        builder.metadata.options.queue_name = "long"
        builder.metadata.options.max_wallclock_seconds = 700
    node = _submit_stalled_job(builder)
    heartbeat = Path(services_env["SSH_USER_HOME"]) / ".veglia/heartbeat" / str(get_profile().id)
    assert heartbeat.is_file()
    workdir = Path(node.refresh().remote_workdir)
    assert run_cli("-p", "test", "daemon", "stop").exit_code == 0
    away_from = heartbeat.stat().st_mtime + 4  # the guards count the daemon away from here

    record_file = workdir / "_veglia_guard.json"
    _until(record_file.is_file, 40, "the guard's record")
    record = json.loads(record_file.read_text())
    assert record["monitor"] == "quiet" and record["daemon_away"] is True
    assert record["at"] - away_from <= 1 + 2  # one interval, and a second of slack
    if scheduler == "core.slurm":

        def gone() -> bool:
            queued = subprocess.run(
                ["squeue", "-h", "-j", node.job_id], capture_output=True, text=True
            )
            return node.job_id not in queued.stdout

        _until(gone, 30, "squeue to forget the job")
    else:
        _until(lambda: not _alive(int(node.job_id)), 30, "the job's process to end")

    daemon(1)
    wait_for([node], lambda n: n.is_terminated, timeout=120)
    assert node.exit_status == 150
    assert node.exit_message.endswith("(while the daemon was away)")
