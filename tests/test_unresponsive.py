"""A job the scheduler says is running but that does nothing (UC2 12g): ``core.unresponsive``
stops it from its live trace, and the restart policy cancels and resubmits it once; stopped
again, it has failed. Nothing of a stopped job keeps running."""

from __future__ import annotations

import subprocess
import uuid

import pytest

from veglia import engine, orm
from veglia.entry_points import CalculationFactory, WorkflowFactory

ShellJob = CalculationFactory("core.shell")
RestartWorkChain = WorkflowFactory("core.restart")
HUNG = {"hung": {"entry_point": "core.unresponsive", "kwargs": {"seconds": 3}}}


def stops_itself(marker: str, token: str) -> str:
    """A command whose first run stops itself with SIGSTOP (a second run ends at once, when
    ``marker`` exists); ``token`` names its processes."""
    return (
        f"if [ -e {marker} ]; then echo done; exit 0; fi; touch {marker}; "
        f": {token}; echo started; kill -STOP $$; echo resumed"
    )


def processes_named(token: str) -> list[str]:
    listing = subprocess.run(["ps", "-eo", "pid,stat,args"], capture_output=True, text=True)
    return [line for line in listing.stdout.splitlines() if token in line and "ps -eo" not in line]


@pytest.fixture
def traced_localhost(profile):
    computer = orm.load_computer("localhost")
    computer.properties.update(trace_interval=1, minimum_poll_interval=0.5)
    computer.save()
    return computer


def test_a_stopped_job_is_cancelled_and_resubmitted_once(traced_localhost, tmp_path, run_cli):
    token = f"veglia-hung-{uuid.uuid4().hex[:8]}"
    builder = ShellJob.get_builder()
    builder.command = orm.Str(stops_itself(str(tmp_path / "marker"), token))
    builder.metadata.options.max_wallclock_seconds = 120
    builder.monitors = HUNG
    outputs, node = engine.run_get_node(RestartWorkChain.wrap(builder))

    assert node.is_finished_ok, node.exit_message
    assert outputs["stdout"].get_content() == b"done\n"
    first, second = node.get_attribute("attempts")
    assert "stopped responding (not responding: under 1% of a core" in first["reason"]
    assert "resubmitting unchanged" in first["reason"]
    assert second["decision"] == "done"
    stopped = orm.load_node(first["pk"])
    assert stopped.exit_status == 150 and "not responding" in stopped.exit_message
    # The stopped shell was killed with its job, not left stopped on the machine.
    assert processes_named(token) == []
    report = run_cli("-p", "test", "process", "report", str(node.pk)).stdout
    assert "attempt 1 stopped responding" in report


def test_a_job_that_stops_responding_again_has_failed(traced_localhost, tmp_path):
    token = f"veglia-hung-{uuid.uuid4().hex[:8]}"
    builder = ShellJob.get_builder()
    # No marker that lasts: every attempt stops itself.
    builder.command = orm.Str(f": {token}; echo started; kill -STOP $$")
    builder.metadata.options.max_wallclock_seconds = 120
    builder.monitors = HUNG
    _, node = engine.run_get_node(RestartWorkChain.wrap(builder))

    assert node.exit_status == 403, node.exit_message
    assert "stopped responding again" in node.exit_message
    assert [a["decision"] for a in node.get_attribute("attempts")] == ["resubmit", "stop"]
    assert processes_named(token) == []


def test_a_busy_or_writing_job_is_left_alone(traced_localhost, tmp_path):
    """Sleeping but writing a line a second, or computing: neither is stopped."""
    builder = ShellJob.get_builder()
    builder.command = orm.Str(
        "for i in $(seq 8); do echo $i; sleep 1; done; "
        "end=$((SECONDS + 5)); while [ $SECONDS -lt $end ]; do :; done; echo end"
    )
    builder.metadata.options.max_wallclock_seconds = 120
    builder.monitors = HUNG
    outputs, node = engine.run_get_node(builder)
    assert node.is_finished_ok, node.exit_message
    assert outputs["stdout"].get_content().endswith(b"8\nend\n")
