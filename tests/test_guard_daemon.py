"""Monitor guards with a real daemon (issue #32): the daemon keeps the heartbeat the guards
read; a guard stops a job while the daemon is stopped, and the daemon, started again, ends
the process as if the monitor had stopped it; with the daemon running, the monitor alone
stops the job and the guard stands down. Direct scheduler on this machine."""

from __future__ import annotations

import json
import os
import re
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


@pytest.mark.parametrize("where", ["localhost", "core.slurm"])
def test_with_the_daemon_running_the_monitor_stops_the_job_and_the_guard_stands_down(
    profile, daemon, tmp_path, where, request
):
    builder = ShellJob.get_builder()
    if where == "localhost":
        _guarded_localhost(tmp_path / "heartbeat")
    else:
        _guarded_over_ssh(request, where)
        builder.metadata.computer = "guarded"
    daemon(1)
    # After the guards' first check (every second): they ran, and stood down.
    builder.command = orm.Str("sleep 3; echo BOOM > out.txt; sleep 600")
    builder.monitors = {
        "boom": {
            "entry_point": "core.file_pattern",
            "kwargs": {"path": "out.txt", "pattern": "BOOM"},
        }
    }
    node = engine.submit(builder)
    wait_for([node], lambda n: n.is_terminated, timeout=90)
    assert node.exit_status == 150 and "away" not in node.exit_message
    stop = node.get_attribute("stopped_by_monitor")
    assert stop["name"] == "boom" and "by" not in stop  # the daemon's own monitor
    folder = node.outputs.retrieved
    assert "_veglia_guard.json" not in folder.list_object_names()
    assert b"stood down" in folder.get_object_content("_veglia_guard.log")
    assert not any("stopped the job beside it" in log.message for log in node.logs)


def _guarded_over_ssh(request, scheduler: str, **properties):
    """The computer ``guarded``: the loopback sshd, ``scheduler``, guards every second,
    the daemon away after 4 s without a heartbeat."""
    if scheduler == "core.slurm":
        request.getfixturevalue("slurm")
    return ssh_computer(
        "guarded",
        request.getfixturevalue("services_env"),
        request.getfixturevalue("ssh_params"),
        scheduler,
        guards=True,
        guard_interval=1,
        guard_away_after=4,
        guard_grace=2,
        **properties,
    )


def _on_guarded(scheduler: str, command: str, monitors: dict, wallclock: int = 700):
    builder = ShellJob.get_builder()
    builder.metadata.computer = "guarded"
    builder.metadata.options.max_wallclock_seconds = wallclock
    if scheduler == "core.slurm":
        builder.metadata.options.queue_name = "long"
    builder.command = orm.Str(command)
    builder.monitors = monitors
    return engine.submit(builder)


def _job_gone(scheduler: str, node) -> bool:
    if scheduler == "core.slurm":
        queued = subprocess.run(["squeue", "-h", "-j", node.job_id], capture_output=True, text=True)
        return node.job_id not in queued.stdout
    return not _alive(int(node.job_id))


#: Each monitor's own check every 10 minutes: what stops the job is its guard.
_SLOW = {"minimum_poll_interval": 600}


