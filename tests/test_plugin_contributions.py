"""Plugins' contributions are gathered one way: through pluggy, one plugin at a time, so hook
tracing sees every call and a broken plugin costs only its own part."""

from __future__ import annotations

import re

import click
import pytest
from click.testing import CliRunner

import veglia.plugin_manager as plugin_manager
from veglia import hookspecs
from veglia.cli import cmd_daemon
from veglia.cli.process_show import show_process
from veglia.cli.state import CliState
from veglia.config.options import Option, get_options
from veglia.engine.calcjob.job_script import JobScriptWrap
from veglia.engine.calcjob.options import CalcJobOption
from veglia.exceptions import ConfigurationError
from veglia.orm.computers import ComputerProperty, property_defaults
from veglia.views.panels import Panel, plugin_panels

#: The hooks through which plugins contribute something (the others only get told).
CONTRIBUTING = {
    "register_options",
    "computer_properties",
    "calcjob_options",
    "job_script_wrap",
    "collect_trace",
    "job_stopped_beside",
    "overview_panels",
    "process_show_tables",
    "daemon_start_options",
    "daemon_status_lines",
}

#: Those where a broken plugin is shown or logged and the others still count.
ISOLATED = {
    "collect_trace",
    "job_stopped_beside",
    "overview_panels",
    "process_show_tables",
    "daemon_status_lines",
}


class Contributor:
    @hookspecs.hookimpl
    def register_options(self):
        return [Option("contrib.level", "A contributed option.", default=1, parse=int)]

    @hookspecs.hookimpl
    def computer_properties(self):
        return [ComputerProperty("contrib_on", False, "Contribute (yes/no).")]

    @hookspecs.hookimpl
    def calcjob_options(self):
        return [CalcJobOption("contrib_tag", str, "Tag of the job.")]

    @hookspecs.hookimpl
    def job_script_wrap(self, node, computer):
        return JobScriptWrap("contrib.wrap", before="contrib_seen=1")

    @hookspecs.hookimpl
    def collect_trace(self, record):
        record.extras["contributor"] = {"seen": True}

    @hookspecs.hookimpl
    def job_stopped_beside(self, node, folder):
        return None

    @hookspecs.hookimpl
    def overview_panels(self):
        return [Panel("Contributed", [("seats", 3)])]

    @hookspecs.hookimpl
    def process_show_tables(self, node):
        return [(("Contributed", "Value"), [("pk", node.pk)])]

    @hookspecs.hookimpl
    def daemon_start_options(self):
        return [click.Option(["--contrib-port"], default=8, help="The contributed port.")]

    @hookspecs.hookimpl
    def daemon_status_lines(self, start_options):
        return [f"contributed on port {start_options.get('contrib_port')}"]


class _RaisesIn:
    """Fails in each of the hooks named (plain functions: pluggy passes them nothing)."""

    def __init__(self, *hooks: str, message: str = "broken plugin bug") -> None:
        for hook in hooks:
            setattr(self, hook, hookspecs.hookimpl(specname=hook)(self._failing(message)))

    @staticmethod
    def _failing(message: str):
        def fail(*args, **kwargs):
            raise RuntimeError(message)

        return fail


@pytest.fixture
def monitored(monkeypatch):
    """Only the given plugins are loaded (by name); returns the calls pluggy's hook-call
    monitoring saw: (hook, the names of the plugins called)."""
    calls: list[tuple[str, tuple[str, ...]]] = []

    def install(**plugins):
        manager = plugin_manager.build_plugin_manager(only=[])
        for name, plugin in plugins.items():
            manager.register(plugin, name=name)
        manager.add_hookcall_monitoring(
            lambda hook, impls, kwargs: calls.append((hook, tuple(i.plugin_name for i in impls))),
            lambda outcome, hook, impls, kwargs: None,
        )
        monkeypatch.setattr(plugin_manager, "_manager", manager)
        # `daemon start` keeps the options it found: ask again for these plugins.
        monkeypatch.setattr(cmd_daemon.daemon_start, "_plugin_options", None)
        return calls

    return install


