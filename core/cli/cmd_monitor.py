"""``veglia monitor``: the installed monitors, their documentation and keyword arguments."""

from __future__ import annotations

import inspect
from typing import Any

import click

from veglia.cli.completion import complete_entry_points
from veglia.cli.output import console, print_table, raw_option
from veglia.docstrings import plain_doc
from veglia.engine.calcjob.annotations import parameter_annotations
from veglia.engine.calcjob.monitors import engine_given
from veglia.entry_points import MonitorFactory, get_entry_point, get_entry_points
from veglia.exceptions import PluginError
from veglia.signatures import annotation_marks


def monitor_kwargs(function: Any) -> str:
    """The keyword arguments a user gives a monitor (after node and transport), with
    defaults and what their annotations' marks say (``pattern (required, regular
    expression)``): not those the engine fills (``state``, ``trace``, ``files``)."""
    parameters = list(inspect.signature(function).parameters.values())[2:]
    hidden = engine_given(function)
    annotations = parameter_annotations(function)
    shown = []
    for parameter in parameters:
        if parameter.name in hidden or parameter.kind in (
            parameter.VAR_KEYWORD,
            parameter.VAR_POSITIONAL,
        ):
            continue
        notes = annotation_marks(annotations.get(parameter.name))
        if parameter.default is parameter.empty:
            notes.insert(0, "required")
            text = parameter.name
        else:
            text = f"{parameter.name}={parameter.default!r}"
        shown.append(f"{text} ({', '.join(notes)})" if notes else text)
    return ", ".join(shown)


@click.group("monitor")
def monitor_group() -> None:
    """Inspect the monitors jobs can be watched with."""


@monitor_group.command("list")
@raw_option
def monitor_list(raw: bool) -> None:
    """List installed monitors with their keyword arguments."""
    rows = []
    for name in dict.fromkeys(ep.name for ep in get_entry_points("monitors")):
        try:
            function = MonitorFactory(name)
        except PluginError as exc:  # the others are still listed; this one says why not
            rows.append((name, "-", f"not usable: {' '.join(str(exc).split())}"))
            continue
        summary = (inspect.getdoc(function) or "").split("\n\n")[0]  # read alone: quicker
        doc = plain_doc(summary).split("\n\n")[0].replace("\n", " ")
        rows.append((name, monitor_kwargs(function), doc))
    print_table(("Monitor", "Keyword arguments", "What it does"), rows, raw=raw)


@monitor_group.command("show")
@click.argument("name", shell_complete=complete_entry_points("monitors"))
def monitor_show(name: str) -> None:
    """Show the documentation and signature of monitor NAME."""
    function = MonitorFactory(name)
    entry_point = get_entry_point("monitors", name)
    console.print(f"[bold]{name}[/bold]  ({entry_point.value})")
    console.print(f"kwargs: {monitor_kwargs(function) or 'none'}")
    console.print(f"async: {'yes' if inspect.iscoroutinefunction(function) else 'no'}")
    console.print("")
    console.print(plain_doc(inspect.getdoc(function) or "(no documentation)"), markup=False)


COMMANDS = [monitor_group]
