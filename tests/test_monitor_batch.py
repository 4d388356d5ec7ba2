"""Monitors on the batched path (``watch_files``): the engine reads the files of many jobs in
one transport call per cycle and hands each monitor exactly the bytes that are new."""

from __future__ import annotations

import asyncio
import base64

import pytest

from veglia import engine, orm
from veglia.engine.calcjob.file_watch import (
    FileSlice,
    FileWatch,
    requests_for,
    slices_from,
    watch_files,
)
from veglia.engine.calcjob.monitor_runner import MonitorRunner
from veglia.engine.calcjob.monitors import MonitorSpec, check_arguments
from veglia.engine.calcjob.poll_writes import write_poll
from veglia.engine.runner import get_runner
from veglia.entry_points import CalculationFactory
from veglia.exceptions import MonitorError
from veglia.file_reads import python_command, read_requests
from veglia.monitors.files import file_pattern, stalled_output
from veglia.orm import attributes as attr
from veglia.orm.loading import load_node
from veglia.plugins.transports.local import LocalTransport
from veglia.plugins.transports.ssh import SshTransport
from veglia.testing import FakeTransport
from veglia.transports import Transport
from veglia_fixtures.services import ssh_computer

ShellJob = CalculationFactory("core.shell")


@watch_files(FileWatch("{path}"))
def new_bytes(node, transport, path: str = "out.log", files: dict | None = None):
    """Test monitor: its files."""
    return files


class CommandLocal(LocalTransport):
    """The local machine read as a remote one: through the python3 command."""

    read_files = Transport.read_files


def _transport(kind, tmp_path, request):
    if kind == "local":
        return LocalTransport(), str(tmp_path)
    if kind == "command":
        return CommandLocal(), str(tmp_path)
    if kind == "per-file":
        fake = FakeTransport(root=str(tmp_path))
        return fake, str(fake.root)
    services_env = request.getfixturevalue("services_env")
    transport = SshTransport(services_env["SSH_HOST"], **request.getfixturevalue("ssh_params"))
    transport.open()
    workdir = f"{services_env['SSH_USER_HOME']}/veglia-work/batch-{tmp_path.name}"
    transport.makedirs(workdir)
    request.addfinalizer(lambda: (transport.rmtree(workdir), transport.close()))
    return transport, workdir


class Cycles:
    """The engine's part of a cycle for one monitor: requests, one read, slices, offsets."""

    def __init__(self, transport, workdir, function=new_bytes, **kwargs):
        self.transport, self.workdir, self.function = transport, workdir, function
        self.kwargs, self.known = kwargs, {}

    def __call__(self, budget: int = 1 << 20) -> dict[str, FileSlice]:
        requests = requests_for(self.function, self.kwargs, self.workdir, self.known)
        answers = self.transport.read_files({"budget": budget, "requests": requests})
        files, self.known = slices_from(
            self.function, self.kwargs, self.workdir, self.known, answers
        )
        return files


@pytest.mark.parametrize("kind", ["local", "command", "per-file", "ssh"])
def test_each_cycle_hands_over_exactly_the_new_bytes(kind, tmp_path, request):
    transport, workdir = _transport(kind, tmp_path, request)
    transport.open()
    path = f"{workdir}/out.log"
    cycle = Cycles(transport, workdir)

    missing = cycle()["out.log"]
    assert (missing.exists, missing.size, missing.data) == (False, -1, b"")
    seen = b""
    for content in (b"abc", b"abcdef\ngh", b"abcdef\ngh", b"abcdef\ngh\xff\x00ij\n"):
        transport.write_bytes(path, content)  # appended to: the same file grows
        part = cycle()["out.log"]
        assert part.data == content[len(seen) :] and part.offset == len(seen)
        assert not part.reset and part.size == len(content)
        seen += part.data
    assert seen == b"abcdef\ngh\xff\x00ij\n"

    transport.write_bytes(path, b"xy")  # shorter than what was read: rewritten
    part = cycle()["out.log"]
    assert (part.data, part.offset, part.reset) == (b"xy", 0, True)

    if kind != "per-file":  # rotated: another file (inode) under the name, longer than before
        transport.exec_command(f"mv {path} {path}.1 && printf 'new file!' > {path}")
        part = cycle()["out.log"]
        assert (part.data, part.reset) == (b"new file!", True)

    transport.remove(path)
    assert not cycle()["out.log"].exists
    transport.write_bytes(path, b"back")
    part = cycle()["out.log"]
    assert (part.data, part.offset) == (b"back", 0)


