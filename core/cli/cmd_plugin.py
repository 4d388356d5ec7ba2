"""``veglia plugin``: what is installed in each entry-point group."""

from __future__ import annotations

import inspect
from collections.abc import Iterator, Mapping
from importlib.metadata import EntryPoint
from typing import Any

import click

from veglia.cli.completion import complete_entry_points
from veglia.cli.output import console, print_table, raw_option
from veglia.docstrings import plain_doc
from veglia.entry_points import GROUPS, get_entry_points, group_name, load_entry_point
from veglia.plugin_manager import load_states
from veglia.signatures import signature_text


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
    """List plugins of every group, or of GROUP. Loaded: for a ``plugins`` entry (hooks),
    whether it is registered, or why not; the others are imported when used."""
    states = load_states() if group in (None, "plugins") else {}
    rows = []
    for short in [group] if group else sorted(GROUPS):
        found = get_entry_points(short)
        twice = {ep.name for ep in found if len({o.value for o in found if o.name == ep.name}) > 1}
        for entry_point in found:
            loaded = states[entry_point.name] if short == "plugins" else "when used"
            if entry_point.name in twice:
                loaded = "registered more than once: uninstall one of the packages"
            rows.append(
                (short, entry_point.name, entry_point.value, _distribution(entry_point), loaded)
            )
        if not raw and not found:
            rows.append((short, "-", "(none installed)", "", ""))
    print_table(("Group", "Name", "Object", "Package", "Loaded"), rows, raw=raw, keep={"Name"})


def _type_name(valid_type: Any) -> str:
    if valid_type is None:
        return "any"
    if isinstance(valid_type, tuple):
        return " | ".join(_type_name(one) for one in valid_type)
    return getattr(valid_type, "__name__", str(valid_type))


def _ports(namespace: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, str, Any]]:
    """(dotted name, type, port) of every port; a namespace's own row when it takes any
    names (``files``: namespace of SinglefileData, any names), else its ports'."""
    for name, port in namespace.items():
        full = f"{prefix}{name}"
        nested = isinstance(port, Mapping)  # a namespace of ports (plumpy's PortNamespace)
        if not nested:
            yield full, _type_name(port.valid_type), port
        elif port.dynamic or not port:
            of = f" of {_type_name(port.valid_type)}" if port.valid_type is not None else ""
            yield full, f"namespace{of}, any names", port
        else:
            yield from _ports(port, f"{full}.")


def _show_spec(process_class: Any) -> None:
    """The inputs (required first; ``metadata.*``, the run's settings, last), outputs and
    exit codes of a calculation or workflow class."""
    spec = process_class.spec()
    inputs = sorted(
        _ports(spec.inputs),
        key=lambda item: (item[0].startswith("metadata."), not item[2].required),
    )
    for title, ports in (("Inputs", inputs), ("Outputs", list(_ports(spec.outputs)))):
        console.print("")
        rows = [(name, kind, port.required, port.help or "") for name, kind, port in ports]
        if rows:
            print_table((title, "Type", "Required", "Help"), rows)
        else:
            console.print(f"{title}: none")
    codes = [(c.status, c.label, c.message) for c in spec.exit_codes.values()]
    console.print("")
    if codes:
        print_table(("Exit code", "Label", "Message"), sorted(codes))
    else:
        console.print("Exit codes: none besides 0")


@plugin_group.command("show")
@click.argument("group", type=click.Choice(sorted(GROUPS)))
@click.argument("name", shell_complete=complete_entry_points())
def plugin_show(group: str, name: str) -> None:
    """Show the documentation and signature of plugin NAME in GROUP; for a calculation or
    a workflow, its inputs (type, required, help), outputs and exit codes; for a data
    source, its settings."""
    obj = load_entry_point(group, name)
    entry_point = next(ep for ep in get_entry_points(group) if ep.name == name)
    console.print(f"[bold]{name}[/bold]  ({group_name(group)})")
    console.print(f"object:  {entry_point.value}")
    console.print(f"package: {_distribution(entry_point)}")
    is_process = group in ("calculations", "workflows") and callable(getattr(obj, "spec", None))
    if inspect.ismodule(obj):
        hooks = sorted(n for n, v in vars(obj).items() if callable(v) and hasattr(v, "veglia_impl"))
        console.print(f"hooks:   {', '.join(hooks) or 'none'}")
    elif not is_process:
        console.print(f"signature: {name}{signature_text(obj)}", markup=False)
    console.print("")
    console.print(plain_doc(inspect.getdoc(obj) or "(no documentation)"), markup=False)
    if is_process:
        _show_spec(obj)
    settings = getattr(obj, "accepted_settings", None) if group == "datasources" else None
    if settings:
        console.print("")
        rows = [(s.name, "required" if s.required else repr(s.default), s.help) for s in settings]
        print_table(("Setting", "Default", "What it is"), rows)


COMMANDS = [plugin_group]
