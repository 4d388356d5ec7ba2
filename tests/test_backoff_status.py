"""A calc job whose transport step fails says so while it waits to try again: ``process
list`` shows the attempt and the time to the next one, and an outage's "unreachable since"
is the first failed attempt, not the pause that came after the last one.

The computer is ``core.ssh`` on a port of this machine that nobody listens on: every
connection is refused at once, no sshd needed.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable
from typing import Any

import pytest

from veglia import orm
from veglia.engine.runner import get_runner
from veglia.entry_points import CalculationFactory
from veglia.orm.attributes import BACKOFF
from veglia.views.rows import process_status
from veglia_fixtures.profiles import make_profile

ShellJob = CalculationFactory("core.shell")


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # free once closed: connections are refused


def _away_computer() -> orm.Computer:
    computer = orm.Computer(
        label="away",
        hostname="127.0.0.1",
        transport_type="core.ssh",
        scheduler_type="core.direct",
        properties={"workdir": "/tmp/veglia-away", "safe_interval": 0.0},
    ).store()
    computer.configure(port=_closed_port(), timeout=2, allow_agent=False, look_for_keys=False)
    return computer


def _start_job() -> Any:
    _away_computer()
    builder = ShellJob.get_builder()
    builder.command = orm.Str("echo hello")
    builder.metadata.computer = "away"
    runner = get_runner()
    process = runner.instantiate(ShellJob, builder.to_dict())
    task = runner.loop.create_task(process.step_until_terminated())
    return process, task


def _step_until(condition: Callable[[], bool], timeout: float = 30) -> None:
    """Step the runner's loop (the foreground job on it) until ``condition`` holds."""

    async def wait() -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            assert time.monotonic() < deadline, "the job never got there"
            await asyncio.sleep(0.05)

    get_runner().loop.run_until_complete(wait())


def _kill(process: Any, task: asyncio.Task) -> None:
    loop = get_runner().loop
    process.kill("test over")
    loop.run_until_complete(asyncio.wait([task], timeout=5))
    if not task.done():  # paused for the outage, in the foreground: nobody plays it
        task.cancel()
        loop.run_until_complete(asyncio.wait([task], timeout=5))


def test_process_list_shows_a_job_s_transport_back_off(veglia_home, run_cli):
    make_profile(**{"transport.retry_initial_interval": "60", "transport.retry_attempts": "5"})
    process, task = _start_job()
    node = process.node
    _step_until(lambda: node.get_attribute(BACKOFF) is not None)
    try:
        listing = run_cli("-p", "test", "process", "list", "--raw")
        assert listing.exit_code == 0, listing.output
        row = next(line for line in listing.stdout.splitlines() if line.startswith(f"{node.pk}\t"))
        assert "upload attempt 1/5 failed; next in " in row
        seconds = int(row.split("next in ")[1].split(" s")[0])
        assert 50 <= seconds <= 60
        shown = run_cli("-p", "test", "process", "show", str(node.pk))
        assert "upload attempt 1/5 failed; next in" in shown.stdout
    finally:
        _kill(process, task)


def test_a_step_that_goes_through_clears_the_back_off():
    now = time.time()
    backoff = {"step": "submit", "attempt": 2, "attempts": 5, "next_try": now + 40}
    waiting = {"computer": "away", "remote_workdir": "/w"}
    assert process_status("waiting", {**waiting, BACKOFF: backoff}, now) == (
        "submit attempt 2/5 failed; next in 40 s"
    )
    # Without a record (an attempt went through), the step the job is at: never "".
    assert process_status("waiting", waiting, now) == "submitting to away"
    assert process_status("waiting", {"computer": "away"}, now) == "uploading to away"
    assert process_status("created", {"daemon": True}, now) == "waiting for a daemon worker"
    assert process_status("running", {}, now) == "running"


def test_unreachable_since_is_the_first_failed_attempt(veglia_home, run_cli):
    make_profile(**{"transport.retry_initial_interval": "1", "transport.retry_attempts": "3"})
    process, task = _start_job()
    node = process.node
    try:
        _step_until(lambda: bool(node.get_attribute("unreachable")))
        first = next(log for log in node.logs if "upload attempt 1/3 failed" in log.message)
        since = node.get_attribute("unreachable")["since"]
        # Failures at 0 s, 1 s and 3 s: the pause came three seconds after the first.
        assert abs(since - first.time.timestamp()) < 0.5
        assert node.get_attribute(BACKOFF) is None  # the pause says why now
        shown = run_cli("-p", "test", "process", "show", str(node.pk))
        assert "computer away unreachable since" in shown.stdout
    finally:
        _kill(process, task)


@pytest.fixture(autouse=True)
def _no_runner_left():
    yield
    from veglia.engine.runner import set_runner

    set_runner(None)


@pytest.mark.services
def test_a_poll_outage_is_dated_from_the_first_failed_poll(veglia_home, private_sshd, run_cli):
    """The job runs, then its computer goes away: the polls fail, back off, and the pause's
    "unreachable since" is the first failed poll."""
    make_profile(**{"transport.retry_initial_interval": "0.5", "transport.retry_attempts": "3"})
    private_sshd["computer"]("flaky")
    builder = ShellJob.get_builder()
    builder.command = orm.Str("sleep 20")
    builder.metadata.computer = "flaky"
    runner = get_runner()
    process = runner.instantiate(ShellJob, builder.to_dict())
    task = runner.loop.create_task(process.step_until_terminated())
    node = process.node
    try:
        _step_until(lambda: node.job_id is not None, timeout=60)
        private_sshd["stop"]()
        _step_until(lambda: node.get_attribute(BACKOFF) is not None, timeout=60)
        assert process_status(node.process_state, node.attributes).startswith(
            "update attempt 1/3 failed; "
        )
        _step_until(lambda: bool(node.get_attribute("unreachable")), timeout=60)
        first = next(log for log in node.logs if "update attempt 1/3 failed" in log.message)
        last = next(log for log in node.logs if "update attempt 3/3 failed" in log.message)
        since = node.get_attribute("unreachable")["since"]
        assert abs(since - first.time.timestamp()) < 0.3
        assert last.time.timestamp() - since > 1  # backed off 0.5 s, then 1 s
    finally:
        _kill(process, task)
