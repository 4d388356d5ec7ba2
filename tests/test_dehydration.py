"""Waiting processes are dehydrated: held by their worker as database rows, not in memory,
and woken when their job changes, their children end, or a kill, pause or play comes."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest

from veglia import engine, orm
from veglia.engine.daemon import DaemonFiles
from veglia.entry_points import CalculationFactory
from veglia_fixtures.profiles import pid_alive, wait_for
from veglia_fixtures.services import rabbitmqctl

ShellJob = CalculationFactory("core.shell")


@pytest.fixture
def profile(profile):
    return _dehydrating(profile)


@pytest.fixture
def broker_profile(broker_profile):
    return _dehydrating(broker_profile)


def _dehydrating(profile):
    from veglia.config import Config

    Config().set_option(profile.name, "daemon.dehydrate", "yes")
    profile.options["daemon.dehydrate"] = True
    return profile


def _counts(profile) -> list[dict]:
    """Each worker's status file (written every second)."""
    files = DaemonFiles(profile)
    counts = []
    for worker in files.read_status().get("workers", []):
        try:
            counts.append(json.loads(files.worker_status(worker["pid"]).read_text()))
        except (OSError, ValueError):
            counts.append({"pid": worker["pid"]})
    return counts


def _until(condition, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        assert time.monotonic() < deadline, what
        time.sleep(0.1)
    return value


def _dehydrated(profile) -> int:
    return sum(c.get("dehydrated", 0) for c in _counts(profile))


def test_waiting_jobs_are_dehydrated_and_daemon_status_counts_them(profile, daemon, run_cli):
    daemon(1)
    nodes = [engine.submit(ShellJob, command=orm.Str(f"sleep 6; echo {i}")) for i in range(12)]
    _until(lambda: _dehydrated(profile) >= 10, 60, f"not dehydrated: {_counts(profile)}")
    (worker,) = _counts(profile)
    assert worker["live"] <= 2, worker
    status = run_cli("-p", "test", "daemon", "status")
    assert status.exit_code == 0
    assert "Live" in status.stdout and "Dehydrated" in status.stdout, status.stdout
    raw = run_cli("-p", "test", "daemon", "status", "--raw").stdout.split()
    assert int(raw[-1]) >= 10, raw  # the dehydrated column

    wait_for(nodes, lambda n: n.is_terminated, timeout=120)
    assert all(n.is_finished_ok for n in nodes), [n.exit_message for n in nodes]
    assert [n.outputs.stdout.get_content() for n in nodes] == [f"{i}\n".encode() for i in range(12)]
    for node in nodes:
        assert sum(log.message.startswith("submitted job") for log in node.logs) == 1
    _until(lambda: _dehydrated(profile) == 0, 10, "a finished job still counted")


def test_with_dehydration_off_waiting_jobs_stay_live(profile, daemon, run_cli):
    assert run_cli("-p", "test", "config", "set", "daemon.dehydrate", "no").exit_code == 0
    daemon(1)
    nodes = [engine.submit(ShellJob, command=orm.Str(f"sleep 5; echo {i}")) for i in range(3)]
    wait_for(nodes, lambda n: n.get_attribute("scheduler_state") == "running", timeout=60)
    time.sleep(2)  # many polls: with dehydration on, each job sleeps after its second
    (worker,) = _counts(profile)
    assert (worker["live"], worker["dehydrated"]) == (3, 0), worker
    # What each of them waits for, in the daemon log (docs/daemon.md): their poll.
    os.kill(worker["pid"], signal.SIGUSR1)
    log = DaemonFiles(profile).log
    _until(lambda: "tasks (SIGUSR1)" in log.read_text(), 10, "no task list in the log")
    _until(lambda: log.read_text().count(" next_update") >= 3, 10, log.read_text()[-3000:])
    wait_for(nodes, lambda n: n.is_terminated, timeout=60)
    assert all(n.is_finished_ok for n in nodes), [n.exit_message for n in nodes]


@pytest.mark.parametrize("with_broker", [False, True], ids=["database", "broker"])
def test_a_dehydrated_job_is_paused_played_and_killed_at_once(
    with_broker, request, daemon, run_cli
):
    """At once: not at the next poll, which is 30 s away here. (How soon on a quiet machine,
    a fraction of a second, is measured by bench/dehydrated.py.)"""
    profile = request.getfixturevalue("broker_profile" if with_broker else "profile")
    daemon(1)
    node = engine.submit(ShellJob, command=orm.Str("sleep 120"))
    wait_for([node], lambda n: n.get_attribute("scheduler_state") == "running", timeout=60)
    _until(lambda: _dehydrated(profile) == 1, 30, "the job was not dehydrated")
    assert run_cli("-p", "test", "config", "set", "engine.poll_interval", "30").exit_code == 0
    time.sleep(1.5)  # the worker follows `config set` every half second

    def timed(action: str) -> float:
        start = time.monotonic()
        result = run_cli("-p", "test", "process", action, str(node.pk))
        assert result.exit_code == 0, result.output
        return time.monotonic() - start

    assert timed("pause") < 10
    assert node.refresh().paused
    assert timed("play") < 10
    assert not node.refresh().paused
    assert timed("kill") < 10
    assert node.refresh().is_killed
    _until(lambda: not pid_alive(node.job_id), 10, "the job survived its kill")
    _until(lambda: _dehydrated(profile) == 0, 5, "a killed job still counted")


def test_a_job_played_after_a_pause_ends_when_dehydrated_again(profile, daemon, run_cli):
    """A play is checkpointed, as the pause is: the job dehydrates again after it and, woken
    when its scheduler job ends, goes on rather than waiting paused for a play that came."""
    daemon(1)
    node = engine.submit(ShellJob, command=orm.Str("sleep 12; echo done"))
    wait_for([node], lambda n: n.get_attribute("scheduler_state") == "running", timeout=60)
    _until(lambda: _dehydrated(profile) == 1, 30, "the job was not dehydrated")
    assert run_cli("-p", "test", "process", "pause", str(node.pk)).exit_code == 0
    assert node.refresh().paused
    assert run_cli("-p", "test", "process", "play", str(node.pk)).exit_code == 0
    _until(lambda: _dehydrated(profile) == 1, 30, "the played job was not dehydrated again")
    assert node.refresh().get_attribute("scheduler_state") == "running"  # it sleeps through
    wait_for([node], lambda n: n.is_terminated, timeout=60)
    assert node.is_finished_ok, node.exit_message
    assert node.outputs.stdout.get_content() == b"done\n"


def test_a_job_whose_monitors_have_intervals_sleeps_between_their_calls(profile, daemon):
    """Each of its monitors has a minimum_poll_interval: the job sleeps until the first is
    due, and its monitor still stops it."""
    daemon(1)
    builder = ShellJob.get_builder()
    builder.command = orm.Str("for i in $(seq 60); do echo line-$i >> out.txt; sleep 0.5; done")
    builder.monitors = {
        "twelve": {
            "entry_point": "core.file_pattern",
            "kwargs": {"path": "out.txt", "pattern": "^line-12$"},
            "minimum_poll_interval": 3,
        }
    }
    node = engine.submit(builder)
    wait_for([node], lambda n: n.get_attribute("scheduler_state") == "running", timeout=60)
    _until(lambda: _dehydrated(profile) == 1, 20, "the monitored job was not dehydrated")
    wait_for([node], lambda n: n.is_terminated, timeout=60)
    assert node.exit_status == 150, node.exit_message  # STOPPED_BY_MONITOR
    assert "line-12" in node.exit_message


def test_workflows_waiting_for_children_never_starve_them(
    broker_profile, workflows, daemon, run_cli
):
    """aiida-core's deadlock (its issue "Deadlock when creating many processes"): more
    waiting workflows than a worker takes at once, their children queued behind them."""
    assert run_cli("-p", "test", "config", "set", "daemon.worker_prefetch", "2").exit_code == 0
    daemon(1)
    flows = [
        engine.submit(workflows.CountedShell, command=orm.Str("sleep 0.5"), times=orm.Int(2))
        for _ in range(6)
    ]
    wait_for(flows, lambda n: n.is_terminated, timeout=120)
    assert all(n.is_finished_ok for n in flows), [n.exit_message for n in flows]
    assert all(len(n.called) == 2 for n in flows)


def test_the_old_slot_option_says_what_replaced_it(profile, run_cli):
    result = run_cli("-p", "test", "config", "set", "daemon.worker_process_slots", "500")
    assert result.exit_code != 0
    assert "daemon.worker_prefetch" in result.output and "Traceback" not in result.output


def test_dehydrated_jobs_survive_a_killed_worker_and_a_broker_restart_together(
    broker_profile, daemon, restartable_rabbitmq
):
    daemon(2)
    nodes = [engine.submit(ShellJob, command=orm.Str(f"sleep 5; echo {i}")) for i in range(24)]
    _until(lambda: _dehydrated(broker_profile) >= 8, 60, "no job dehydrated")
    victim = max(_counts(broker_profile), key=lambda c: c.get("dehydrated", 0))
    assert victim["dehydrated"] >= 1
    os.kill(victim["pid"], signal.SIGKILL)
    rabbitmqctl("stop_app")
    time.sleep(3)
    rabbitmqctl("start_app")
    wait_for(nodes, lambda n: n.is_terminated, timeout=240)
    assert all(n.is_finished_ok for n in nodes), [(n.pk, n.exit_message) for n in nodes]
    assert [n.outputs.stdout.get_content() for n in nodes] == [f"{i}\n".encode() for i in range(24)]
    assert len({n.job_id for n in nodes}) == 24
    for node in nodes:
        assert sum(log.message.startswith("submitted job") for log in node.logs) == 1


def test_dehydrated_jobs_go_on_after_the_daemon_restarts(broker_profile, daemon, run_cli):
    """Their broker tasks were acknowledged when they dehydrated: the daemon's repair
    queues them again once their worker is gone."""
    daemon(1)
    nodes = [engine.submit(ShellJob, command=orm.Str(f"sleep 4; echo {i}")) for i in range(6)]
    _until(lambda: _dehydrated(broker_profile) >= 4, 60, "no job dehydrated")
    assert run_cli("-p", "test", "daemon", "restart").exit_code == 0
    wait_for(nodes, lambda n: n.is_terminated, timeout=120)
    assert all(n.is_finished_ok for n in nodes), [(n.pk, n.exit_message) for n in nodes]
    for node in nodes:
        assert sum(log.message.startswith("submitted job") for log in node.logs) == 1


def _asleep_paused(profile, nodes) -> bool:
    """The nodes paused, and as many processes dehydrated, none live, in status files
    written after this call: they sleep paused."""
    since = time.time()

    def asleep() -> bool:
        counts = _counts(profile)
        return (
            all(n.refresh().paused for n in nodes)
            and all(c.get("time", 0) > since and c.get("live") == 0 for c in counts)
            and sum(c.get("dehydrated", 0) for c in counts) == len(nodes)
        )

    return _until(asleep, 10, f"not asleep paused: {_counts(profile)}")


@pytest.mark.parametrize("with_broker", [False, True], ids=["database", "broker"])
def test_paused_jobs_sleep_and_leave_the_worker_free_to_take_others(
    with_broker, request, daemon, run_cli
):
    """More paused jobs than the worker steps at once (its prefetch): they no longer keep
    it from taking a new job, and `daemon status` counts them as dehydrated."""
    profile = request.getfixturevalue("broker_profile" if with_broker else "profile")
    assert run_cli("-p", "test", "config", "set", "daemon.worker_prefetch", "3").exit_code == 0
    paused = [engine.submit(ShellJob, command=orm.Str(f"echo {i}")) for i in range(5)]
    for node in paused:
        result = run_cli("-p", "test", "process", "pause", str(node.pk), "-m", "held by me")
        assert result.exit_code == 0, result.output
    daemon(1)
    _until(lambda: _dehydrated(profile) == 5, 30, f"paused jobs not asleep: {_counts(profile)}")
    new = engine.submit(ShellJob, command=orm.Str("echo new"))
    wait_for([new], lambda n: n.is_terminated, timeout=30)
    assert new.is_finished_ok, new.exit_message
    raw = run_cli("-p", "test", "daemon", "status", "--raw").stdout.split()
    assert int(raw[-1]) == 5, raw  # the dehydrated column
    listed = run_cli("-p", "test", "process", "list", "--paused").stdout.split()
    assert {str(n.pk) for n in paused} <= set(listed), listed
    shown = run_cli("-p", "test", "process", "show", str(paused[0].pk)).stdout
    assert "held by me" in shown, shown
    assert not any(n.refresh().is_terminated for n in paused)

    assert run_cli("-p", "test", "process", "play", "--all").exit_code == 0
    wait_for(paused, lambda n: n.is_terminated, timeout=60)
    assert all(n.is_finished_ok for n in paused), [n.exit_message for n in paused]
    assert [n.outputs.stdout.get_content() for n in paused] == [f"{i}\n".encode() for i in range(5)]
    _until(lambda: _dehydrated(profile) == 0, 10, "a finished job still counted")


@pytest.mark.parametrize("with_broker", [False, True], ids=["database", "broker"])
def test_a_paused_job_sleeps_and_is_played_and_killed_at_once(
    with_broker, request, daemon, run_cli
):
    """Paused while live, a job leaves memory; its scheduler job is not polled meanwhile.
    Played, it goes on (polling, then sleeping between polls); paused again and killed, it
    ends killed and its scheduler job is cancelled, each within about a second."""
    profile = request.getfixturevalue("broker_profile" if with_broker else "profile")
    daemon(1)
    node = engine.submit(ShellJob, command=orm.Str("sleep 120"))
    wait_for([node], lambda n: n.get_attribute("scheduler_state") == "running", timeout=60)

    def timed(*args: str) -> float:
        start = time.monotonic()
        result = run_cli("-p", "test", "process", *args, str(node.pk))
        assert result.exit_code == 0, result.output
        return time.monotonic() - start

    assert timed("pause") < 3
    _asleep_paused(profile, [node])
    polled = node.refresh().get_attribute("last_job_info")
    time.sleep(1)  # ten poll intervals: a live job would have been polled
    assert node.refresh().get_attribute("last_job_info") == polled

    assert timed("play") < 3
    assert not node.refresh().paused
    # It polls again, and between polls sleeps as any waiting job does.
    _until(lambda: node.refresh().get_attribute("last_job_info") != polled, 10, "not polled")
    _until(lambda: _dehydrated(profile) == 1, 30, "the played job did not sleep again")

    assert timed("pause") < 3
    _asleep_paused(profile, [node])
    assert timed("kill") < 3
    assert node.refresh().is_killed
    _until(lambda: not pid_alive(node.job_id), 10, "the job survived its kill")
    _until(lambda: _dehydrated(profile) == 0, 5, "a killed job still counted")


@pytest.mark.parametrize("with_broker", [False, True], ids=["database", "broker"])
def test_a_paused_sleeper_of_a_killed_worker_is_taken_again_still_paused(
    with_broker, request, daemon, run_cli
):
    profile = request.getfixturevalue("broker_profile" if with_broker else "profile")
    assert run_cli("-p", "test", "config", "set", "daemon.lease_timeout", "3").exit_code == 0
    daemon(1)
    node = engine.submit(ShellJob, command=orm.Str("sleep 2; echo done"))
    wait_for([node], lambda n: n.get_attribute("scheduler_state") == "running", timeout=60)
    assert run_cli("-p", "test", "process", "pause", str(node.pk)).exit_code == 0
    _asleep_paused(profile, [node])
    (victim,) = _counts(profile)
    os.kill(victim["pid"], signal.SIGKILL)

    def taken_again() -> bool:
        counts = _counts(profile)
        return any(c.get("pid") != victim["pid"] and c.get("dehydrated") == 1 for c in counts)

    _until(taken_again, 90, f"not taken again: {_counts(profile)}")
    assert not node.refresh().is_terminated
    _asleep_paused(profile, [node])

    assert run_cli("-p", "test", "process", "play", str(node.pk)).exit_code == 0
    wait_for([node], lambda n: n.is_terminated, timeout=60)
    assert node.is_finished_ok, node.exit_message
    assert node.outputs.stdout.get_content() == b"done\n"
    assert sum(log.message.startswith("submitted job") for log in node.logs) == 1
