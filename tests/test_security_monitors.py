"""Monitors share fairly: one plugin whose calls hang never delays another plugin's monitors
by more than one poll interval, and is switched off with the reason on the job."""

from __future__ import annotations

import asyncio
import re
import sys
import time
from pathlib import Path

import pytest

from veglia import engine, orm
from veglia.config import Config
from veglia.engine.calcjob.monitor_lanes import THREADS_PER_LANE
from veglia.engine.runner import get_runner
from veglia.entry_points import CalculationFactory

ShellJob = CalculationFactory("core.shell")
HANGING = 20
# The pattern's line carries the time it was written, so the test can tell how long the
# monitor took to stop the job after it appeared.
PATTERN_AT = 'sleep {wait}; echo "DIVERGED $(date +%s.%N)" >> out.log; sleep 40'
# The longest from the pattern's line to the job stopped by its monitor: about one poll
# interval (0.1 s here) plus the kill, with room for a loaded 2-core machine. Before monitors
# shared fairly it was more than 30 s (or never).
ON_TIME = 8.0
DIVERGED = {
    "entry_point": "core.file_pattern",
    "kwargs": {"path": "out.log", "pattern": "DIVERGED"},
}


@pytest.fixture
def helpers(profile, veglia_home):
    """tests/monitor_helpers by import path; its blocked monitors released at teardown, so
    no thread outlives the test."""
    Config().set_option("test", "monitors.allow_import_path", "yes")
    profile.options["monitors.allow_import_path"] = True
    sys.path.insert(0, str(Path(__file__).parent))
    import monitor_helpers

    monitor_helpers.RELEASE.clear()
    monitor_helpers.STARTED.clear()
    yield monitor_helpers
    monitor_helpers.RELEASE.set()
    sys.path.remove(str(Path(__file__).parent))


def _hanging(timeout: float = 60, max_failures: int = 3) -> dict[str, dict]:
    """HANGING monitors of one plugin whose calls never return, called before the others."""
    return {
        f"hang{i:02}": {
            "entry_point": "monitor_helpers:blocked",
            "kwargs": {"name": f"hang{i:02}"},
            "priority": 10,
            "timeout": timeout,
            "max_failures": max_failures,
        }
        for i in range(HANGING)
    }


def _stopped_on_time(node) -> None:
    assert node.exit_status == 150, node.exit_message
    stop = node.get_attribute("stopped_by_monitor")
    assert stop["name"] == "diverged", stop
    written = float(re.search(r"DIVERGED (\d+\.\d+)", stop["message"]).group(1))
    assert stop["time"] - written < ON_TIME, stop["time"] - written


def test_hanging_monitors_do_not_delay_the_jobs_other_monitor(helpers, monkeypatch, run_cli):
    from veglia.engine.calcjob import monitor_runner

    monkeypatch.setattr(monitor_runner, "FAULT_WINDOW", 1.0)  # the faults span a second
    monitors = {**_hanging(timeout=0.5, max_failures=2), "diverged": DIVERGED}
    _, node = engine.run_get_node(
        ShellJob, command=orm.Str(PATTERN_AT.format(wait=6)), monitors=monitors
    )
    _stopped_on_time(node)
    # A call still running is not started again, and the plugin's calls hold its own
    # threads only, however many of its monitors the job has.
    assert set(helpers.STARTED.values()) == {1}
    assert len(helpers.STARTED) <= THREADS_PER_LANE
    state = node.get_attribute("monitor_state")
    report = run_cli("-p", "test", "process", "report", str(node.pk)).stdout
    shown = run_cli("-p", "test", "process", "show", str(node.pk)).stdout
    for name in _hanging():
        reason = state[name]["disabled_reason"]
        assert state[name]["disabled"], name
        assert re.match(r"\d+ failures in a row over \d+ s: ", reason), reason
        assert re.search(r"timed out after 0.5 s|still running after|waited 0.5 s", reason)
        assert f"monitor {name} disabled: {reason}" in report
        assert f"monitor {name} disabled: {reason}" in shown


def test_hanging_monitors_of_one_job_do_not_delay_another_jobs(helpers):
    runner = get_runner()
    hung = runner.instantiate(ShellJob, {"command": orm.Str("sleep 6"), "monitors": _hanging()})
    watched = runner.instantiate(
        ShellJob,
        {"command": orm.Str(PATTERN_AT.format(wait=3)), "monitors": {"diverged": DIVERGED}},
    )

    async def both() -> None:
        await asyncio.gather(hung.step_until_terminated(), watched.step_until_terminated())

    runner.loop.run_until_complete(both())
    _stopped_on_time(watched.node.refresh())
    node = hung.node.refresh()
    assert node.is_finished_ok, node.exit_message  # its monitors hung: not its fault
    assert len(helpers.STARTED) <= THREADS_PER_LANE


def test_a_blocking_async_monitor_does_not_block_the_worker(helpers):
    start = time.monotonic()
    _, node = engine.run_get_node(
        ShellJob,
        command=orm.Str(PATTERN_AT.format(wait=2)),
        monitors={
            "blocks": {"entry_point": "monitor_helpers:blocking_async", "priority": 10},
            "diverged": DIVERGED,
        },
    )
    _stopped_on_time(node)
    assert time.monotonic() - start < 2 + ON_TIME + 10
