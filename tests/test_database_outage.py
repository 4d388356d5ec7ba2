"""The database goes away under a running daemon: no process may end because of it.

PostgreSQL is reached through a relay the test cuts, which resets every open connection and
refuses new ones, as a server restart does. Jobs and a workflow are running at that moment.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from veglia import engine, orm
from veglia.engine.daemon import DaemonFiles
from veglia.entry_points import CalculationFactory
from veglia_fixtures.profiles import make_profile, wait_for

ShellJob = CalculationFactory("core.shell")
JOBS = 8


@pytest.mark.parametrize("with_broker", [False, True], ids=["database", "broker"])
def test_jobs_and_a_workflow_outlive_a_database_outage(
    with_broker, relayed_postgres, request, daemon, workflows, tmp_path
):
    options = {"storage.url": relayed_postgres["url"], "daemon.lease_timeout": "15"}
    if with_broker:
        options["broker.url"] = request.getfixturevalue("rabbitmq_url")
    profile = make_profile(**options)
    ledger = tmp_path / "ledger"
    daemon(2 if with_broker else 1)
    nodes = []
    for i in range(JOBS):
        builder = ShellJob.get_builder()
        builder.command = orm.Str(f"sleep {1 + i % 3}; echo token-{i} >> {ledger}")
        nodes.append(engine.submit(builder))
    pipeline = engine.submit(workflows.CountedShell, command=orm.Str("sleep 1"), times=orm.Int(3))
    wait_for([pipeline], lambda n: len(n.called) >= 1, timeout=60)

    relayed_postgres["stop"]()
    time.sleep(6)
    relayed_postgres["start"]()

    wait_for([*nodes, pipeline], lambda n: n.is_terminated, timeout=180)
    assert all(n.is_finished_ok for n in nodes), [(n.pk, n.exit_message) for n in nodes]
    assert pipeline.is_finished_ok, pipeline.exit_message
    assert len(pipeline.called) == 3
    assert sorted(ledger.read_text().split()) == sorted(f"token-{i}" for i in range(JOBS))
    for node in nodes:
        assert sum(log.message.startswith("submitted job") for log in node.logs) == 1
    log = Path(DaemonFiles(profile).log).read_text()
    assert "database" in log and "did not answer" in log, "the outage went unnoticed"
