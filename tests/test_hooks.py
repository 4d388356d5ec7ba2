"""The hook catalogue stays documented, tested and honest."""

from __future__ import annotations

import ast
import os
import re
import signal
import subprocess
import sys
import time
import typing
from pathlib import Path

import pytest

import veglia.plugin_manager as plugin_manager
from veglia import hookspecs, plugin_types
from veglia.config.options import Option, get_options
from veglia.docstrings import markdown_doc
from veglia.engine.calcjob.job_script import JobScriptWrap, wrap_commands
from veglia.engine.calcjob.trace import TraceRecord
from veglia.exceptions import ConfigurationError, PluginError
from veglia.orm.computers import Computer
from veglia.orm.process_nodes import CalcJobNode
from veglia.transports import Transport

ROOT = Path(__file__).resolve().parent.parent


def test_every_hook_has_a_docstring():
    for name in hookspecs.hook_names():
        doc = getattr(hookspecs, name).__doc__ or ""
        assert len(doc.strip()) > 40, f"hook {name} needs a docstring that explains it"


def test_hook_reference_is_up_to_date():
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_hooks_doc.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr


def test_hook_reference_is_markdown_not_rest():
    """docs/hooks.md is a Markdown page: the hookspecs' reST is converted, not copied."""
    page = (ROOT / "docs" / "hooks.md").read_text()
    prose = re.sub(r"(?ms)^```.*?^```$", "", page)  # the fenced examples aside
    assert "``" not in prose
    assert not re.findall(r":[a-z]+(?::[a-z]+)?:`", prose)
    assert not re.findall(r"(?m)^\s*\.\. [\w-]+::", prose)
    assert "[`PluginMigrations`](plugins.md#tables-of-your-own)" in page
    assert "`Profile.url_with_password`" in page


def test_rest_of_a_docstring_as_markdown():
    doc = """Stop *early*, **always**, with ``x`` and :class:`a.b.C`; see
    `the guide <https://example.org/g>`_ and :meth:`a.b.C.run`.

    .. note:: Only new bytes,
       never twice.

    .. versionchanged:: 2.1 Reads ``y`` too.

    Example::

        run(x)

    * one, ``a*b``
    * two_

    :param x: the value.
    :type x: int
    """
    assert markdown_doc(doc, {"a.b.C": "monitors.md#results"}) == (
        "Stop *early*, **always**, with `x` and [`C`](monitors.md#results); see\n"
        "[the guide](https://example.org/g) and `C.run`.\n"
        "\n"
        "> **Note:** Only new bytes,\n"
        "> never twice.\n"
        "\n"
        "> **Changed in version 2.1:** Reads `y` too.\n"
        "\n"
        "Example:\n"
        "\n"
        "```text\n"
        "run(x)\n"
        "```\n"
        "\n"
        "- one, `a*b`\n"
        "- two\\_\n"
        "\n"
        "- `x`: the value."
    )


def test_reading_a_docstring_leaves_docutils_as_it_was():
    """Sphinx's directives are docutils' only while veglia reads a docstring: a document
    docutils reads afterwards does not know ``versionadded``."""
    from docutils.core import publish_doctree
    from docutils.parsers.rst import directives

    before = directives.directive
    assert markdown_doc(".. code-block:: sh\n   :linenos:\n\n   ls\n\n.. nope:: x") == (
        "```sh\nls\n```\n\nx"
    )
    assert directives.directive is before
    tree = publish_doctree(".. versionadded:: 2.0", settings_overrides={"report_level": 5})
    assert "Unknown directive" in tree.pformat()


def _hook_annotations() -> dict[str, dict[str, object]]:
    """Every hook's resolved annotations, with the names hookspecs imports for type checkers
    only (its ``if TYPE_CHECKING:`` block, run here): a name that does not resolve fails."""
    tree = ast.parse(Path(hookspecs.__file__).read_text())
    block = next(
        node
        for node in tree.body
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"
    )
    names: dict[str, object] = dict(vars(hookspecs))
    exec(compile(ast.Module(body=block.body, type_ignores=[]), "hookspecs", "exec"), names)
    return {
        name: typing.get_type_hints(getattr(hookspecs, name), globalns=names)
        for name in hookspecs.hook_names()
    }


