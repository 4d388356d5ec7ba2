"""``veglia plugin``: what is installed in each entry-point group."""

from __future__ import annotations

import inspect
from importlib.metadata import EntryPoint
from typing import Any

import click

from veglia.cli.output import console, print_table, raw_option
from veglia.entry_points import GROUPS, get_entry_points, group_name, load_entry_point


def _distribution(entry_point: EntryPoint) -> str:
    dist = entry_point.dist
    return f"{dist.name} {dist.version}" if dist is not None else ""


def summary(obj: Any) -> str:
    """First line of an object's docstring."""
    doc = inspect.getdoc(obj) or ""
    return doc.strip().splitlines()[0] if doc.strip() else ""


@click.group("plugin")
def plugin_group() -> None:
    """List and inspect installed plugins."""


@plugin_group.command("list")
@click.argument("group", required=False, type=click.Choice(sorted(GROUPS)))
@raw_option
def plugin_list(group: str | None, raw: bool) -> None:
    """List plugins of every group, or of GROUP."""
    rows = []
    for short in [group] if group else sorted(GROUPS):
        for entry_point in get_entry_points(short):
            rows.append((short, entry_point.name, entry_point.value, _distribution(entry_point)))
        if not raw and not get_entry_points(short):
            rows.append((short, "-", "(none installed)", ""))
    print_table(("Group", "Name", "Object", "Package"), rows, raw=raw)


def _signature(obj: Any) -> str:
    try:
        target = obj.__init__ if inspect.isclass(obj) else obj
        return str(inspect.signature(target))
    except (TypeError, ValueError):
        return ""


@plugin_group.command("show")
@click.argument("group", type=click.Choice(sorted(GROUPS)))
@click.argument("name")
def plugin_show(group: str, name: str) -> None:
    """Show the documentation and signature of plugin NAME in GROUP."""
    obj = load_entry_point(group, name)
    entry_point = next(ep for ep in get_entry_points(group) if ep.name == name)
    console.print(f"[bold]{name}[/bold]  ({group_name(group)})")
    console.print(f"object:  {entry_point.value}")
    console.print(f"package: {_distribution(entry_point)}")
    if inspect.ismodule(obj):
        hooks = sorted(n for n, v in vars(obj).items() if callable(v) and hasattr(v, "veglia_impl"))
        console.print(f"hooks:   {', '.join(hooks) or 'none'}")
    else:
        console.print(f"signature: {name}{_signature(obj)}")
    console.print("")
    console.print(inspect.getdoc(obj) or "(no documentation)", markup=False)


COMMANDS = [plugin_group]
