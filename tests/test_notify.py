"""Notifications: one e-mail per event, over a real SMTP server on loopback (aiosmtpd)."""

from __future__ import annotations

import time

import pytest

from veglia import engine, orm
from veglia.engine import CalcJob
from veglia.entry_points import CalculationFactory
from veglia_fixtures.profiles import make_profile, wait_for

ShellJob = CalculationFactory("core.shell")


@pytest.fixture
def notified_profile(veglia_home, smtp_server):
    from veglia.engine.runner import set_runner

    profile = make_profile(
        **{
            "notify.email": "ada@example.org",
            "notify.smtp_host": "127.0.0.1",
            "notify.smtp_port": str(smtp_server.port),
            "notify.from": "veglia@example.org",
        }
    )
    yield profile
    set_runner(None)


class Broken(CalcJob):
    """A calculation whose preparation has a bug."""

    def prepare_for_submission(self, folder):
        raise RuntimeError("a bug in prepare_for_submission")


def test_an_excepted_process_sends_one_email(notified_profile, smtp_server):
    with pytest.raises(RuntimeError):
        engine.run_get_node(Broken)
    deadline = time.monotonic() + 10
    while not smtp_server.messages:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    recipients, message = smtp_server.messages[0]
    assert recipients == ["ada@example.org"]
    assert message["X-Veglia-Event"] == "process_excepted"
    assert "excepted" in message["Subject"] and "a bug in prepare_for_submission" in str(
        message.get_payload()
    )


def test_each_address_of_notify_email_gets_the_email(veglia_home, smtp_server):
    from veglia.engine.runner import set_runner

    make_profile(
        **{
            "notify.email": "ada@example.org,ops@example.org",
            "notify.smtp_host": "127.0.0.1",
            "notify.smtp_port": str(smtp_server.port),
        }
    )
    with pytest.raises(RuntimeError):
        engine.run_get_node(Broken)
    deadline = time.monotonic() + 10
    while not smtp_server.messages:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    recipients, message = smtp_server.messages[0]
    assert recipients == ["ada@example.org", "ops@example.org"]
    assert message["To"] == "ada@example.org, ops@example.org"
    set_runner(None)


def test_an_unreachable_computer_is_reported_once_for_all_its_jobs(
    notified_profile, smtp_server, daemon
):
    computer = orm.Computer(
        label="gone",
        hostname="127.0.0.1",
        transport_type="core.ssh",
        scheduler_type="core.direct",
        properties={"workdir": "/tmp/x", "safe_interval": 0.0},
    ).store()
    computer.configure(
        port=1, host_key_checking=False, look_for_keys=False, allow_agent=False, timeout=2.0
    )
    daemon(1)
    nodes = []
    for _ in range(3):
        builder = ShellJob.get_builder()
        builder.command = orm.Str("true")
        builder.metadata.computer = "gone"
        nodes.append(engine.submit(builder))
    wait_for(nodes, lambda n: n.paused, timeout=90)
    time.sleep(1)
    events = [m["X-Veglia-Event"] for _, m in smtp_server.messages]
    assert events == ["computer_unreachable"]
    assert "computer gone is unreachable" in smtp_server.messages[0][1]["Subject"]


def test_a_computer_that_comes_back_is_reported_once_and_its_jobs_go_on(
    notified_profile, smtp_server, daemon, private_sshd
):
    private_sshd["computer"]("wobbly")
    daemon(1)
    nodes = []
    for i in range(2):
        builder = ShellJob.get_builder()
        builder.command = orm.Str(f"sleep 4; echo {i}")
        builder.metadata.computer = "wobbly"
        nodes.append(engine.submit(builder))
    wait_for(nodes, lambda n: n.job_id is not None, timeout=60)
    private_sshd["stop"]()
    wait_for(nodes, lambda n: n.paused, timeout=60)
    private_sshd["start"]()
    wait_for(nodes, lambda n: n.is_finished_ok, timeout=120)
    time.sleep(1)
    events = [m["X-Veglia-Event"] for _, m in smtp_server.messages]
    assert events == ["computer_unreachable", "computer_back"]
    assert "computer wobbly is back" in smtp_server.messages[1][1]["Subject"]


def test_notify_channel_failures_do_not_break_the_engine(veglia_home):
    from veglia.engine.runner import set_runner

    make_profile(
        **{
            "notify.email": "ada@example.org",
            "notify.smtp_host": "127.0.0.1",
            "notify.smtp_port": "1",
        }
    )
    with pytest.raises(RuntimeError):
        engine.run_get_node(Broken)  # the SMTP server is not there: only logged
    set_runner(None)
