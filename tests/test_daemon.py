"""The daemon runs submitted jobs, survives a killed worker, and kills jobs on request."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time

from veglia import engine, orm
from veglia.engine.daemon import DaemonFiles
from veglia.entry_points import CalculationFactory
from veglia_fixtures.profiles import pid_alive, wait_for

ShellJob = CalculationFactory("core.shell")


def _workers(profile):
    return DaemonFiles(profile).read_status()["workers"]


def test_daemon_without_broker_runs_submitted_jobs(profile, daemon, run_cli):
    daemon(1)
    nodes = [engine.submit(ShellJob, command=orm.Str(f"echo {i}")) for i in range(3)]
    wait_for(nodes, lambda n: n.is_terminated, timeout=60)
    assert [n.outputs.stdout.get_content() for n in nodes] == [b"0\n", b"1\n", b"2\n"]
    status = run_cli("-p", "test", "daemon", "status", "--raw")
    assert status.exit_code == 0 and len(status.stdout.splitlines()) == 1
    # The worker's counts, as the benches in bench/ read them from its status file.
    (worker,) = _workers(profile)
    counts: dict = {}
    deadline = time.monotonic() + 10
    while not counts.get("scheduler_queries"):  # written once a second
        assert time.monotonic() < deadline, counts
        time.sleep(0.2)
        counts = json.loads(DaemonFiles(profile).worker_status(worker["pid"]).read_text())
    assert counts["transport_opens"] >= 1
    for key in ("monitor_calls", "file_reads", "monitor_cycles", "monitor_cycle_seconds"):
        assert counts[key] >= 0, key
    assert counts["child_queries"] == 0  # no workflow waited on children


def test_killed_worker_loses_nothing_and_submits_nothing_twice(broker_profile, daemon):
    daemon(2)
    nodes = [engine.submit(ShellJob, command=orm.Str(f"sleep 2; echo {i}")) for i in range(50)]
    wait_for(nodes[:10], lambda n: n.job_id is not None, timeout=60)
    victim = _workers(broker_profile)[0]["pid"]
    os.kill(victim, signal.SIGKILL)
    wait_for(nodes, lambda n: n.is_terminated, timeout=180)

    assert all(n.is_finished_ok for n in nodes), [(n.pk, n.exit_message) for n in nodes]
    assert [n.outputs.stdout.get_content() for n in nodes] == [f"{i}\n".encode() for i in range(50)]
    job_ids = [n.job_id for n in nodes]
    assert len(set(job_ids)) == 50
    for node in nodes:
        assert sum(log.message.startswith("submitted job") for log in node.logs) == 1
    workers = _workers(broker_profile)
    assert victim not in [w["pid"] for w in workers]
    assert sum(w["restarts"] for w in workers) == 1


def test_kill_cancels_the_scheduler_job(broker_profile, daemon, run_cli):
    daemon(1)
    node = engine.submit(ShellJob, command=orm.Str("sleep 120"))
    wait_for([node], lambda n: n.get_attribute("scheduler_state") == "running", timeout=60)
    assert pid_alive(node.job_id)
    result = run_cli("-p", "test", "process", "kill", str(node.pk))
    assert result.exit_code == 0, result.output
    wait_for([node], lambda n: n.is_terminated, timeout=60)
    assert node.is_killed
    deadline = time.monotonic() + 10
    while pid_alive(node.job_id):
        assert time.monotonic() < deadline, "the job survived its kill"
        time.sleep(0.1)
    # The cancel returns, and says so, once the job's processes are gone: just after.
    wait_for([node], lambda n: any("cancelled job" in log.message for log in n.logs), timeout=30)


def test_pause_and_play_without_broker(profile, daemon, run_cli):
    daemon(1)
    node = engine.submit(ShellJob, command=orm.Str("sleep 8; echo ok"))
    wait_for([node], lambda n: n.job_id is not None, timeout=60)
    assert run_cli("-p", "test", "process", "pause", str(node.pk)).exit_code == 0
    assert node.refresh().paused
    time.sleep(9)
    assert not node.refresh().is_terminated  # paused: not even retrieved
    assert run_cli("-p", "test", "process", "play", "--all").exit_code == 0
    wait_for([node], lambda n: n.is_terminated, timeout=60)
    assert node.is_finished_ok
    assert json.dumps(node.get_attribute("paused")) == "false"


def test_the_supervisor_loads_neither_the_engine_nor_the_database_nor_the_broker(
    broker_profile, daemon, run_cli
):
    """The supervisor only starts and restarts workers, so it stays a few MB (measured in
    bench/daemon_memory.py); the first worker repairs stranded processes instead."""
    daemon(2)
    loaded = set(DaemonFiles(broker_profile).read_status()["modules"])
    assert "veglia.engine.daemon.supervisor" in loaded
    heavy = {
        "sqlalchemy",
        "plumpy",
        "kiwipy",
        "aio_pika",
        "paramiko",
        "veglia.engine.calcjob",
        "veglia.engine.process",
        "veglia.storage",
        "veglia.orm.nodes",
    }
    assert not heavy & loaded, sorted(heavy & loaded)
    deadline = time.monotonic() + 60  # the workers write their status once they run
    while "Stranded" not in (status := run_cli("-p", "test", "daemon", "status")).stdout:
        assert time.monotonic() < deadline, status.stdout
        time.sleep(0.5)
    assert "Stranded processes queued again: 0" in status.stdout


def test_deleting_a_profile_deletes_its_queue_and_waiting_tasks_on_the_broker(
    broker_profile, run_cli
):
    """What a deleted profile would leave on RabbitMQ for good (its queue of tasks no daemon
    will take, its exchanges) goes with it; a broker that does not answer is said, and the
    profile is deleted all the same."""
    from veglia.engine.daemon.broker_tasks import _close
    from veglia.engine.daemon.reconcile import queued_tasks
    from veglia_fixtures.profiles import make_profile

    engine.submit(ShellJob, command=orm.Str("true"))  # no daemon: its task waits
    _close()  # the broker has confirmed it
    assert queued_tasks(broker_profile) == 1
    result = run_cli("profile", "delete", "test", "--force")
    assert result.exit_code == 0, result.output
    assert queued_tasks(broker_profile) == 0

    make_profile(**{"broker.url": "amqp://guest:guest@127.0.0.1:1/"})
    result = run_cli("profile", "delete", "test", "--force")
    assert result.exit_code == 0, result.output
    assert "Cannot delete the queues of profile test" in result.output
    assert "Deleted profile 'test'" in result.output


def test_a_worker_hears_its_signals_when_its_loop_is_flooded_with_wake_ups():
    """A busy worker's threads wake its loop (``call_soon_threadsafe``) faster than it reads
    the wake-ups, and its self-pipe fills: a SIGTERM (``daemon stop``) or SIGUSR1 must
    still be heard, not dropped with the pipe's byte."""
    from veglia.engine.daemon.worker import on_signals

    loop = asyncio.new_event_loop()
    previous = signal.getsignal(signal.SIGUSR1)
    heard: list[str] = []
    try:
        on_signals(loop, {signal.SIGUSR1: lambda: heard.append("SIGUSR1")})
        # The pipe as such a worker's is: full (private, as the condition is asyncio's own).
        wake_up = loop._csock  # type: ignore[attr-defined]
        wake_up.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            while True:
                wake_up.send(b"\0" * 4096)
        os.kill(os.getpid(), signal.SIGUSR1)
        loop.run_until_complete(asyncio.sleep(0.3))
        assert heard == ["SIGUSR1"]
    finally:
        signal.signal(signal.SIGUSR1, previous)
        loop.close()