def test_every_hook_is_typed_with_what_it_passes():
    """A plugin author's editor and type checker know what each hook hands over: a
    process node, a computer, a transport, a trace record, never ``Any``."""
    untyped = []
    for hook, hints in _hook_annotations().items():
        for name, hint in hints.items():
            if name in {"node", "computer", "transport", "record"} and (
                hint is typing.Any or typing.Any in typing.get_args(hint)
            ):
                untyped.append(f"{hook}({name})")
        returned = hints.get("return")
        if typing.get_origin(returned) is list and typing.get_args(returned) == (typing.Any,):
            untyped.append(f"{hook} -> list[Any]")
    assert not untyped, untyped
    hints = _hook_annotations()
    assert hints["collect_trace"]["record"] is TraceRecord
    assert hints["collect_trace"]["transport"] == Transport | None
    assert hints["register_options"]["return"] == list[Option]


def _members(protocol: type) -> set[str]:
    return {
        name
        for base in protocol.__mro__
        if typing.Protocol in base.__mro__ and base is not typing.Protocol
        for name in (*vars(base).get("__annotations__", {}), *vars(base))
        if not name.startswith("_")
    }


def test_the_objects_hooks_get_have_what_their_protocols_promise(profile):
    """The engine hands hooks a Profile, a CalcJobNode and a Computer: each has every
    member the Protocol a plugin is typed against names."""
    node = CalcJobNode(process_type="x")
    computer = Computer("here", "localhost", "core.local", "core.direct")
    for protocol, instance in [
        (plugin_types.ProfileLike, profile),
        (plugin_types.ProcessNodeLike, node),
        (plugin_types.CalcJobNodeLike, node),
        (plugin_types.ComputerLike, computer),
    ]:
        members = _members(protocol)
        assert members
        missing = [m for m in members if not hasattr(type(instance), m) and m not in vars(instance)]
        assert not missing, f"{type(instance).__name__} lacks {missing} of {protocol.__name__}"


def test_every_hook_has_a_test():
    tests = "\n".join(path.read_text() for path in (ROOT / "tests").glob("test_*.py"))
    for name in hookspecs.hook_names():
        assert re.search(rf"def test_\w*{name}\w*\(", tests), f"no test_*{name}* test"


@pytest.fixture
def manager_with(monkeypatch):
    def install(*plugins):
        manager = plugin_manager.build_plugin_manager(only=[])
        for plugin in plugins:
            manager.register(plugin)
        monkeypatch.setattr(plugin_manager, "_manager", manager)
        return manager

    return install


class _OptionPlugin:
    def __init__(self, *options):
        self.options = options

    @hookspecs.hookimpl
    def register_options(self):
        return list(self.options)


def test_register_options_adds_to_the_catalogue(manager_with):
    manager_with(_OptionPlugin(Option("extra.level", "An extra option.", default=1, parse=int)))
    assert get_options()["extra.level"].validate("7") == 7


def test_register_options_clash_names_both_sides(manager_with):
    manager_with(_OptionPlugin(Option("storage.url", "Mine now.")))
    with pytest.raises(ConfigurationError, match="clashes with the one of 'veglia'"):
        get_options()


def test_register_options_must_return_options(manager_with):
    manager_with(_OptionPlugin({"name": "not.an.option"}))
    with pytest.raises(ConfigurationError, match="must return veglia.plugin_types.Option"):
        get_options()


class _JobOptionPlugin:
    def __init__(self, *options):
        self.options = options

    @hookspecs.hookimpl
    def calcjob_options(self):
        return list(self.options)


def _lower_case(value, _=None):
    return None if value.islower() else f"must be lower case, not {value!r}"


def test_calcjob_options_are_ports_of_every_calc_job_validated_and_stored(manager_with, profile):
    from veglia import engine, orm
    from veglia.engine import InputValidationError
    from veglia.engine.calcjob.options import CalcJobOption
    from veglia.entry_points import CalculationFactory

    manager_with(
        _JobOptionPlugin(
            CalcJobOption("mylab_tag", str, "Tag of the job.", validator=_lower_case),
            CalcJobOption("mylab_level", int, "How hard to look.", default=3),
        )
    )
    add = CalculationFactory("core.arithmetic.add")  # its spec anew: for these plugins
    ports = add.spec().inputs["metadata"]["options"]
    assert list(ports)[-2:] == ["mylab_tag", "mylab_level"]  # after the built-in ones
    assert ports["mylab_tag"].help == "Tag of the job." and not ports["mylab_tag"].required
    builder = add.get_builder()
    with pytest.raises(InputValidationError, match="must be lower case, not 'LOUD'"):
        builder.metadata.options.mylab_tag = "LOUD"
    with pytest.raises(InputValidationError, match="mylab_level"):
        builder.metadata.options.mylab_level = "high"
    builder.metadata.options.mylab_tag = "quiet"
    builder.x, builder.y = orm.Int(1), orm.Int(2)
    outputs, node = engine.run_get_node(builder)
    assert outputs["sum"].value == 3
    assert node.options["mylab_tag"] == "quiet" and node.options["mylab_level"] == 3
    manager_with()  # the plugin is gone, and its options with it
    with pytest.raises(InputValidationError, match="Unknown input 'metadata.options.mylab_tag'"):
        add.get_builder().metadata.options.mylab_tag = "quiet"