@pytest.mark.parametrize("scheduler", ["core.slurm", "core.direct"])
def test_over_ssh_guards_stop_jobs_while_the_daemon_is_stopped(
    profile, daemon, run_cli, services_env, scheduler, request, jobs_killed_after
):
    """On the real SLURM and on the direct scheduler, over SSH, with the daemon stopped: a
    stalled job, one whose log matches, and one at its wall time each end within one guard
    interval of their condition, their process gone and ``squeue`` empty; the daemon started
    again ends each Killed by its monitor's stop, "while the daemon was away"."""
    from veglia.manage import get_profile

    _guarded_over_ssh(request, scheduler)
    daemon(1)
    stalled = _on_guarded(
        scheduler,
        "sleep 600",
        {
            "quiet": {
                "entry_point": "core.stalled_output",
                **_SLOW,
                "kwargs": {"path": "out.txt", "seconds": 2},
            }
        },
    )
    matched = _on_guarded(
        scheduler,
        "echo starting > run.log; while [ ! -e go ]; do sleep 0.2; done; "
        "echo 'FATAL: out of sorts' >> run.log; sleep 600",
        {
            "fatal": {
                "entry_point": "core.file_pattern",
                **_SLOW,
                "kwargs": {"path": "run.log", "pattern": "^FATAL"},
            }
        },
    )
    timed = _on_guarded(
        scheduler,
        "sleep 600",
        {"clock": {"entry_point": "core.walltime_guard", **_SLOW, "kwargs": {"fraction": 0.5}}},
        wallclock=50,
    )
    nodes = [stalled, matched, timed]
    # SLURM here has 2 CPUs: the third job may start only once a guard ended another, with
    # the daemon stopped; its wall time counts from its start.
    wait_for(nodes[:2], lambda n: n.get_attribute("scheduler_state") == "running", timeout=120)
    wait_for(nodes[2:], lambda n: bool(n.job_id), timeout=60)
    heartbeat = Path(services_env["SSH_USER_HOME"]) / ".veglia/heartbeat" / str(get_profile().id)
    assert heartbeat.is_file()
    assert run_cli("-p", "test", "daemon", "stop").exit_code == 0
    away_from = heartbeat.stat().st_mtime + 4  # the guards count the daemon away from here
    workdirs = {node.pk: Path(node.refresh().remote_workdir) for node in nodes}
    (workdirs[matched.pk] / "go").touch()
    matched_at = time.time()

    records = {}
    for node in nodes:
        record_file = workdirs[node.pk] / "_veglia_guard.json"
        _until(record_file.is_file, 60, f"the guard's record of {node.label or node.pk}")
        records[node.pk] = json.loads(record_file.read_text())
    for node in nodes:
        _until(lambda node=node: _job_gone(scheduler, node), 30, "the job to be gone")
    # Within one interval (1 s) of the condition, and a second of slack each side.
    assert records[stalled.pk]["at"] - away_from <= 1 + 2
    assert records[matched.pk]["at"] - max(away_from, matched_at) <= 1 + 2
    # At 25 s of the job's run as the watcher counts it, checked every second.
    assert re.fullmatch(r"ran 2[56] s of its 50 s \(50% reached\)", records[timed.pk]["message"])
    assert all(record["daemon_away"] is True for record in records.values())
    assert [records[n.pk]["monitor"] for n in nodes] == ["quiet", "fatal", "clock"]

    daemon(1)
    wait_for(nodes, lambda n: n.is_terminated, timeout=120)
    for node, message in (
        (stalled, "Monitor quiet stopped the job: out.txt does not exist for"),
        (matched, "Monitor fatal stopped the job: "),
        (timed, "Monitor clock stopped the job: ran 2"),
    ):
        assert node.exit_status == 150, node.exit_message
        assert node.exit_message.startswith(message), node.exit_message
        assert node.exit_message.endswith("(while the daemon was away)")
    assert "FATAL: out of sorts" in matched.exit_message


def _left_in(user: str, folders: list[str]) -> list[str]:
    """The live processes of ``user`` whose working directory is one of ``folders`` (a
    watcher runs in its job's folder, as the job does)."""
    listed = subprocess.run(["ps", "-u", user, "-o", "pid="], capture_output=True, text=True)
    left = []
    for pid in listed.stdout.split():
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:  # gone, or a zombie
            continue
        if cwd in folders:
            left.append(f"{pid} in {cwd}: {Path(f'/proc/{pid}/cmdline').read_bytes()!r}")
    return left


@pytest.fixture
def jobs_killed_after(services_env):
    """Every job of the profile, SLURM's and the direct scheduler's, ended after the test
    (a failed one must not leave jobs running into the next test)."""
    yield
    from veglia.orm.queries import list_processes

    for row in list_processes(None, attribute_keys={"job_id"}):
        job_id = row.attributes.get("job_id")
        if not job_id:
            continue
        subprocess.run(["scancel", job_id], capture_output=True, check=False)
        subprocess.run(["pkill", "-KILL", "-g", job_id], capture_output=True, check=False)


