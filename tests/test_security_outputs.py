"""What veglia reads from a computer stays bounded in memory: a job's retrieved outputs are
streamed to the repository, and a command's output is capped (``transport.max_command_output``)."""

from __future__ import annotations

import shutil
import tracemalloc
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from veglia import engine, orm
from veglia.entry_points import CalculationFactory
from veglia.exceptions import CommandOutputTooLarge
from veglia.manage import get_storage
from veglia.plugins.transports.local import LocalTransport
from veglia_fixtures.profiles import make_profile
from veglia_fixtures.services import ssh_computer

ShellJob = CalculationFactory("core.shell")

MB = 1024 * 1024
#: The output the jobs write: several times what the tests let veglia hold of it.
OUTPUT_MB = 96
#: What the tests let veglia's memory grow by (traced Python allocations) meanwhile.
BOUND_MB = 24


@contextmanager
def traced_peak() -> Iterator[list[float]]:
    """The peak of Python's traced allocations in the block, over what was held before,
    in MB (one value, once the block ends)."""
    peak: list[float] = []
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        yield peak
        peak.append((tracemalloc.get_traced_memory()[1] - before) / MB)
    finally:
        tracemalloc.stop()


def _run_big_job(computer: str = "localhost") -> tuple[orm.Node, float]:
    builder = ShellJob.get_builder()
    # Random data, its hash computed by the job itself: what the repository must hold.
    builder.command = orm.Str(
        f"head -c {OUTPUT_MB}M /dev/urandom > big.bin && sha256sum big.bin > big.sha"
    )
    builder.outputs = orm.List(["big.bin", "big.sha"])
    builder.metadata.computer = computer
    with traced_peak() as peak:
        _, node = engine.run_get_node(builder)
    return node, peak[0]


def _check_stored(node: orm.Node) -> None:
    assert node.is_finished_ok, (node.exit_status, node.exit_message)
    expected = node.outputs.files__big_sha.get_content().split()[0].decode()
    retrieved = {r.path: r for r in node.outputs.retrieved.list_objects()}
    assert retrieved["big.bin"].sha256 == expected
    assert retrieved["big.bin"].size == OUTPUT_MB * MB
    assert get_storage().repository.hash_of_stored(expected) == expected
    # The parser's output of the same file shares the blob.
    assert node.outputs.files__big_bin.list_objects()[0].sha256 == expected
    with node.outputs.files__big_bin.open_object("big.bin") as handle:
        assert len(handle.read(MB)) == MB


@pytest.fixture(params=["sqlite", "postgresql", "postgresql-database-repository"])
def any_storage_profile(request: pytest.FixtureRequest, veglia_home):
    from veglia.engine.runner import set_runner

    options = {}
    if request.param.startswith("postgresql"):
        options["storage.url"] = request.getfixturevalue("postgres_database")
    if request.param.endswith("database-repository"):
        options["storage.repository"] = "database"
    yield make_profile(**options)
    set_runner(None)


def test_a_large_output_is_streamed_to_the_repository(any_storage_profile):
    node, peak = _run_big_job()
    assert peak < BOUND_MB, f"retrieving {OUTPUT_MB} MB held {peak:.0f} MB"
    _check_stored(node)
    shutil.rmtree(node.remote_workdir)


def test_a_large_output_is_streamed_over_ssh(profile, services_env, ssh_params, ssh_transport):
    ssh_computer("ssh", services_env, ssh_params, "core.direct")
    node, peak = _run_big_job("ssh")
    assert peak < BOUND_MB, f"retrieving {OUTPUT_MB} MB over SSH held {peak:.0f} MB"
    _check_stored(node)
    ssh_transport.rmtree(node.remote_workdir)  # in the shared test user's home


# -- the cap on a command's output ------------------------------------------------------------
@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_a_command_printing_past_the_cap_is_stopped_locally(stream):
    transport = LocalTransport()
    transport.max_output = MB
    redirect = " >&2" if stream == "stderr" else ""
    command = f"head -c {OUTPUT_MB}M /dev/zero{redirect}; echo never"
    with transport, traced_peak() as peak, pytest.raises(CommandOutputTooLarge) as caught:
        transport.exec_command(command, timeout=60)
    message = str(caught.value)
    assert f"`{command}` on localhost printed more than 1 MB on its {stream}" in message
    assert "veglia config set transport.max_command_output 2M" in message
    assert "\n" not in message
    assert peak[0] < BOUND_MB
    # Up to the cap, all of it is read, with the command's input and exit code.
    with transport:
        code, out, err = transport.exec_command(
            "head -c 1048576 /dev/zero; printf e >&2; cat > /dev/null; exit 4",
            stdin=b"x" * 100_000,
        )
    assert (code, len(out), err) == (4, MB, "e")


def test_a_command_printing_past_the_cap_is_stopped_over_ssh(ssh_transport):
    ssh_transport.max_output = MB
    command = f"head -c {OUTPUT_MB}M /dev/zero"
    with traced_peak() as peak, pytest.raises(CommandOutputTooLarge) as caught:
        ssh_transport.exec_command(command, timeout=60)
    assert f"`{command}` on {ssh_transport.hostname} printed more than 1 MB on its stdout" in str(
        caught.value
    )
    assert peak[0] < BOUND_MB
    # The connection is still usable.
    assert ssh_transport.exec_command("echo ok", timeout=30)[1] == "ok\n"


def test_the_cap_is_the_profile_option(veglia_home):
    from veglia.engine.runner import set_runner

    make_profile(**{"transport.max_command_output": "2M"})
    try:
        transport = orm.load_computer("localhost").get_transport()
        assert transport.max_output == 2 * MB
        with transport, pytest.raises(CommandOutputTooLarge, match="more than 2 MB"):
            transport.exec_command("head -c 3M /dev/zero", timeout=60)
    finally:
        set_runner(None)


def test_a_scheduler_listing_past_the_cap_fails_saying_so(profile):
    """A job list (squeue, qstat) that is too long fails the poll with the cap's error."""
    from veglia.plugins.schedulers.direct import DirectScheduler

    class Flooding(DirectScheduler):
        def joblist_command(self, job_ids: list[str]) -> str:
            return "head -c 50M /dev/zero"

    transport = LocalTransport()
    transport.max_output = MB
    with transport, pytest.raises(CommandOutputTooLarge) as caught:
        Flooding().get_jobs(transport, ["1"])
    assert str(caught.value).startswith("`head -c 50M /dev/zero` on localhost printed more")


@pytest.mark.parametrize(
    "name", ["core.direct", "core.slurm", "core.pbspro", "core.sge", "core.lsf"]
)
def test_a_refused_submission_quotes_a_bounded_part_of_its_output(name):
    """A scheduler's error quotes the command's output, which may be up to the cap: the
    message (which goes into the job's report) quotes 2,000 characters of it."""
    from veglia.entry_points import SchedulerFactory
    from veglia.exceptions import SchedulerError

    flood = "sbatch: error: " + "x" * 10 * MB
    with pytest.raises(SchedulerError) as caught:
        SchedulerFactory(name)().parse_submit_output(1, "", flood)
    message = str(caught.value)
    assert "sbatch: error: xxx" in message
    assert len(message) < 3000
    assert f"({len(flood) - 2000} more characters)" in message