def test_calcjob_options_clash_or_wrong_type_names_the_plugin(manager_with):
    from veglia.engine.calcjob.options import CalcJobOption
    from veglia.entry_points import CalculationFactory

    add = CalculationFactory("core.arithmetic.add")
    manager_with(_JobOptionPlugin(CalcJobOption("queue_name", str, "Mine now.")))
    with pytest.raises(ConfigurationError, match="'queue_name' of plugin .* clashes with the "):
        add.spec()
    mine = CalcJobOption("mylab_tag", str, "Tag.")
    manager_with(_JobOptionPlugin(mine), _JobOptionPlugin(mine))
    with pytest.raises(ConfigurationError, match="'mylab_tag' of plugin .* clashes with the "):
        add.spec()
    manager_with(_JobOptionPlugin(("mylab_tag", str, None, "Tag.")))
    with pytest.raises(ConfigurationError, match="must return veglia.plugin_types.CalcJobOp"):
        add.spec()
    with pytest.raises(ValueError, match="must be a lower-case word"):
        CalcJobOption("my-tag", str, "Tag.")


class _PropertyPlugin:
    def __init__(self, *properties):
        self.properties = properties

    @hookspecs.hookimpl
    def computer_properties(self):
        return list(self.properties)


def _gpus(text):
    if not str(text).strip().isdigit():
        raise ValueError(f"{text!r} is not a number of GPUs")
    return int(text)


def test_computer_properties_are_accepted_shown_and_set_by_computer_setup(
    manager_with, profile, tmp_path
):
    from click.testing import CliRunner

    from veglia.cli.cmd_computer import computer_group
    from veglia.cli.state import CliState
    from veglia.orm import Computer, load_computer
    from veglia.orm.computers import ComputerProperty

    manager_with(
        _PropertyPlugin(
            ComputerProperty("mylab_gpus", 0, "GPUs per node.", parse=_gpus),
            ComputerProperty("mylab_on", False, "Use mylab (yes/no)."),
        )
    )
    assert load_computer("localhost").get_property("mylab_gpus") == 0
    with pytest.raises(ConfigurationError, match="Unknown computer properties nope; .*mylab_on"):
        Computer("x", "localhost", "core.local", "core.direct", properties={"nope": 1})

    def cli(*args):  # in this process, which has the plugin (the group alone: no logging set)
        return CliRunner().invoke(computer_group, args, obj=CliState("test", False))

    shown = cli("setup", "--help").output
    assert "--mylab-gpus TEXT" in shown and "GPUs per node. [default: 0]" in shown
    assert "--mylab-on TEXT" in shown and "Use mylab (yes/no). [default: no]" in shown
    base = ("setup", "-n", "-L", "lab", "-H", "localhost", "-T", "core.local", "-S")
    base += ("core.direct", "-w", str(tmp_path))
    refused = cli(*base, "--mylab-gpus", "many")
    assert "mylab_gpus: 'many' is not a number of GPUs" in str(refused.exception)
    refused = cli(*base, "--mylab-on", "perhaps")
    assert "'perhaps' is not yes or no" in str(refused.exception)
    result = cli(*base, "--mylab-gpus", "4", "--mylab-on", "yes")
    assert result.exit_code == 0, result.output
    lab = load_computer("lab")
    assert lab.properties["mylab_gpus"] == 4 and lab.get_property("mylab_on") is True
    shown = cli("show", "lab").output
    assert re.search(r"mylab_gpus\s+4\s", shown) and re.search(r"mylab_on\s+yes\s", shown)

    manager_with()  # the plugin is gone: its properties stay on the computer, unused
    lab = load_computer("lab")
    assert lab.properties["mylab_gpus"] == 4
    shown = cli("show", "lab").output
    assert re.search(r"mylab_gpus\s+4 \(of a plugin not loaded\)", shown)
    assert "--mylab-gpus" not in cli("setup", "--help").output


