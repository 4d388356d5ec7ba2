"""Faults together: worker kills, a broker restart and an sshd outage in one run of 40 SLURM
jobs. Every job must end by itself, and each must have run exactly once."""

from __future__ import annotations

import os
import signal
import time
import uuid
from pathlib import Path

from veglia import engine, orm
from veglia.config import Config
from veglia.engine.daemon import DaemonFiles
from veglia.entry_points import CalculationFactory
from veglia_fixtures.profiles import wait_for
from veglia_fixtures.services import rabbitmqctl

ShellJob = CalculationFactory("core.shell")
JOBS = 40


def _kill_a_worker(profile, which: int) -> int:
    workers = DaemonFiles(profile).read_status()["workers"]
    pid = workers[which % len(workers)]["pid"]
    os.kill(pid, signal.SIGKILL)
    return pid


def test_worker_kills_a_broker_restart_and_an_outage_strand_no_job(
    broker_profile,
    slurm,
    private_sshd,
    restartable_rabbitmq,
    daemon,
):
    Config().set_option("test", "daemon.lease_timeout", "10")
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
        (5, lambda: _kill_a_worker(broker_profile, 0)),
        (10, private_sshd["stop"]),
        (15, lambda: _kill_a_worker(broker_profile, 1)),
        (20, lambda: rabbitmqctl("stop_app")),
        (23, lambda: rabbitmqctl("start_app")),
        (28, lambda: _kill_a_worker(broker_profile, 0)),
        (40, private_sshd["start"]),
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