def test_every_contribution_is_gathered_through_pluggy_and_a_broken_plugin_costs_its_own(
    monitored, profile, capsys
):
    from veglia import engine, orm
    from veglia.entry_points import CalculationFactory

    calls = monitored(contributor=Contributor(), broken=_RaisesIn(*ISOLATED))
    assert get_options()["contrib.level"].validate("4") == 4
    assert property_defaults()["contrib_on"] is False
    shell = CalculationFactory("core.shell")
    _, node = engine.run_get_node(
        shell, command=orm.Str("true"), metadata={"options": {"contrib_tag": "t"}}
    )
    assert node.is_finished_ok  # the broken plugin is logged, not fatal
    assert node.get_attribute("job_script_wraps")[-1]["name"] == "contrib.wrap"
    assert node.get_attribute("trace_record")["extras"]["contributor"] == {"seen": True}
    warnings = [log.message for log in node.logs if log.levelname == "WARNING"]
    assert any("broken failed to collect the trace: broken plugin bug" in m for m in warnings)
    assert any("broken failed to read the job's stop: broken plugin bug" in m for m in warnings)

    panels = plugin_panels()
    assert {"title": "Contributed", "rows": [["seats", 3]]} in panels
    failed = {
        "title": "plugin broken",
        "rows": [["error", "its overview panel failed: broken plugin bug"]],
    }
    assert failed in panels

    capsys.readouterr()
    show_process(node, log_lines=0)
    out, err = capsys.readouterr()
    assert re.search(rf"pk\s+{node.pk}\s", out)
    assert "broken failed to show its tables: broken plugin bug" in err

    runner = CliRunner()
    shown = runner.invoke(cmd_daemon.daemon_group, ["start", "--help"], obj=None).output
    assert "--contrib-port" in shown and "The contributed port." in shown
    state = CliState(profile.name, False)
    cmd_daemon._plugin_status_lines(state, cmd_daemon.DaemonFiles(profile))
    out, err = capsys.readouterr()
    assert "contributed on port None" in out
    assert "broken failed in daemon_status_lines: broken plugin bug" in err

    # One call a plugin, each seen: a broken plugin cannot keep another from its turn.
    seen = set(calls)
    for hook in CONTRIBUTING:
        assert (hook, ("contributor",)) in seen, f"pluggy's monitoring did not see {hook}"
    for hook in ISOLATED:
        assert (hook, ("broken",)) in seen, f"pluggy's monitoring did not see broken's {hook}"
    assert all(len(names) == 1 for hook, names in calls if hook in CONTRIBUTING)


@pytest.mark.parametrize(
    ("hook", "gather_them"),
    [
        ("register_options", get_options),
        ("computer_properties", property_defaults),
    ],
)
def test_a_catalogue_plugin_that_fails_is_named_in_one_line(monitored, hook, gather_them):
    calls = monitored(contributor=Contributor(), mylab=_RaisesIn(hook, message="cannot list mine"))
    with pytest.raises(ConfigurationError) as failed:
        gather_them()
    assert str(failed.value) == f"Plugin 'mylab' failed in {hook}: cannot list mine"
    assert (hook, ("mylab",)) in calls


def test_contributions_of_one_plugin_clash_with_another_s(monitored):
    calls = monitored(first=Contributor(), second=Contributor())
    with pytest.raises(ConfigurationError) as clash:
        get_options()
    assert str(clash.value) == (
        "Option 'contrib.level' of plugin 'second' clashes with the one of 'first'; one of "
        "them must rename it."
    )
    assert {("register_options", ("first",)), ("register_options", ("second",))} <= set(calls)


def test_a_list_hook_answered_with_something_else_is_that_plugins_error(monitored):
    class One:
        @hookspecs.hookimpl
        def register_options(self):
            return Option("mylab.level", "Not in a list.")

    monitored(mylab=One())
    with pytest.raises(ConfigurationError) as failed:
        get_options()
    assert str(failed.value) == (
        "Plugin 'mylab' failed in register_options: register_options must return a list, not Option"
    )