def test_fifty_jobs_leave_no_watcher_behind(
    profile, daemon, services_env, request, jobs_killed_after
):
    """A job that ends normally leaves no guard process: after 50 jobs, each long enough
    for its watcher to set up and check, no process of the job's user is left in any of
    their folders."""
    _guarded_over_ssh(request, "core.direct")
    daemon(1)
    nodes = [
        _on_guarded(
            "core.direct",
            "echo hi > out.txt; sleep 1.5",
            {
                "quiet": {
                    "entry_point": "core.stalled_output",
                    "kwargs": {"path": "out.txt", "seconds": 60},
                }
            },
        )
        for _ in range(50)
    ]
    wait_for(nodes, lambda n: n.is_terminated, timeout=300)
    assert all(node.is_finished_ok for node in nodes), [n.exit_message for n in nodes]
    # Their watchers ran (the jobs outlived the first check) and stood down.
    assert all(
        b"stood down" in node.outputs.retrieved.get_object_content("_veglia_guard.log")
        for node in nodes
    )
    folders = [node.remote_workdir for node in nodes]
    assert _left_in(services_env["SSH_USER"], folders) == []


def test_a_job_scancel_ended_leaves_no_watcher_behind(
    profile, daemon, services_env, request, jobs_killed_after
):
    """A job ended by ``scancel`` from outside veglia takes its watcher with it."""
    _guarded_over_ssh(request, "core.slurm")
    user = services_env["SSH_USER"]
    daemon(1)
    node = _on_guarded(
        "core.slurm",
        "sleep 600",
        {
            "quiet": {
                "entry_point": "core.stalled_output",
                **_SLOW,
                "kwargs": {"path": "out.txt", "seconds": 600},
            }
        },
    )
    wait_for([node], lambda n: n.get_attribute("scheduler_state") == "running", timeout=120)
    time.sleep(3)  # the watcher set itself up and checked
    folders = [node.remote_workdir]
    assert len(_left_in(user, folders)) >= 3  # the job script, its watcher, the command
    subprocess.run(["scancel", node.job_id], check=True)
    wait_for([node], lambda n: n.is_terminated, timeout=120)
    _until(lambda: _job_gone("core.slurm", node), 30, "squeue to forget the job")
    _until(lambda: _left_in(user, folders) == [], 30, "no process left in the job's folder")


def test_a_guard_and_the_monitor_deciding_together_end_each_job_once(profile, daemon, tmp_path):
    """``core.walltime_guard`` at its default: its guard acts always, so the guard (every
    second on the node) and the monitor (every poll) reach the same wall time together."""
    _guarded_localhost(tmp_path / "heartbeat")
    daemon(1)
    nodes = []
    for _ in range(6):
        builder = ShellJob.get_builder()
        builder.command = orm.Str("sleep 600")
        builder.metadata.options.max_wallclock_seconds = 8
        builder.monitors = {
            "clock": {"entry_point": "core.walltime_guard", "kwargs": {"fraction": 0.5}}
        }
        nodes.append(engine.submit(builder))
    wait_for(nodes, lambda n: n.is_terminated, timeout=120)
    for node in nodes:
        assert node.exit_status == 150, node.exit_message
        assert node.exit_message.startswith("Monitor clock stopped the job: ran ")
        stops = [
            log.message
            for log in node.logs
            if "stops the job" in log.message or "stopped the job beside it" in log.message
        ]
        assert len(stops) == 1, stops
        assert [log.message for log in node.logs].count(f"Killed: {node.exit_message}") <= 1
        assert not _alive(int(node.job_id))


def test_a_guard_that_fails_leaves_the_job_running_and_says_why_in_its_log(
    profile, daemon, monitor_import_paths, monkeypatch
):
    """A guard whose command is missing on the node is switched off for the job, which runs
    to its end; the job's log says which guard and why. The heartbeat cannot be written
    (under /proc), so the guards count the daemon as away and run."""
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).parent))  # for the daemon's workers
    _guarded_localhost(Path("/proc/veglia-no-such-folder/heartbeat"))
    daemon(1)
    builder = ShellJob.get_builder()
    builder.command = orm.Str("echo hi > out.log; sleep 3; echo done")
    builder.monitors = {"broken": {"entry_point": "monitor_helpers:broken_guard"}}
    node = engine.submit(builder)
    wait_for([node], lambda n: n.is_terminated, timeout=60)
    assert node.is_finished_ok, node.exit_message
    warnings = [log.message for log in node.logs if log.levelname == "WARNING"]
    assert any(
        "guard broken (monitor_helpers:broken_guard) failed with status 127 and is off for "
        "this job" in message
        for message in warnings
    ), warnings
