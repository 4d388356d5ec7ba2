"""The CLI imports a command's module only when the command runs, so that ``veglia
--version`` and each command start quickly (figures in bench/cli_startup.py, not here)."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys

import click
import pytest

import veglia.cli
from veglia.cli.main import BUILTIN_COMMANDS, cli


def _loaded_after(code: str) -> set[str]:
    result = subprocess.run(
        [sys.executable, "-c", f"{code}; import sys; print(' '.join(sys.modules))"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return set(result.stdout.split())


def _run_then_print(args: list[str], printed: str) -> subprocess.CompletedProcess:
    """Run ``veglia ARGS`` in a fresh interpreter, then print ``printed`` (an expression
    list, with ``gc``, ``sys`` and ``get_storage`` imported) on the last line; VEGLIA_HOME
    is the test's."""
    code = (
        "from veglia.cli.main import main\n"
        f"try:\n    main({args!r})\nexcept SystemExit:\n    pass\n"
        "import gc, sys\nfrom veglia.manage import get_storage\n"
        f"print({printed})"
    )
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )


def test_importing_the_cli_loads_no_database_engine_or_rich():
    loaded = _loaded_after("import veglia.cli.main")
    heavy = {"sqlalchemy", "plumpy", "rich", "paramiko", "kiwipy", "veglia.engine", "veglia.orm"}
    assert not heavy & loaded, sorted(heavy & loaded)


def test_docutils_is_loaded_when_a_docstring_is_read_not_before():
    assert "docutils" not in _loaded_after("import veglia.docstrings, veglia.cli.cmd_monitor")


def test_a_command_loads_only_its_own_module():
    loaded = _loaded_after("from veglia.cli.main import cli; cli.get_command(None, 'config')")
    assert "veglia.cli.cmd_config" in loaded
    assert not {"veglia.cli.cmd_process", "veglia.cli.cmd_node", "sqlalchemy"} & loaded


def test_every_command_module_is_listed_with_its_help():
    """A new built-in command must be in BUILTIN_COMMANDS, whose help text is the one
    ``veglia --help`` shows: the command's own, as click shortens it."""
    listed = {}
    for module_info in pkgutil.iter_modules(veglia.cli.__path__):
        if not module_info.name.startswith("cmd_"):
            continue
        module = importlib.import_module(f"veglia.cli.{module_info.name}")
        for command in getattr(module, "COMMANDS", []):
            listed[command.name] = (module.__name__, command)
    assert set(listed) == set(BUILTIN_COMMANDS)
    for name, (module, command) in listed.items():
        home, attribute, short_help = BUILTIN_COMMANDS[name]
        assert (home, attribute) == (module, getattr(command.callback, "__name__", attribute))
        assert cli.get_command(None, name) is command
        assert short_help == command.get_short_help_str(limit=1000), name


def test_the_process_group_has_its_control_commands():
    process = cli.get_command(None, "process")
    assert isinstance(process, click.Group)
    names = {"list", "show", "kill", "pause", "play", "unblock", "repair", "status", "dump"}
    assert names <= set(process.list_commands(click.Context(process)))


def test_every_process_subcommand_is_listed_with_its_help():
    """``veglia process --help`` shows each lazy sub-command's own help, as click shortens
    it, and each name gives the command of that name."""
    process = cli.get_command(None, "process")
    for name, (module, attribute, short_help) in process.lazy_commands.items():
        command = getattr(importlib.import_module(module), attribute)
        assert process.get_command(None, name) is command
        assert command.name == name
        assert short_help == command.get_short_help_str(limit=1000), name


@pytest.mark.parametrize("command", ["process list", "process show", "node show"])
def test_process_list_and_show_and_node_show_read_without_the_orm(run_cli, command):
    """``process list``, ``process show`` and ``node show`` run on Core tables: SQLAlchemy's
    ORM, and the ORM classes mapped on them, are about a quarter of a command's start-up;
    on SQLite, SQLAlchemy's PostgreSQL dialect is not loaded either (about 30 ms)."""
    import veglia
    from veglia import orm

    assert run_cli("presto", "--no-broker").exit_code == 0
    veglia.load_profile()
    node = orm.CalcJobNode(process_type="core.shell")
    node.label = "listed-job"
    node.process_state = "waiting"
    node.computer_pk = orm.load_computer("localhost").pk
    node.store()
    node.add_log("REPORT", "a line of its log")
    args = command.split() + ([str(node.pk)] if command.endswith("show") else [])
    result = _run_then_print(
        args,
        "'loaded:', 'sqlalchemy.orm' in sys.modules, 'veglia.storage.models' in sys.modules,"
        " 'sqlalchemy.dialects.postgresql' in sys.modules",
    )
    assert "listed-job" in result.stdout and "Waiting" in result.stdout, result.stdout
    if command == "process show":
        assert "a line of its log" in result.stdout, result.stdout
    assert result.stdout.strip().splitlines()[-1] == "loaded: False False False", result.stdout


def test_a_command_leaves_its_start_up_out_of_the_collector_and_closes_its_connections(
    run_cli,
):
    """The cyclic collector waits while a command loads (click, rich, SQLAlchemy, the
    command's module: no garbage, 70,000 objects it walked again and again), then runs for
    the command with what was loaded frozen, so a long command (watch, run, python) still
    collects its garbage; at the end the database connections are closed (PostgreSQL gets
    its goodbye, which an exit without the collector's walk would skip) and what is left is
    frozen for the exit."""
    assert run_cli("presto", "--no-broker").exit_code == 0
    result = _run_then_print(
        ["process", "list", "-a"],
        "'collector:', gc.get_stats()[2]['collections'], gc.isenabled(), "
        "gc.get_freeze_count() > 10000, get_storage().engine.pool.checkedin()",
    )
    assert "No process matches" in result.stdout  # the command ran, on the database
    full_collections, enabled, frozen, idle_connections = (
        result.stdout.strip().splitlines()[-1].split()[1:]
    )
    assert (full_collections, enabled, frozen, idle_connections) == ("0", "True", "True", "0")


def test_a_command_on_an_up_to_date_profile_does_not_load_alembic(run_cli):
    """The schema check reads the recorded revision; Alembic is for migrating, and for
    saying what is wrong with a schema that is not this release's."""
    assert run_cli("presto", "--no-broker").exit_code == 0
    result = _run_then_print(
        ["process", "list", "-a"], "'loaded alembic:', 'alembic' in sys.modules"
    )
    assert "No process matches" in result.stdout  # the command ran, on the database
    assert result.stdout.strip().splitlines()[-1] == "loaded alembic: False", result.stdout


def test_help_loads_the_plugins_but_not_the_database_engine():
    """``veglia --help`` lists plugins' commands, so it loads every plugin's hook module:
    those (Fusion's and Tower's among them) defer SQLAlchemy and the ORM to their hooks."""
    code = (
        "import contextlib, sys\n"
        "from veglia.cli.main import main\n"
        "with contextlib.suppress(SystemExit):\n    main(['--help'])\n"
        "print('LOADED', ' '.join(sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    loaded = set(result.stdout.split("LOADED", 1)[1].split())
    assert "veglia.plugins.tower.hooks" in loaded and "veglia.plugins.fusion.hooks" in loaded
    assert not {"sqlalchemy", "veglia.orm", "plumpy"} & loaded
