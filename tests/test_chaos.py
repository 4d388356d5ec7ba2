"""Faults together: worker kills, a broker restart, an sshd outage and a database outage in
one run of 40 SLURM jobs, while the daemon takes in a pipeline setup's folder on the same
cluster as files arrive. Every job must end by itself, each must have run exactly once, and
each element of the setup must have had exactly one run."""

from __future__ import annotations

import os
import shutil
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
    from test_pipeline_intake import make_setup, runs_of

    profile = make_profile(
        **{
            "storage.url": relayed_postgres["url"],
            "broker.url": rabbitmq_url,
            "daemon.lease_timeout": "10",
            "pipeline.poll_interval": "1",
        }
    )
    private_sshd["computer"]("chaos", "core.slurm")
    ledger = Path(f"/home/vegliatest/chaos-{uuid.uuid4().hex[:8]}.log")
    # The setup's folder, on the cluster; files arrive in it while the faults go on (put
    # there directly: the sshd is one of the faults).
    inbox = ledger.with_suffix(".inbox")
    inbox.mkdir()
    element_ledger = ledger.with_suffix(".elements")
    arrived: list[int] = []

    def arrive(count: int) -> None:
        for i in range(len(arrived), len(arrived) + count):
            path = inbox / f"e{i:02d}.txt"
            path.write_text(f"element-{i}\n")
            os.chown(path, ledger.parent.stat().st_uid, ledger.parent.stat().st_gid)
            arrived.append(i)

    os.chown(inbox, ledger.parent.stat().st_uid, ledger.parent.stat().st_gid)
    arrive(6)
    make_setup(
        "chaos-intake",
        str(inbox),
        computer="chaos",
        source_computer="chaos",
        settled=0,
        command=f"cat *.txt >> {element_ledger}; sleep 1",
        wallclock=60,  # the default partition's limit
    )
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
        (8, lambda: arrive(4)),
        (10, private_sshd["stop"]),
        (12, lambda: arrive(4)),
        (15, lambda: _kill_a_worker(profile, 1)),
        (20, lambda: rabbitmqctl("stop_app")),
        (23, lambda: rabbitmqctl("start_app")),
        (28, lambda: _kill_a_worker(profile, 0)),
        # Longer than the lease timeout: the workers fence themselves and are restarted.
        (32, relayed_postgres["stop"]),
        (35, lambda: arrive(4)),
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

        # The pipeline setup: one run per element, each run once on the cluster.
        deadline = time.monotonic() + 240
        while len(runs_of("chaos-intake")) < len(arrived):
            assert time.monotonic() < deadline, runs_of("chaos-intake")
            time.sleep(1)
        runs = runs_of("chaos-intake")
        assert {identity: len(pks) for identity, pks in runs.items()} == {
            f"e{i:02d}.txt": 1 for i in arrived
        }
        elements = [orm.load_node(pks[0]) for pks in runs.values()]
        wait_for(elements, lambda n: n.is_terminated, timeout=240)
        assert all(n.is_finished_ok for n in elements), [(n.pk, n.exit_message) for n in elements]
        assert sorted(element_ledger.read_text().split()) == sorted(f"element-{i}" for i in arrived)
    finally:
        ledger.unlink(missing_ok=True)
        element_ledger.unlink(missing_ok=True)
        shutil.rmtree(inbox, ignore_errors=True)