def test_computer_properties_clash_or_wrong_type_names_the_plugin(manager_with, profile):
    from veglia.orm.computers import ComputerProperty, property_defaults

    manager_with(_PropertyPlugin(ComputerProperty("workdir", "/x", "Mine now.")))
    with pytest.raises(ConfigurationError, match="'workdir' of plugin .* clashes with the one"):
        property_defaults()
    manager_with(_PropertyPlugin(ComputerProperty("hostname", "", "A field.")))
    with pytest.raises(ConfigurationError, match="'hostname' of plugin .* is a field of every"):
        property_defaults()
    manager_with(_PropertyPlugin({"name": "mylab_on"}))
    with pytest.raises(ConfigurationError, match="must return veglia.plugin_types.ComputerPr"):
        property_defaults()


def test_process_show_tables_are_printed_after_the_properties(manager_with, profile, capsys):
    from veglia import engine, orm
    from veglia.cli.process_show import show_process
    from veglia.entry_points import CalculationFactory

    class Tables:
        @hookspecs.hookimpl
        def process_show_tables(self, node):
            return [
                (("Mylab", "Value"), [("pk again", node.pk), ("state", node.process_state)]),
                (("Empty", "Value"), []),  # no rows: not printed
            ]

    class Broken:
        @hookspecs.hookimpl
        def process_show_tables(self, node):
            raise RuntimeError("table bug")

    manager_with(Tables(), Broken())
    _, node = engine.run_get_node(CalculationFactory("core.shell"), command=orm.Str("true"))
    capsys.readouterr()
    show_process(node, log_lines=0)
    out, err = capsys.readouterr()
    assert re.search(rf"pk again\s+{node.pk}\s", out) and re.search(r"state\s+finished", out)
    assert out.index("exit status") < out.index("Mylab") < out.index("Inputs")
    assert "Empty" not in out
    assert "plugin" in err and "failed to show its tables: table bug" in err


def test_register_commands_cannot_replace_builtins(manager_with, capsys):
    import click

    from veglia.cli import main as cli_main

    class Hijack:
        @hookspecs.hookimpl
        def register_commands(self, cli):
            @cli.command("status")
            def fake_status():
                click.echo("hijacked")

    manager_with(Hijack())
    from veglia.cli.cmd_status import status

    cli_main.VegliaGroup._plugins_added = False
    cli_main._add_plugin_commands()
    assert cli_main.cli.get_command(None, "status") is status
    assert "tried to replace the built-in command 'status'" in capsys.readouterr().err


def test_profile_loaded_error_stops_loading(manager_with, veglia_home):
    from veglia import load_profile
    from veglia.config import Config
    from veglia.manage import active_profile

    class Refuse:
        @hookspecs.hookimpl
        def profile_loaded(self, profile):
            raise ConfigurationError(f"plugin refuses {profile.name}")

    Config().add_profile("p")
    manager_with(Refuse())
    with pytest.raises(ConfigurationError, match="plugin refuses p"):
        load_profile("p")
    assert active_profile() is None


def test_collect_trace_and_trace_ready_see_every_job(manager_with, profile):
    from veglia import engine, orm
    from veglia.entry_points import CalculationFactory

    seen = []

    class Reporter:
        @hookspecs.hookimpl
        def collect_trace(self, node, transport, record):
            record.queue = "from-plugin"
            record.extras["reporter"] = {"a field": [1, 2]}  # one the core has never heard of
            seen.append(("collect", transport.cwd == node.remote_workdir))

        @hookspecs.hookimpl
        def trace_ready(self, record):
            seen.append(("ready", record.status, record.queue, record.exit))
            seen.append(("extras", record.extras.get("reporter")))

    class Broken:
        @hookspecs.hookimpl
        def collect_trace(self, record):
            raise RuntimeError("plugin bug")

        @hookspecs.hookimpl
        def trace_ready(self, record):
            raise RuntimeError("reporter bug")

    manager_with(Reporter(), Broken())
    shell = CalculationFactory("core.shell")
    _, node = engine.run_get_node(shell, command=orm.Str("exit 2"))
    assert node.exit_status == 400
    assert seen == [
        ("collect", True),
        ("ready", "FAILED", "from-plugin", 2),
        ("extras", {"a field": [1, 2]}),
    ]
    assert node.get_attribute("trace_record")["extras"] == {"reporter": {"a field": [1, 2]}}
    warnings = [log.message for log in node.logs if log.levelname == "WARNING"]
    assert any("failed to collect the trace: plugin bug" in m for m in warnings)
    assert any("failed to report the trace: reporter bug" in m for m in warnings)


