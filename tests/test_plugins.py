"""Entry points, factories and pluggy hooks, with a third-party package installed by pip."""

from __future__ import annotations

import importlib
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from veglia import MonitorFactory, SchedulerFactory, TransportFactory
from veglia.config.options import get_option
from veglia.entry_points import GROUPS, get_entry_points
from veglia.exceptions import InvalidPluginError, MissingEntryPointError, PluginError
from veglia.plugin_manager import build_plugin_manager
from veglia.plugins.schedulers.direct import DirectScheduler
from veglia.plugins.transports.local import LocalTransport
from veglia.transports import Transport

EXAMPLE = Path(__file__).parent / "plugin_packages" / "veglia-example-plugin"


def _pip(*args: str) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q", *args],
        check=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def example_plugin(tmp_path_factory):
    """The example package, installed with pip as a user would, removed afterwards."""
    # Built from a copy: pip builds in the source tree and would leave build/ behind.
    source = tmp_path_factory.mktemp("example") / EXAMPLE.name
    shutil.copytree(EXAMPLE, source)
    _pip("install", "--no-deps", str(source))
    importlib.invalidate_caches()
    yield
    _pip("uninstall", "-y", "veglia-example-plugin")
    importlib.invalidate_caches()


def test_factories_load_builtins():
    assert TransportFactory("core.local") is LocalTransport
    assert SchedulerFactory("core.direct") is DirectScheduler
    assert MonitorFactory("core.always_kill")(None, None) == "Killed by core.always_kill."


def test_every_factory_is_named_as_it_is_exported():
    import veglia.entry_points as entry_points_module

    exported = [name for name in entry_points_module.__all__ if name.endswith("Factory")]
    assert {"CalculationFactory", "DataFactory", "WorkflowFactory"} <= set(exported)
    for name in exported:
        factory = getattr(entry_points_module, name)
        assert (factory.__name__, factory.__qualname__) == (name, name)


def test_missing_plugin_lists_what_is_installed():
    with pytest.raises(MissingEntryPointError, match=r"Installed: core\.local, core\.ssh"):
        TransportFactory("core.sshh")


def test_unknown_group_is_explained():
    with pytest.raises(PluginError, match="use one of calculations"):
        get_entry_points("widgets")


def test_factory_checks_the_kind_of_plugin(monkeypatch):
    from importlib.metadata import EntryPoint

    import veglia.entry_points as entry_points_module

    fake = EntryPoint("core.fake", "veglia.monitors.basic:always_kill", "veglia.transports")
    monkeypatch.setattr(entry_points_module, "get_entry_points", lambda group: [fake])
    with pytest.raises(InvalidPluginError, match="not a Transport subclass"):
        TransportFactory("core.fake")


@pytest.mark.parametrize("name", [ep.name for ep in get_entry_points("transports")])
def test_every_transport_is_a_transport(name):
    assert issubclass(TransportFactory(name), Transport)


def test_every_builtin_entry_point_imports():
    for group in GROUPS:
        for entry_point in get_entry_points(group):
            assert entry_point.load() is not None, entry_point


def test_external_package_is_discovered(example_plugin, run_cli):
    listing = run_cli("plugin", "list", "monitors", "--raw").stdout.splitlines()
    assert any(
        line.startswith("monitors\texample.nan_guard\t") and "veglia-example-plugin 0.1.0" in line
        for line in listing
    ), listing
    shown = run_cli("plugin", "show", "monitors", "example.nan_guard")
    assert "Kill the job when `path`" in shown.stdout
    assert "path: str = 'out.log'" in shown.stdout
    hooks = run_cli("plugin", "show", "plugins", "example")
    assert "register_commands, register_options" in hooks.stdout

    assert run_cli("presto", "--no-broker").exit_code == 0
    assert run_cli("config", "set", "example.threshold", "5").exit_code == 0
    assert run_cli("config", "get", "example.threshold").stdout.strip() == "5"
    assert run_cli("example-hello", "--name", "ada").stdout.strip() == (
        "hello ada from veglia-example-plugin"
    )


def test_external_monitor_runs_against_a_transport(example_plugin, tmp_path):
    monitor = MonitorFactory("example.nan_guard")
    (tmp_path / "out.log").write_text("1.0\nNaN\nNaN\n")
    with LocalTransport() as transport:
        transport.cwd = str(tmp_path)
        assert monitor(None, transport) == "out.log has 2 NaN values (limit 1)."
        assert monitor(None, transport, limit=5) is None


def test_external_hooks_are_called(example_plugin, veglia_home):
    from veglia import load_profile
    from veglia.config import Config

    manager = build_plugin_manager()
    assert "example" in {name for name, _ in manager.list_name_plugin()}
    Config().add_profile("p")
    load_profile("p")
    assert sys.modules["veglia_example_plugin.hooks"].LOADED[-1] == "p"
    assert get_option("example.threshold").validate("4") == 4


def test_only_named_plugins_load(example_plugin, monkeypatch):
    monkeypatch.setenv("VEGLIA_PLUGINS", "")
    assert build_plugin_manager().list_name_plugin() == []
    monkeypatch.setenv("VEGLIA_PLUGINS", "example")
    assert [name for name, _ in build_plugin_manager().list_name_plugin()] == ["example"]


def test_hook_calls_can_be_traced(example_plugin, run_cli):
    # The command list asks plugins for their commands (a built-in command alone does not).
    result = run_cli("--help", env={"VEGLIA_TRACE_PLUGINS": "1"})
    assert "register_commands" in result.stderr


def test_hooks_each_plugin_is_shielded_in_are_traced_too(run_cli):
    assert run_cli("presto", "--no-broker").exit_code == 0
    result = run_cli("shell", "echo traced", env={"VEGLIA_TRACE_PLUGINS": "1"})
    assert result.exit_code == 0, result.output
    for hook in ("collect_trace", "trace_updated", "trace_ready"):
        assert hook in result.stderr, hook


