"""RabbitMQ restarted under load: workers reconnect, nothing is lost or run twice."""

from __future__ import annotations

import time

from veglia import engine, orm
from veglia.entry_points import CalculationFactory
from veglia_fixtures.services import rabbitmqctl

ShellJob = CalculationFactory("core.shell")


def test_broker_restart_under_load(broker_profile, daemon, restartable_rabbitmq):
    daemon(2)
    nodes = [engine.submit(ShellJob, command=orm.Str(f"sleep 4; echo {i}")) for i in range(20)]
    deadline = time.monotonic() + 60
    while sum(n.refresh().job_id is not None for n in nodes) < 5:
        assert time.monotonic() < deadline
        time.sleep(0.2)
    rabbitmqctl("stop_app")
    time.sleep(5)
    rabbitmqctl("start_app")
    later = [engine.submit(ShellJob, command=orm.Str(f"echo late {i}")) for i in range(3)]
    deadline = time.monotonic() + 240
    everything = nodes + later
    while not all(n.refresh().is_terminated for n in everything):
        assert time.monotonic() < deadline, [(n.pk, n.process_state) for n in everything]
        time.sleep(0.5)
    assert all(n.is_finished_ok for n in everything), [n.exit_message for n in everything]
    assert [n.outputs.stdout.get_content() for n in nodes] == [f"{i}\n".encode() for i in range(20)]
    for node in everything:
        assert sum(log.message.startswith("submitted job") for log in node.logs) == 1