def test_caps_spread_a_large_write_over_cycles_without_losing_a_byte(tmp_path):
    @watch_files(FileWatch("big.log", max_bytes=4))
    def capped(node, transport, files: dict | None = None):
        """Test monitor."""

    (tmp_path / "big.log").write_bytes(b"0123456789")
    cycle = Cycles(LocalTransport(), str(tmp_path), capped)
    assert [cycle()["big.log"].data for _ in range(4)] == [b"0123", b"4567", b"89", b""]

    # The budget caps a whole read, all files together: the rest waits for the next one.
    (tmp_path / "big.log").write_bytes(b"0123456789abc")
    assert cycle(budget=2)["big.log"].data == b"ab"
    assert cycle()["big.log"].data == b"c"


def test_whole_lines_tail_stat_and_globs(tmp_path):
    @watch_files(
        FileWatch("{path}", lines=True),
        FileWatch("err.log", mode="tail", tail=3),
        FileWatch("*.dat", mode="stat", glob=True),
    )
    def several(node, transport, path: str = "out.log", files: dict | None = None):
        """Test monitor."""

    (tmp_path / "out.log").write_bytes(b"one\ntwo\nthr")
    (tmp_path / "err.log").write_bytes(b"abcdef")
    (tmp_path / "b.dat").write_bytes(b"12")
    (tmp_path / "a.dat").write_bytes(b"1")
    cycle = Cycles(LocalTransport(), str(tmp_path), several)
    files = cycle()
    assert list(files) == ["out.log", "err.log", "a.dat", "b.dat"]
    assert files["out.log"].lines() == ["one", "two"]  # "thr" waits for its newline
    assert files["err.log"].data == b"def"
    assert [(files[n].size, files[n].data) for n in ("a.dat", "b.dat")] == [(1, b""), (2, b"")]
    (tmp_path / "out.log").write_bytes(b"one\ntwo\nthree\n")
    (tmp_path / "err.log").write_bytes(b"abcdefgh")
    files = cycle()
    assert (files["out.log"].lines(), files["err.log"].data) == (["three"], b"fgh")


def test_a_symlink_or_fifo_is_never_read(tmp_path):
    (tmp_path / "secret").write_bytes(b"not for the monitor")
    (tmp_path / "out.log").symlink_to(tmp_path / "secret")
    part = Cycles(LocalTransport(), str(tmp_path))()["out.log"]
    assert (part.exists, part.irregular, part.data) == (False, True, b"")


def test_the_declaration_is_checked():
    with pytest.raises(MonitorError, match="mode 'head'"):
        FileWatch("out.log", mode="head")
    with pytest.raises(MonitorError, match="takes a `files` keyword"):
        watch_files(FileWatch("out.log"))(lambda node, transport: None)
    with pytest.raises(MonitorError, match="plain def"):

        @watch_files(FileWatch("out.log"))
        async def reading(node, transport, files=None):
            """Async."""


def test_called_directly_a_monitor_reads_through_its_transport(tmp_path):
    """As in a plugin's own test: no engine, a FakeTransport."""
    with FakeTransport(root=str(tmp_path)) as transport:
        (transport.root / "out.log").write_text("step 1\nNaN found\n")
        result = file_pattern(None, transport, path="out.log", pattern="NaN")
        stalled = stalled_output(None, transport, "out.log", 60.0, state := {})  # positional
    assert result.message == "out.log matched 'NaN': NaN found"
    assert stalled is None and state["size"] == len("step 1\nNaN found\n")


# -- the engine: many jobs, one command ------------------------------------------------------
@pytest.fixture
def ssh(profile, services_env, ssh_params):
    return ssh_computer("ssh", services_env, ssh_params, "core.direct")


def _jobs(computer, count, monitors):
    """Processes whose monitors run on ``computer``, each with a work dir of its own there."""
    runner = get_runner()
    processes = []
    with computer.get_transport() as transport:
        for _ in range(count):
            builder = {"command": orm.Str("true"), "monitors": monitors}
            builder["metadata"] = {"computer": computer.label}
            process = runner.instantiate(ShellJob, builder)
            workdir = f"{computer.properties['workdir']}/batch-{process.node.uuid}"
            transport.makedirs(workdir)
            process.node.set_attribute(attr.REMOTE_WORKDIR, workdir)
            processes.append(process)
    return processes


def _cycle(computer, processes):
    runner = get_runner()

    async def cycle():
        async with runner.lease_transport(computer) as lease:
            return await asyncio.gather(*(MonitorRunner(p).run_cycle(lease) for p in processes))

    return runner.loop.run_until_complete(cycle())


