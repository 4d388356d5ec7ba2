"""``veglia computer list`` and ``veglia computer show``: the computers, and one computer's
fields, properties and connection options."""

from __future__ import annotations

from typing import Any

import click

from veglia.cli.cmd_computer_setup import shown
from veglia.cli.completion import complete_computer_labels
from veglia.cli.output import console, print_table, raw_option
from veglia.cli.state import CliState, pass_state
from veglia.exceptions import ConfigurationError
from veglia.orm.computers import Computer, load_computer, property_defaults
from veglia.orm.queries import configured_computer_pks, disabled_computer_pks

__all__ = ["computer_list", "computer_show"]


@click.command("list")
@click.option(
    "-a", "--all", "show_all", is_flag=True, help="Those you disabled too (`computer disable`)."
)
@raw_option
@pass_state
def computer_list(state: CliState, show_all: bool, raw: bool) -> None:
    """List computers and whether you configured them; those you disabled only with -a."""

    state.profile  # noqa: B018
    configured = configured_computer_pks()
    disabled = disabled_computer_pks()
    computers = Computer.list()
    rows = [
        (
            c.pk,
            c.label,
            c.hostname,
            c.transport_type,
            c.scheduler_type,
            "yes, disabled" if c.pk in disabled else c.pk in configured,
        )
        for c in computers
        if show_all or c.pk not in disabled
    ]
    print_table(("PK", "Label", "Hostname", "Transport", "Scheduler", "Configured"), rows, raw=raw)
    hidden = sum(c.pk in disabled for c in computers)
    if hidden and not show_all and not raw:
        console.print(
            f"{hidden} disabled computer{'s' if hidden != 1 else ''} not shown: -a lists "
            f"{'them' if hidden != 1 else 'it'}.",
            markup=False,
        )


@click.command("show")
@click.argument("label", shell_complete=complete_computer_labels)
@pass_state
def computer_show(state: CliState, label: str) -> None:
    """Show computer LABEL: its fields, properties and your connection options."""

    state.profile  # noqa: B018
    computer = load_computer(label)
    rows: list[tuple[str, Any]] = [
        ("pk", computer.pk),
        ("uuid", computer.uuid),
        ("label", computer.label),
        ("hostname", computer.hostname),
        ("description", computer.description),
        ("transport", computer.transport_type),
        ("scheduler", computer.scheduler_type),
    ]
    defaults = property_defaults()
    for name in defaults:
        value = computer.get_property(name)
        rows.append((name, shown(value) + ("" if name in computer.properties else " (default)")))
    for name in sorted(set(computer.properties) - set(defaults)):
        rows.append((name, f"{shown(computer.properties[name])} (of a plugin not loaded)"))
    print_table(("Property", "Value"), rows)
    console.print("")
    if not computer.is_enabled():
        console.print(
            f"You disabled it: it takes no new jobs of yours (`veglia computer enable "
            f"{computer.label}`).",
            markup=False,
        )
    try:
        params = computer.get_transport().auth_params
        stored = computer.get_auth_params()
    except ConfigurationError as exc:
        console.print(str(exc), markup=False)
        return
    if not params:
        console.print(f"{computer.transport_type} needs no connection options.")
        return
    print_table(
        ("Connection", "Value"),
        [(k, shown(v) + ("" if k in stored else " (default)")) for k, v in params.items()],
    )