def test_computer_contacted_comes_before_a_submission_and_after_each_poll(manager_with, profile):
    from veglia import engine, orm
    from veglia.entry_points import CalculationFactory

    seen = []

    class Keeper:
        @hookspecs.hookimpl
        def computer_contacted(self, computer, transport):
            code, out, _ = transport.exec_command("echo here")
            seen.append((computer.label, code, out.strip()))

    class Broken:
        @hookspecs.hookimpl
        def computer_contacted(self):
            raise RuntimeError("plugin bug")

    manager_with(Keeper(), Broken())
    _, node = engine.run_get_node(CalculationFactory("core.shell"), command=orm.Str("sleep 1"))
    assert node.is_finished_ok  # a broken plugin does not stop the job
    assert len(seen) >= 2 and set(seen) == {("localhost", 0, "here")}


def test_job_stopped_beside_ends_the_job_as_its_monitor_would(manager_with, profile, tmp_path):
    from veglia import engine, orm
    from veglia.entry_points import CalculationFactory

    class Outside:
        @hookspecs.hookimpl
        def job_stopped_beside(self, node, folder):
            if (folder / "stop.txt").is_file():
                return {"name": "outside", "message": (folder / "stop.txt").read_text().strip()}
            return None

    class Broken:
        @hookspecs.hookimpl
        def job_stopped_beside(self):
            raise RuntimeError("plugin bug")

    manager_with(Outside(), Broken())
    shell = CalculationFactory("core.shell")
    options = {"additional_retrieve_list": ["stop.txt"]}
    _, node = engine.run_get_node(
        shell, command=orm.Str("echo seen it > stop.txt"), metadata={"options": options}
    )
    assert node.exit_status == 150
    assert node.exit_message == "Monitor outside stopped the job: seen it"
    assert node.get_attribute("stopped_by_monitor")["name"] == "outside"
    _, quiet = engine.run_get_node(shell, command=orm.Str("true"))
    assert quiet.is_finished_ok  # nothing said, and the broken plugin is only logged
    warnings = [log.message for log in quiet.logs if log.levelname == "WARNING"]
    assert any("failed to read the job's stop: plugin bug" in m for m in warnings)


def test_trace_updated_sees_a_job_submitted_then_running(manager_with, profile):
    from veglia import engine, orm
    from veglia.entry_points import CalculationFactory

    seen = []

    class Reporter:
        @hookspecs.hookimpl
        def trace_updated(self, node, record):
            seen.append((record.status, record.native_id == node.job_id, record.start))

    class Broken:
        @hookspecs.hookimpl
        def trace_updated(self, record):
            raise RuntimeError("live reporter bug")

    manager_with(Reporter(), Broken())
    shell = CalculationFactory("core.shell")
    _, node = engine.run_get_node(shell, command=orm.Str("sleep 2"))
    assert node.is_finished_ok
    assert seen[0] == ("SUBMITTED", True, None)
    assert [s[0] for s in seen] == ["SUBMITTED", "RUNNING"]
    assert seen[1][2] == int(node.get_attribute("started_at") * 1000)
    warnings = [log.message for log in node.logs if log.levelname == "WARNING"]
    assert sum("failed to report the trace: live reporter bug" in m for m in warnings) == 2


class _DaemonPlugin:
    def __init__(self, fail: bool = False):
        self.fail = fail
        self.calls: list[str] = []

    @hookspecs.hookimpl
    def daemon_started(self, profile):
        self.calls.append(f"started {profile.name}")
        if self.fail:
            raise RuntimeError("cannot start my thread")

    @hookspecs.hookimpl
    def daemon_stopping(self, profile):
        self.calls.append(f"stopping {profile.name}")


