"""A whole calc job through the engine on veglia.testing's FakeTransport and FakeScheduler,
registered as entry points by a pip-installed package (as a plugin author would), with a
parser written against veglia.plugin_api; the test drives the job from a thread."""

from __future__ import annotations

import importlib
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from veglia.schedulers import JobFailure, JobState
from veglia.testing import FakeScheduler, FakeTransport

PACKAGE = Path(__file__).parent / "plugin_packages" / "veglia-fake-computer"


def _pip(*args: str) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q", *args],
        check=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def fake_computer_package(tmp_path_factory):
    """tests/plugin_packages/veglia-fake-computer, installed with pip, removed afterwards."""
    source = tmp_path_factory.mktemp("fake-computer") / PACKAGE.name
    shutil.copytree(PACKAGE, source)
    _pip("install", "--no-deps", str(source))
    importlib.invalidate_caches()
    yield
    _pip("uninstall", "-y", "veglia-fake-computer")
    importlib.invalidate_caches()


@pytest.fixture
def fake_computer(fake_computer_package, profile, tmp_path):
    """A stored computer on the fake transport and scheduler; its cluster, reset."""
    from veglia import orm
    from veglia.entry_points import clear_cache

    clear_cache()
    computer = orm.Computer(
        label="fake",
        hostname="fake",
        transport_type="fake.transport",
        scheduler_type="fake.scheduler",
        properties={"safe_interval": 0.0, "minimum_poll_interval": 0.1, "measure_usage": False},
    ).store()
    computer.configure(root=str(tmp_path / "computer"))
    FakeScheduler.cluster.reset()
    yield computer
    FakeScheduler.cluster.reset()
    clear_cache()


def _drive(job: Callable[[], None]) -> tuple[threading.Thread, list[BaseException]]:
    """Run ``job`` in a thread (the engine runs the calc job in the foreground)."""
    errors: list[BaseException] = []

    def target() -> None:
        try:
            job()
        except BaseException as exc:  # shown by the test, not lost in the thread
            errors.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread, errors


def _shell_job_on_the_fakes(command: str, cluster_side: Callable[[], None]) -> Any:
    """Run a ``core.shell`` job on the fake computer while ``cluster_side`` drives its
    scheduler job; the job's node."""
    from veglia import engine, orm
    from veglia.entry_points import CalculationFactory

    thread, errors = _drive(cluster_side)
    builder = CalculationFactory("core.shell").get_builder()
    builder.command = orm.Str(command)
    builder.metadata.computer = "fake"
    _, node = engine.run_get_node(builder)
    thread.join(30)
    assert not errors, errors
    return node


def test_a_calc_job_runs_on_the_fakes_through_the_engine(fake_computer, tmp_path):
    from veglia import engine, orm
    from veglia.entry_points import CalculationFactory

    cluster = FakeScheduler.cluster

    def run_the_job() -> None:
        job_id = cluster.wait_for_submission()
        cluster.set_state(job_id, JobState.RUNNING)
        with FakeTransport(root=str(tmp_path / "computer")) as transport:
            cluster.run(job_id, transport)

    thread, errors = _drive(run_the_job)
    builder = CalculationFactory("core.shell").get_builder()
    builder.command = orm.Str("echo one two three")
    builder.metadata.computer = "fake"
    builder.metadata.options.parser_name = "fake.word_count"
    outputs, node = engine.run_get_node(builder)
    thread.join(30)
    assert not errors, errors
    assert node.is_finished_ok, (node.exit_status, node.exit_message)
    assert outputs["stdout"].get_content() == b"one two three\n"
    assert outputs["files"]["word_count"].get_content() == b"3"
    job_id = cluster.submitted[0]
    assert node.job_id == job_id
    script = Path(cluster.job(job_id).details["script"])
    assert script.is_relative_to(tmp_path / "computer" / "home")
    assert "#FAKE --job-name=veglia-" in script.read_text()


def test_a_job_the_fake_cluster_kills_for_memory_fails_as_out_of_memory(fake_computer):
    from veglia.entry_points import CalculationFactory

    cluster = FakeScheduler.cluster

    def kill_the_job() -> None:
        job_id = cluster.wait_for_submission()
        cluster.finish(job_id, exit_code=137, failure=JobFailure.OUT_OF_MEMORY)

    node = _shell_job_on_the_fakes("true", kill_the_job)
    codes = CalculationFactory("core.shell").exit_codes
    assert node.exit_status == codes.ERROR_SCHEDULER_OUT_OF_MEMORY.status, node.exit_message


def test_a_memory_kill_wins_over_the_exit_status_the_killed_command_left(fake_computer, tmp_path):
    """The batch system killed the command for memory, and the job script lived on long
    enough to record its exit status (137: killed by signal 9), as SLURM's OverMemoryKill
    sometimes allows. The job is out of memory, not "exited with status 137": a restart
    policy then gives it more memory."""
    from veglia.entry_points import CalculationFactory

    cluster = FakeScheduler.cluster

    def kill_the_command() -> None:
        job_id = cluster.wait_for_submission()
        cluster.set_state(job_id, JobState.RUNNING)
        with FakeTransport(root=str(tmp_path / "computer")) as transport:
            cluster.run(job_id, transport)  # the script writes the command's 137
        cluster.finish(job_id, exit_code=0, failure=JobFailure.OUT_OF_MEMORY)

    node = _shell_job_on_the_fakes("kill -9 $$", kill_the_command)
    assert node.get_attribute("job_outcome")["exit_status"] == 137
    codes = CalculationFactory("core.shell").exit_codes
    assert node.exit_status == codes.ERROR_SCHEDULER_OUT_OF_MEMORY.status, node.exit_message