def test_external_monitor_stops_a_real_job(example_plugin, profile):
    from veglia import engine, orm
    from veglia.entry_points import CalculationFactory, clear_cache

    clear_cache()
    builder = CalculationFactory("core.shell").get_builder()
    builder.command = orm.Str("echo NaN >> out.log; echo NaN >> out.log; sleep 60")
    builder.monitors = {"nan": {"entry_point": "example.nan_guard", "kwargs": {"limit": 1}}}
    _, node = engine.run_get_node(builder)
    assert node.exit_status == 150
    assert "out.log has 2 NaN values (limit 1)" in node.exit_message
    assert node.get_attribute("monitor_provenance")["nan"]["version"] == "0.1.0"


# SQLite's expression indexes cannot be reflected, so the core's are not compared there.
@pytest.mark.filterwarnings("ignore:.*expression-based index")
def test_an_external_plugin_s_storage_migrations_make_its_own_table(
    example_plugin, run_cli, veglia_home
):
    """A plugin package's own table: made with a new profile, made again by `storage
    migrate` on a profile from before the plugin was installed, compared with its code."""
    import sqlite3

    made = run_cli("presto", "--no-broker")
    assert made.exit_code == 0, made.output
    assert "migrated the tables of plugin 'example' from absent to 0001" in made.stdout
    database = veglia_home / "profiles" / "presto" / "storage.sqlite"
    with sqlite3.connect(database) as connection:
        connection.execute("INSERT INTO example_notes (node_id, text) VALUES (1, 'hi')")
        version = connection.execute("SELECT version_num FROM alembic_version_example")
        assert version.fetchall() == [("0001",)]
        # A profile made before the plugin was installed has neither its table nor its version.
        connection.execute("DROP TABLE example_notes")
        connection.execute("DROP TABLE alembic_version_example")
    status = run_cli("status")
    assert status.exit_code == 1
    assert "tables of plugin 'example'" in status.stdout and "are absent" in status.stdout
    assert "veglia storage migrate" in status.stdout
    migrated = run_cli("storage", "migrate")
    assert migrated.exit_code == 0, migrated.output
    assert "already at schema" in migrated.stdout
    assert "Migrated the tables of plugin 'example' from absent to 0001" in migrated.stdout
    assert run_cli("status").exit_code == 0
    assert "schema of example\t0001 (needs 0001)" in run_cli("storage", "info", "--raw").stdout

    from veglia.storage import StorageBackend

    storage = StorageBackend(f"sqlite:///{database}", database.parent / "repo")
    assert storage.schema_differences()["example"] == []
    storage.close()


def test_an_external_package_on_plugin_api_alone_runs_a_job_end_to_end(
    example_plugin, profile, run_cli, tmp_path
):
    """The example package imports nothing of veglia but ``veglia.plugin_api``; with it
    installed, a job runs through its scheduler, inside its job-script wrap, is watched by
    its monitor, and leaves a note in its own table that ``process show`` prints."""
    import ast

    from veglia import engine, orm
    from veglia.entry_points import CalculationFactory, clear_cache

    package = EXAMPLE / "veglia_example_plugin"
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("veglia."):
                assert node.module == "veglia.plugin_api", f"{path.name}: {node.module}"
    clear_cache()
    computer = orm.Computer(
        label="setsid",
        hostname="localhost",
        transport_type="core.local",
        scheduler_type="example.setsid",
        properties={"workdir": str(tmp_path / "work"), "minimum_poll_interval": 0.2},
    ).store()
    computer.configure()
    builder = CalculationFactory("core.shell").get_builder()
    builder.command = orm.Str("echo NaN >> out.log; echo started; exit 4")
    builder.metadata.computer = "setsid"
    builder.monitors = {"nan": {"entry_point": "example.nan_guard", "kwargs": {"limit": 5}}}
    _, node = engine.run_get_node(builder)
    assert node.computer_label == "setsid" and node.job_id.isdigit()  # its scheduler ran it
    assert node.exit_status == 400, node.exit_message  # the command's own exit 4
    wraps = [wrap["name"] for wrap in node.get_attribute("job_script_wraps")]
    assert "example.stamp" in wraps, wraps
    shown = run_cli("-p", "test", "process", "show", str(node.pk))
    assert shown.exit_code == 0, shown.output
    # The wrap's file, retrieved, became a row of the plugin's own table.
    assert re.search(r"Example notes.*exit 4 on \S+", shown.stdout, re.DOTALL), shown.stdout

    # Its monitor stops a job, through its scheduler's kill: nothing of the job runs on.
    marker = f"sleep 300.{node.pk}"
    builder.command = orm.Str(
        f"echo NaN NaN NaN > out.log; bash -c 'exec -a \"{marker}\" sleep 300'"
    )
    builder.monitors = {"nan": {"entry_point": "example.nan_guard", "kwargs": {"limit": 1}}}
    _, stopped = engine.run_get_node(builder)
    assert stopped.exit_status == 150, stopped.exit_message
    assert "out.log has 3 NaN values (limit 1)" in stopped.exit_message
    left = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True)
    assert left.stdout == "", f"still running: {left.stdout}"


def test_the_external_package_passes_veglia_s_contracts_in_its_own_tests(tmp_path):
    from test_contracts_for_plugins import _install, _pytest

    package = tmp_path / EXAMPLE.name
    shutil.copytree(EXAMPLE, package)
    _install(package, tmp_path / "site")
    result = _pytest(package, tmp_path / "site")
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.fullmatch(r"\d+ passed in .*", result.stdout.strip().splitlines()[-1]), result.stdout