def test_daemon_started_and_daemon_stopping_reach_every_plugin_even_past_a_broken_one(
    manager_with, profile, caplog
):
    from veglia.engine.daemon.housekeeping import call_daemon_hook as _call_daemon_hook

    broken, working = _DaemonPlugin(fail=True), _DaemonPlugin()
    manager_with(broken, working)
    _call_daemon_hook("daemon_started", profile, start_options={})
    _call_daemon_hook("daemon_stopping", profile)
    assert working.calls == ["started test", "stopping test"]
    assert broken.calls == ["started test", "stopping test"]
    assert "failed in daemon_started: cannot start my thread" in caplog.text


def test_the_tower_sender_starts_through_daemon_started_and_no_core_module_names_it():
    for module in (ROOT / "core" / "engine" / "daemon").glob("*.py"):
        assert "tower" not in module.read_text().lower(), module
    from veglia.plugins.tower import hooks

    assert hasattr(hooks, "daemon_started") and hasattr(hooks, "daemon_stopping")


def test_every_error_the_core_raises_on_purpose_is_in_the_one_tree():
    """Exceptions are declared in veglia.exceptions only, each a VegliaError."""
    import ast

    from veglia import exceptions

    for path in (ROOT / "core").rglob("*.py"):
        if path.name == "exceptions.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and any(
                getattr(base, "id", "").endswith(("Error", "Exception")) for base in node.bases
            ):
                raise AssertionError(f"{path.relative_to(ROOT)} declares {node.name}")
    documented = exceptions.__doc__ or ""
    for name in exceptions.__all__:
        if issubclass(getattr(exceptions, name), exceptions.VegliaError):
            assert name in documented, f"{name} is missing from the tree in the docstring"


class _Wrap:
    """A job_script_wrap plugin that logs where each of its parts ran."""

    def __init__(self, name, **parts):
        self.wrap = JobScriptWrap(name=name, **parts)

    @hookspecs.hookimpl
    def job_script_wrap(self, node, computer):
        return self.wrap


def test_job_script_wrap_puts_before_prefix_and_after_around_the_commands(manager_with, profile):
    from veglia import engine, orm
    from veglia.entry_points import CalculationFactory

    outer = _Wrap(
        "test.outer",
        before="echo outer-before >> wraps.log",
        prefix="env OUTER=o",
        after='echo "outer-after $veglia_exit" >> wraps.log',
        live_trace=True,
    )
    inner = _Wrap(
        "test.inner",
        before="echo inner-before >> wraps.log",
        prefix="env INNER=i",
        after="echo inner-after >> wraps.log",
    )
    # pluggy calls the last registered first: the inner one is registered first.
    manager_with(inner, outer)
    builder = CalculationFactory("core.shell").get_builder()
    builder.command = orm.Str('echo "command $OUTER$INNER" >> wraps.log; exit 3')
    builder.outputs = orm.List(["wraps.log"])
    _, node = engine.run_get_node(builder)
    assert node.exit_status == 400, node.exit_message  # the command's own exit, kept
    assert node.outputs["files__wraps_log"].get_content().decode().splitlines() == [
        "outer-before",
        "inner-before",
        "command oi",
        "inner-after",
        "outer-after 3",
    ]
    assert node.get_attribute("job_script_wraps") == [
        {"name": "test.outer", "live_trace": True},
        {"name": "test.inner", "live_trace": False},
    ]


def test_job_script_wrap_after_runs_once_when_the_scheduler_terminates_the_job(tmp_path):
    wraps = [JobScriptWrap("test.sampler", after='echo "after $veglia_exit" >> after.log')]
    script = "\n".join(["#!/bin/bash", *wrap_commands(["sleep 30"], wraps), "echo append"])
    (tmp_path / "job.sh").write_text(script + "\n")
    job = subprocess.Popen(["bash", "job.sh"], cwd=tmp_path, start_new_session=True)
    deadline = time.monotonic() + 10
    while (
        b"sleep"
        not in subprocess.run(["ps", "-g", str(job.pid), "-o", "comm="], capture_output=True).stdout
    ):
        assert time.monotonic() < deadline, "the job's command never started"
        time.sleep(0.05)
    os.killpg(job.pid, signal.SIGTERM)  # as a scheduler's cancel: the whole job at once
    assert job.wait(timeout=10) == 143
    assert (tmp_path / "after.log").read_text() == "after 143\n"  # once, and no append text


