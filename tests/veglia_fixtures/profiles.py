"""Fixtures for a clean configuration folder, profiles on SQLite and PostgreSQL, and the CLI."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

VEGLIA = str(Path(sys.executable).parent / "veglia")


@pytest.fixture(autouse=True)
def veglia_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Every test gets its own empty configuration folder and no loaded profile."""
    from veglia.manage import unload_profile
    from veglia.plugin_manager import reset_plugin_manager

    home = tmp_path / "veglia-home"
    monkeypatch.setenv("VEGLIA_HOME", str(home))
    monkeypatch.delenv("VEGLIA_PROFILE", raising=False)
    unload_profile()
    reset_plugin_manager()
    yield home
    from veglia.notifications import flush

    # A notification a test made on an event loop is sent by a background thread: done
    # here, with this test's profile and plugins, not during the next test.
    flush(timeout=30)
    unload_profile()
    reset_plugin_manager()


@dataclass
class CliResult:
    exit_code: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


class _Zygote:
    """The client of cli_zygote.py: one per test session, started on first use."""

    def __init__(self) -> None:
        self._process: subprocess.Popen[str] | None = None
        self._lock = threading.Lock()

    def _started(self) -> subprocess.Popen[str]:
        if self._process is None or self._process.poll() is not None:
            self._process = subprocess.Popen(
                [sys.executable, str(Path(__file__).with_name("cli_zygote.py"))],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
        return self._process

    def _answer(self, process: subprocess.Popen[str], timeout: float | None) -> dict:
        assert process.stdout is not None
        ready, _, _ = select.select([process.stdout], [], [], timeout)
        if not ready:
            raise TimeoutError
        line = process.stdout.readline()
        if not line:
            raise RuntimeError("the CLI zygote died; see the output above")
        return json.loads(line)

    def run(self, args: list[str], env: dict[str, str], input: str, timeout: float) -> CliResult:
        with self._lock, tempfile.TemporaryDirectory(prefix="veglia-cli-") as folder:
            files = {name: os.path.join(folder, name) for name in ("stdin", "stdout", "stderr")}
            Path(files["stdin"]).write_text(input)
            process = self._started()
            assert process.stdin is not None
            request = {"args": args, "env": env, "cwd": os.getcwd(), "script": VEGLIA, **files}
            process.stdin.write(json.dumps(request) + "\n")
            process.stdin.flush()
            pid = self._answer(process, 30)["pid"]
            try:
                status = self._answer(process, timeout)["status"]
            except TimeoutError:
                os.kill(pid, signal.SIGKILL)
                self._answer(process, 30)
                raise subprocess.TimeoutExpired([VEGLIA, *args], timeout) from None
            return CliResult(
                status,
                Path(files["stdout"]).read_text(errors="replace"),
                Path(files["stderr"]).read_text(errors="replace"),
            )

    def close(self) -> None:
        if self._process is not None:
            self._process.kill()
            self._process.wait()


@pytest.fixture(scope="session")
def _cli_zygote() -> Iterator[_Zygote]:
    zygote = _Zygote()
    yield zygote
    zygote.close()


def ok(result: CliResult) -> CliResult:
    """``result`` of a command that must have succeeded."""
    assert result.exit_code == 0, result.output
    return result


def one_line_error(result: CliResult, code: int) -> str:
    """The one line an error gives, without a traceback, and its exit code."""
    assert result.exit_code == code, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.output
    return lines[0]


@pytest.fixture
def run_cli(veglia_home: Path, _cli_zygote: _Zygote):
    """Run `veglia` as a user would: a new process per command, with its own environment
    and files. The process is forked from one that has imported veglia's third-party
    libraries already (tests/veglia_fixtures/cli_zygote.py), which saves about half a
    second of CPU per command; VEGLIA_TEST_CLI=subprocess runs the console script itself."""

    def run(*args: str, input: str | None = None, env: dict[str, str] | None = None) -> CliResult:
        full_env = {**os.environ, "VEGLIA_HOME": str(veglia_home), "COLUMNS": "200"}
        full_env.update(env or {})
        if os.environ.get("VEGLIA_TEST_CLI") != "subprocess":
            return _cli_zygote.run(list(args), full_env, input or "", timeout=120)
        result = subprocess.run(
            [VEGLIA, *args],
            input=input if input is not None else "",
            capture_output=True,
            text=True,
            env=full_env,
            timeout=120,
        )
        return CliResult(result.returncode, result.stdout, result.stderr)

    return run


@pytest.fixture(params=["sqlite", "postgresql"])
def storage_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The same test on an SQLite file and on a fresh PostgreSQL database."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'storage.sqlite'}"
    return request.getfixturevalue("postgres_database")


@pytest.fixture
def storage(storage_url: str, tmp_path: Path):
    """A migrated StorageBackend on each database."""
    from veglia.storage import StorageBackend

    backend = StorageBackend(storage_url, tmp_path / "repository")
    backend.migrate()
    yield backend
    backend.close()


FAST_OPTIONS = {
    "engine.poll_interval": "0.1",
    "transport.safe_interval": "0",
    "transport.retry_initial_interval": "0.2",
    "transport.retry_attempts": "3",
}


def make_profile(name: str = "test", **options: str):
    """A profile made like `veglia presto` does, with fast polling, loaded in this process."""
    from veglia import load_profile
    from veglia.config import Config
    from veglia.engine.runner import set_runner
    from veglia.profile_setup import create_profile

    create_profile(Config(), name, {**FAST_OPTIONS, **options})
    set_runner(None)
    return load_profile(name)


@pytest.fixture
def profile(veglia_home: Path):
    """A loaded profile without broker, with a `localhost` computer (local, direct)."""
    from veglia.engine.runner import set_runner

    yield make_profile()
    set_runner(None)


@pytest.fixture
def no_trace_sampler(profile):
    """The `localhost` computer with the core.trace sampler off (its `trace` property): for
    tests whose jobs write a trace of their own, as a test's stand-in sampler."""
    from veglia.orm.computers import load_computer

    computer = load_computer("localhost")
    computer.properties["trace"] = False
    computer.save()
    return profile


@pytest.fixture
def broker_profile(veglia_home: Path, rabbitmq_url: str):
    """A loaded profile using the local RabbitMQ."""
    from veglia.engine.runner import set_runner

    yield make_profile(**{"broker.url": rabbitmq_url})
    set_runner(None)


@pytest.fixture
def daemon(run_cli):
    """Start the daemon of the loaded profile with N workers; stopped afterwards."""
    started = []

    def start(workers: int = 1):
        result = run_cli("-p", "test", "daemon", "start", str(workers))
        assert result.exit_code == 0, result.output
        started.append(True)
        return result

    yield start
    if started:
        run_cli("-p", "test", "daemon", "stop")


@pytest.fixture
def workflows(monkeypatch: pytest.MonkeyPatch):
    """tests/pipeline_workflows importable here and in daemon workers."""
    tests = Path(__file__).parent.parent
    monkeypatch.syspath_prepend(str(tests))
    monkeypatch.setenv("PYTHONPATH", str(tests))
    import pipeline_workflows

    return pipeline_workflows


def wait_for(nodes, condition, timeout: float = 120.0) -> None:
    """Until ``condition(node)`` holds for every node (refreshed), or fail with their states."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(condition(node.refresh()) for node in nodes):
            return
        time.sleep(0.2)
    states = [
        (n.pk, n.process_state, n.get_attribute("scheduler_state"), n.exit_message) for n in nodes
    ]
    raise AssertionError(f"timed out after {timeout:.0f} s: {states}")


@pytest.fixture(params=["sqlite", "postgresql"])
def any_profile(request, veglia_home):
    """A loaded profile as :func:`profile`'s, on SQLite and then on PostgreSQL."""
    from veglia.engine.runner import set_runner

    options = {}
    if request.param == "postgresql":
        options["storage.url"] = request.getfixturevalue("postgres_database")
    yield make_profile(**options)
    set_runner(None)


#: A label that is markup: every page and answer must show it as text.
EVIL_LABEL = "<script>alert(1)</script>"


@pytest.fixture
def evil_workflow(profile, workflows):
    """A finished workflow labelled :data:`EVIL_LABEL` that ran two shell jobs."""
    from veglia import engine, orm

    _, flow = engine.run_get_node(
        workflows.CountedShell,
        command=orm.Str("echo hi"),
        times=orm.Int(2),
        metadata={"label": EVIL_LABEL},
    )
    assert flow.is_finished_ok, flow.exit_message
    return flow


def stored_process(node_class, state, label="", exit_status=None, caller=None, **attributes):
    """A stored process in a state no quick real run reaches (paused, blocked, stopped by a
    monitor...), called by ``caller`` when given, with ``attributes`` set."""
    from veglia import orm

    node = node_class(process_type="core.shell" if node_class is orm.CalcJobNode else "demo.wf")
    node.label = label
    node.process_state = state
    node.store([(caller, "call", "CALL")] if caller is not None else [])
    if attributes:
        node.set_attributes(attributes)
    if exit_status is not None:
        node.set_exit(exit_status, f"exit {exit_status}")
    return node


def damaged_unstable_job():
    """A finished calc job whose output differs at each run (a time stamp), that stamp's
    blob overwritten in the repository since: a rerun cannot make it again. The job, and the
    stamp's file record."""
    from veglia import engine, orm
    from veglia.entry_points import CalculationFactory
    from veglia.manage import get_storage

    builder = CalculationFactory("core.shell").get_builder()
    builder.command = orm.Str("date +%s%N > stamp.txt")
    builder.outputs = orm.List(["stamp.txt"])
    _, node = engine.run_get_node(builder)
    record = next(r for r in node.outputs.retrieved.list_objects() if r.path == "stamp.txt")
    blob = get_storage().repository.objects / record.sha256[:2] / record.sha256[2:]
    blob.write_bytes(b"tampered\n")
    return node, record


def pid_alive(pid: str) -> bool:
    """Running, not a zombie waiting for a parent that does not reap (PID 1 in a container)."""
    stat = subprocess.run(["ps", "-o", "stat=", "-p", pid], capture_output=True, text=True)
    return stat.returncode == 0 and not stat.stdout.strip().startswith("Z")


def job_group_left(job_id: str) -> list[str]:
    """The processes of the direct scheduler's job ``job_id`` (its process group) still
    there, zombies apart: "pgid stat" lines."""
    listing = subprocess.run(
        ["ps", "-e", "-o", "pgid=,stat="], capture_output=True, text=True, check=True
    ).stdout
    return [
        line
        for line in listing.splitlines()
        if line.split()[0] == job_id and line.split()[1][0] != "Z"
    ]


@pytest.fixture
def monitor_import_paths(profile, veglia_home: Path) -> Iterator[None]:
    """Monitors by import path allowed (profile ``test``), with tests/monitor_helpers
    importable."""
    from veglia.config import Config

    Config().set_option("test", "monitors.allow_import_path", "yes")
    profile.options["monitors.allow_import_path"] = True
    tests = str(Path(__file__).resolve().parent.parent)
    sys.path.insert(0, tests)
    yield
    sys.path.remove(tests)
