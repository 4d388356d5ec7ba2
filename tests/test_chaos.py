"""Faults together: worker kills, a broker restart, an sshd outage and a database outage in
one run of 40 SLURM jobs. Every job must end by itself, and each must have run exactly once."""

from __future__ import annotations

import os
import signal
import time
import uuid
from pathlib import Path

from veglia import engine, orm
from veglia.engine.daemon import DaemonFiles
from veglia.entry_points import CalculationFactory
from veglia_fixtures.profiles import make_profile, wait_for
from veglia_fixtures.services import rabbitmqctl

ShellJob = CalculationFactory("core.shell")
JOBS = 40


def _kill_a_worker(profile, which: int) -> int:
    workers = DaemonFiles(profile).read_status()["workers"]
    pid = workers[which % len(workers)]["pid"]
    os.kill(pid, signal.SIGKILL)
    return pid


def test_worker_kills_a_broker_restart_and_outages_strand_no_job(
    rabbitmq_url,
    relayed_postgres,
    slurm,
    private_sshd,
    restartable_rabbitmq,
    daemon,
):
    profile = make_profile(
        **{
            "storage.url": relayed_postgres["url"],
            "broker.url": rabbitmq_url,
            "daemon.lease_timeout": "10",
        }
    )
    private_sshd["computer"]("chaos", "core.slurm")
    ledger = Path(f"/home/vegliatest/chaos-{uuid.uuid4().hex[:8]}.log")
    daemon(2)
    nodes = []
    for i in range(JOBS):
        builder = ShellJob.get_builder()
        builder.command = orm.Str(f"echo token-{i} >> {ledger}; sleep {2 + i % 5}")
        builder.metadata.computer = "chaos"
        builder.metadata.options.max_wallclock_seconds = 60
        nodes.append(engine.submit(builder))

    start = time.monotonic()
    events = [
        (5, lambda: _kill_a_worker(profile, 0)),
        (10, private_sshd["stop"]),
        (15, lambda: _kill_a_worker(profile, 1)),
        (20, lambda: rabbitmqctl("stop_app")),
        (23, lambda: rabbitmqctl("start_app")),
        (28, lambda: _kill_a_worker(profile, 0)),
        # Longer than the lease timeout: the workers fence themselves and are restarted.
        (32, relayed_postgres["stop"]),
        (40, private_sshd["start"]),
        (46, relayed_postgres["start"]),
    ]
    for at, event in events:
        time.sleep(max(0.0, at - (time.monotonic() - start)))
        event()

    try:
        wait_for(nodes, lambda n: n.is_terminated, timeout=480)
        assert all(n.is_finished_ok for n in nodes), [(n.pk, n.exit_message) for n in nodes]
        lines = ledger.read_text().split()
        assert sorted(lines) == sorted(f"token-{i}" for i in range(JOBS))  # each ran once
        for node in nodes:
            assert sum(log.message.startswith("submitted job") for log in node.logs) == 1
    finally:
        ledger.unlink(missing_ok=True)