def test_job_script_wrap_that_fails_stops_the_submission_with_the_plugins_name(
    manager_with, profile
):
    from veglia import engine, orm
    from veglia.entry_points import CalculationFactory

    class Broken:
        @hookspecs.hookimpl
        def job_script_wrap(self, node, computer):
            return "echo not a wrap"

    manager_with(Broken())
    with pytest.raises(PluginError, match="job_script_wrap must return a JobScriptWrap"):
        engine.run_get_node(CalculationFactory("core.shell"), command=orm.Str("true"))
    with pytest.raises(PluginError, match="must be a lower-case plugin name"):
        JobScriptWrap("Bad Name")
    with pytest.raises(PluginError, match="cannot hold a newline"):
        JobScriptWrap("test.x", prefix="a\nb")


def test_job_script_wrap_files_land_beside_the_job_and_may_not_replace_its_own(
    manager_with, profile
):
    from veglia import engine, orm
    from veglia.entry_points import CalculationFactory

    helper = _Wrap(
        "test.helper",
        before=". ./_helper.sh",
        files={"_helper.sh": "echo helper-sourced >> wraps.log"},
    )
    manager_with(helper)
    builder = CalculationFactory("core.shell").get_builder()
    builder.command = orm.Str("echo command >> wraps.log")
    builder.outputs = orm.List(["wraps.log"])
    _, node = engine.run_get_node(builder)
    assert node.is_finished_ok, node.exit_message
    log = node.outputs["files__wraps_log"].get_content().decode().splitlines()
    assert log == ["helper-sourced", "command"]
    assert node.get_object_content("_helper.sh") == b"echo helper-sourced >> wraps.log"

    # A wrap's file named as the submit script, or as another wrap's: no job, and why.
    for clash in ("_veglia_submit.sh", "_helper.sh"):
        manager_with(helper, _Wrap("test.clash", files={clash: "true"}))
        with pytest.raises(PluginError, match=rf"plugin test\.\w+: its file {clash} would replace"):
            engine.run_get_node(CalculationFactory("core.shell"), command=orm.Str("true"))


class _TablesPlugin:
    def __init__(self, migrations):
        self.migrations = migrations

    @hookspecs.hookimpl
    def storage_migrations(self):
        return self.migrations


def _own_table(name: str, table: str, tmp_path: Path):
    import sqlalchemy as sa

    from veglia.plugin_api import PluginMigrations

    metadata = sa.MetaData()
    sa.Table(table, metadata, sa.Column("id", sa.Integer, primary_key=True))
    versions = tmp_path / name
    versions.mkdir()
    (versions / "0001_first.py").write_text(
        "import sqlalchemy as sa\nfrom alembic import op\n"
        "revision = '0001'\ndown_revision = None\n"
        f"def upgrade():\n    op.create_table({table!r}, sa.Column('id', sa.Integer, "
        "primary_key=True))\n"
    )
    return PluginMigrations(name, metadata, versions, head="0001")


def test_storage_migrations_of_two_plugins_each_keep_their_own_version(manager_with, tmp_path):
    import sqlalchemy as sa

    from veglia.storage import StorageBackend

    manager_with(
        _TablesPlugin(_own_table("first", "first_things", tmp_path)),
        _TablesPlugin([_own_table("second", "second_things", tmp_path)]),
    )
    storage = StorageBackend(f"sqlite:///{tmp_path / 'db.sqlite'}", tmp_path / "repo")
    storage.migrate()
    storage.check_schema()
    with storage.engine.connect() as connection:
        for name in ("first", "second"):
            version = f"SELECT version_num FROM alembic_version_{name}"
            assert connection.exec_driver_sql(version).scalar() == "0001"
    assert {"first_things", "second_things"} <= set(sa.inspect(storage.engine).get_table_names())
    storage.close()


def test_storage_migrations_that_take_a_core_table_or_a_taken_name_are_refused(
    manager_with, tmp_path
):
    from veglia.storage import StorageBackend

    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    manager_with(_TablesPlugin(_own_table("mine", "nodes", tmp_path)))
    with pytest.raises(PluginError, match="declares table 'nodes', which veglia's core owns"):
        StorageBackend(url, tmp_path / "repo").check_schema()
    manager_with(
        _TablesPlugin(_own_table("same", "a_things", tmp_path)),
        _TablesPlugin(_own_table("same", "b_things", tmp_path / "same")),
    )
    with pytest.raises(PluginError, match="both name their migrations 'same'"):
        StorageBackend(url, tmp_path / "repo").check_schema()
    with pytest.raises(PluginError, match="1 to 40 lower-case letters"):
        _own_table("Has-Dash", "x", tmp_path)
