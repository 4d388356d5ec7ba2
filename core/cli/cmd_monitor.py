"""``veglia monitor``: the installed monitors, their documentation and keyword arguments."""

from __future__ import annotations

import inspect
from typing import Any

import click

from veglia.cli.completion import complete_entry_points
from veglia.cli.output import console, print_table, raw_option
from veglia.docstrings import plain_doc
from veglia.engine.calcjob.monitors import engine_given
from veglia.entry_points import get_entry_points, load_entry_point


def monitor_kwargs(function: Any) -> str:
    """The keyword arguments a user gives a monitor (after node and transport), with
    defaults: not those the engine fills (``state``, ``trace``, ``files``)."""
    parameters = list(inspect.signature(function).parameters.values())[2:]
    hidden = engine_given(function)
    shown = []
    for parameter in parameters:
        if parameter.name in hidden or parameter.kind in (
            parameter.VAR_KEYWORD,
            parameter.VAR_POSITIONAL,
        ):
            continue
        if parameter.default is parameter.empty:
            shown.append(f"{parameter.name} (required)")
        else:
            shown.append(f"{parameter.name}={parameter.default!r}")
    return ", ".join(shown)


@click.group("monitor")
def monitor_group() -> None:
    """Inspect the monitors jobs can be watched with."""


@monitor_group.command("list")
@raw_option
def monitor_list(raw: bool) -> None:
    """List installed monitors with their keyword arguments."""
    rows = []
    for entry_point in get_entry_points("monitors"):
        function = load_entry_point("monitors", entry_point.name)
        summary = (inspect.getdoc(function) or "").split("\n\n")[0]  # read alone: quicker
        doc = plain_doc(summary).split("\n\n")[0].replace("\n", " ")
        rows.append((entry_point.name, monitor_kwargs(function), doc))
    print_table(("Monitor", "Keyword arguments", "What it does"), rows, raw=raw)


@monitor_group.command("show")
@click.argument("name", shell_complete=complete_entry_points("monitors"))
def monitor_show(name: str) -> None:
    """Show the documentation and signature of monitor NAME."""
    function = load_entry_point("monitors", name)
    entry_point = next(ep for ep in get_entry_points("monitors") if ep.name == name)
    console.print(f"[bold]{name}[/bold]  ({entry_point.value})")
    console.print(f"kwargs: {monitor_kwargs(function) or 'none'}")
    console.print(f"async: {'yes' if inspect.iscoroutinefunction(function) else 'no'}")
    console.print("")
    console.print(plain_doc(inspect.getdoc(function) or "(no documentation)"), markup=False)


COMMANDS = [monitor_group]