def test_many_jobs_one_remote_command_per_cycle(ssh, monkeypatch):
    commands = []
    original = SshTransport.exec_command

    def counting(self, command, **kwargs):
        commands.append(command)
        return original(self, command, **kwargs)

    monkeypatch.setattr(SshTransport, "exec_command", counting)
    monitors = {
        "pattern": {
            "entry_point": "core.file_pattern",
            "kwargs": {"path": "out.log", "pattern": "DIVERGED"},
        },
        "stalled": {
            "entry_point": "core.stalled_output",
            "kwargs": {"path": "out.log", "seconds": 1e9},
        },
        "walltime": {"entry_point": "core.walltime_guard"},  # a plain monitor, alongside
    }
    processes = _jobs(ssh, 30, monitors)
    commands.clear()
    with ssh.get_transport() as transport:
        for i, process in enumerate(processes):
            transport.write_bytes(f"{process.node.remote_workdir}/out.log", f"job {i}\n".encode())
    assert _cycle(ssh, processes) == [None] * 30
    assert commands == [python_command()]  # 30 jobs x 2 watched monitors: one command

    with ssh.get_transport() as transport:
        transport.write_bytes(
            f"{processes[7].node.remote_workdir}/out.log", b"job 7\nstep\nDIVERGED now\n"
        )
    commands.clear()
    outcomes = _cycle(ssh, processes)
    assert commands == [python_command()]
    stopped = {i: outcome for i, outcome in enumerate(outcomes) if outcome}
    assert list(stopped) == [7]
    name, result = stopped[7]
    assert (name, result.message) == ("pattern", "out.log matched 'DIVERGED': DIVERGED now")
    for process in processes:
        states = process.node.get_attribute(attr.MONITOR_STATE)
        assert states["walltime"]["last_call"] and states["walltime"]["failures"] == 0
        assert states["stalled"]["data"]["size"] == len(f"job {processes.index(process)}\n")


def test_a_job_whose_pattern_appears_over_ssh_is_killed(ssh):
    builder = ShellJob.get_builder()
    builder.command = orm.Str("echo step 1 > out.log; sleep 1; echo DIVERGED >> out.log; sleep 600")
    builder.metadata.computer = "ssh"
    builder.monitors = {
        "diverged": {
            "entry_point": "core.file_pattern",
            "kwargs": {"path": "out.log", "pattern": "DIVERGED"},
        },
        "walltime": {"entry_point": "core.walltime_guard"},
    }
    _, node = engine.run_get_node(builder)
    assert node.exit_status == 150
    assert node.exit_message == (
        "Monitor diverged stopped the job: out.log matched 'DIVERGED': DIVERGED"
    )
    states = node.get_attribute(attr.MONITOR_STATE)
    assert states["walltime"]["last_call"] and not states["walltime"]["disabled"]
    assert b64_offsets(states["diverged"]["files"]) == [len("step 1\nDIVERGED\n")]


def b64_offsets(files: dict) -> list[int]:
    return [offset for offset, _ in files.values()]


def test_answers_cross_as_text(tmp_path):
    """Bytes that are not UTF-8 survive the trip (base64 in JSON)."""
    (tmp_path / "bin").write_bytes(bytes(range(256)))
    answer = read_requests({"requests": [{"path": str(tmp_path / "bin"), "mode": "new"}]})
    assert base64.b64decode(answer[0][0][6]) == bytes(range(256))


def test_a_running_job_s_clock_alone_is_not_written_at_every_poll(profile):
    """A thousand jobs' elapsed times written at every poll kept the engine from keeping
    up: the clock alone is kept on the node in memory, and written now and then."""
    node = get_runner().instantiate(ShellJob, {"command": orm.Str("true")}).node
    info = {"state": "running", "wallclock_seconds": 10}
    written: dict = {}
    first = {attr.SCHEDULER_STATE: "running", attr.LAST_JOB_INFO: info}
    assert write_poll(node, first, written)
    assert not write_poll(node, first, written)  # nothing changed
    ticked = {**first, attr.LAST_JOB_INFO: {**info, "wallclock_seconds": 12}}
    assert not write_poll(node, ticked, written)
    assert node.last_job_info["wallclock_seconds"] == 12  # what a monitor sees at once
    assert load_node(node.pk).last_job_info["wallclock_seconds"] == 10  # not yet written
    written["at"] -= 31  # CLOCK_WRITE_INTERVAL later
    assert write_poll(
        node, {**first, attr.LAST_JOB_INFO: {**info, "wallclock_seconds": 43}}, written
    )
    assert load_node(node.pk).last_job_info["wallclock_seconds"] == 43
    held = {attr.SCHEDULER_STATE: "queued", attr.LAST_JOB_INFO: {**info, "state": "queued"}}
    assert write_poll(node, held, written)  # any other change is written at once


def test_a_path_naming_a_keyword_the_monitor_lacks_is_refused_before_the_job_runs():
    @watch_files(FileWatch("{filename}"))
    def misnamed(node, transport, path: str = "out.log", files: dict | None = None):
        """Test monitor."""

    spec = MonitorSpec(name="bad", entry_point="x:misnamed", kwargs={"path": "a.log"})
    with pytest.raises(MonitorError, match="Monitor 'bad'.*names no keyword 'filename'"):
        check_arguments(spec, misnamed)
