"""``veglia node attributes``, ``extras``, ``label`` and ``description``: a node's fields
alone, as ``verdi node`` prints them, and the ones that may change (extras, label,
description) changed."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, cast

import click

from veglia.cli.completion import complete_node_pks
from veglia.cli.output import console, echo_success, print_table, raw_option
from veglia.cli.state import CliState, pass_state
from veglia.cli.verdi_forms import veglia_writes
from veglia.exceptions import NotExistent
from veglia.orm.loading import load_node
from veglia.orm.nodes import Node
from veglia.wording import plural

__all__ = ["node_attributes", "node_description", "node_extras", "node_label"]

#: The longest label the database keeps (``nodes.label``).
MAX_LABEL = 255


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, default=str, ensure_ascii=False)


def _nodes(identifiers: tuple[str, ...]) -> list[Node]:
    return [load_node(identifier) for identifier in identifiers]


# -- attributes and extras -------------------------------------------------------------------
def _check_format(_ctx: click.Context, _param: click.Parameter, value: str) -> str:
    if value.startswith("yaml"):  # verdi's other formats
        raise veglia_writes(f"-f json (veglia prints JSON, not {value})")
    return value


_identifiers_argument = click.argument(
    "identifiers", nargs=-1, required=True, metavar="PK...", shell_complete=complete_node_pks
)
_identifier_option = click.option(
    "-i",
    "--identifier",
    type=click.Choice(["pk", "uuid"]),
    default="pk",
    show_default=True,
    help="Name each node by its PK or its UUID.",
)
_format_option = click.option(
    "-f",
    "--format",
    "fmt",
    type=click.Choice(["json", "json+date", "yaml", "yaml_expanded"]),
    default="json",
    callback=_check_format,
    hidden=True,  # verdi's: JSON is the one format
)


def _print_dicts(
    nodes: list[Node], keys: tuple[str, ...], what: str, identifier: str, raw: bool
) -> None:
    """Each node's ``what`` (attributes or extras), only ``keys`` when given: as JSON
    under the node's PK (or UUID), or with ``raw`` one JSON list for scripts."""
    name = "PK" if identifier == "pk" else "UUID"
    found: list[tuple[Node, dict[str, Any]]] = []
    for node in nodes:
        values: dict[str, Any] = getattr(node, what)
        if keys:
            values = {key: value for key, value in values.items() if key in keys}
        found.append((node, values))
    missing = [key for key in keys if not any(key in values for _, values in found)]
    if missing:
        known = sorted({key for node in nodes for key in getattr(node, what)})
        names = f"{what[:-1]} {', '.join(map(repr, missing))}"
        said = (
            f"Node {nodes[0].pk} has no {names}"
            if len(nodes) == 1
            else f"None of these nodes has the {names}"
        )
        raise NotExistent(f"{said} ({what}: {', '.join(known) or 'none'}).")
    if raw:
        click.echo(
            _json([{name: node.pk if name == "PK" else node.uuid, what: v} for node, v in found])
        )
        return
    for node, values in found:
        console.print(f"[bold]{name}: {node.pk if name == 'PK' else node.uuid}[/bold]")
        click.echo(_json(values))


def _key_value(_ctx: click.Context, _param: click.Parameter, values: tuple[str, ...]) -> Any:
    pairs = []
    for text in values:
        key, sep, value = text.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{text!r} is not KEY=VALUE.")
        try:
            parsed = json.loads(value)
        except ValueError:
            parsed = value  # not JSON: the text itself
        pairs.append((key, parsed))
    return pairs


def _change_extras(
    nodes: list[Node], to_set: list[tuple[str, Any]], to_delete: tuple[str, ...]
) -> str | None:
    """Set and remove extras of each node; what was done, or None when nothing was asked."""
    if not to_set and not to_delete:
        return None
    removed: set[str] = set()
    for node in nodes:
        for key, value in to_set:
            node.set_extra(key, value)
        for key in to_delete:
            if key in node.extras:
                removed.add(key)
            node.delete_extra(key)
    done = [f"set {', '.join(key for key, _ in to_set)}"] if to_set else []
    if gone := [key for key in to_delete if key in removed]:
        done.append(f"removed {', '.join(gone)}")
    if absent := [key for key in to_delete if key not in removed]:
        done.append(f"no extra {', '.join(absent)} to remove")
    return f"Extras of {plural(len(nodes), 'node')}: {'; '.join(done)}."


_Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]


def _dict_command(
    what: str,
    help_text: str,
    change_options: tuple[_Decorator, ...] = (),
    change: Callable[..., str | None] | None = None,
) -> click.Command:
    """The command that prints ``what`` (attributes or extras) of nodes as JSON. With
    ``change_options``, ``change(nodes, **their values)`` changes them instead, and says
    what it did; it returns None when none was given, and the values are printed."""

    def command(
        state: CliState,
        identifiers: tuple[str, ...],
        keys: tuple[str, ...],
        identifier: str,
        fmt: str,
        raw: bool,
        **changes: Any,
    ) -> None:
        state.profile  # noqa: B018 -- load the chosen profile
        nodes = _nodes(identifiers)
        said = change(nodes, **changes) if change is not None else None
        if said is None:
            _print_dicts(nodes, keys, what, identifier, raw)
        else:
            echo_success(said)

    decorators: list[_Decorator] = [
        click.command(what, help=help_text),
        _identifiers_argument,
        click.option(
            "-k", "--key", "keys", multiple=True, help=f"Only this {what[:-1]} (repeatable)."
        ),
        *change_options,
        _identifier_option,
        _format_option,
        click.option("-r", "--raw", is_flag=True, help="One JSON list of every node, for scripts."),
        pass_state,
    ]
    for decorator in reversed(decorators):  # as they would be written above ``command``
        command = decorator(command)
    return cast(click.Command, command)


node_attributes = _dict_command(
    "attributes",
    """Print the attributes of each node PK (or UUID) as JSON.

    Attributes are part of the provenance: they never change once a node is stored.
    """,
)
node_extras = _dict_command(
    "extras",
    """Print the extras of each node PK (or UUID) as JSON, or change them.

    Extras are your notes on a node (tags, scores): unlike attributes, they may change at
    any time.
    """,
    (
        click.option(
            "-s",
            "--set",
            "to_set",
            multiple=True,
            metavar="KEY=VALUE",
            callback=_key_value,
            help="Set an extra of each node (VALUE as JSON, else as text); repeatable.",
        ),
        click.option(
            "-d", "--delete", "to_delete", multiple=True, metavar="KEY", help="Remove one."
        ),
    ),
    _change_extras,
)


# -- label and description -------------------------------------------------------------------
def _show_or_set(
    nodes: list[Node], what: str, new: str | None, verdi_new: str | None, raw: bool
) -> None:
    """Show ``what`` (label or description) of each node, or set it to ``new`` (also
    written ``verdi_new``, verdi's option)."""
    if new is not None and verdi_new is not None and new != verdi_new:
        raise click.UsageError(f"Two new {what}s: {new!r} and {verdi_new!r}; give one.")
    value = new if new is not None else verdi_new
    if value is None:
        if raw:  # verdi's --raw: the values alone
            for node in nodes:
                click.echo(getattr(node, what))
            return
        print_table(("PK", what.capitalize()), [(node.pk, getattr(node, what)) for node in nodes])
        return
    if what == "label" and any(not char.isprintable() for char in value):
        raise click.BadParameter("a label is one line of printable text.")
    if what == "label" and len(value) > MAX_LABEL:
        raise click.BadParameter(f"a label has at most {MAX_LABEL} characters, not {len(value)}.")
    for node in nodes:
        getattr(node, f"set_{what}")(value)
    shown = f" {value!r}" if what == "label" else ""
    echo_success(f"Set the {what}{shown} of {plural(len(nodes), 'node')}.")


def _field_command(
    what: str, verdi_flag: str, metavar: str, set_help: str, help_text: str
) -> click.Command:
    """The command that shows or sets ``what`` (label or description) of nodes; verdi
    names its --set option ``verdi_flag``/``--WHAT``."""

    @click.command(what, help=help_text)
    @_identifiers_argument
    @click.option("-s", "--set", "new", metavar=metavar, help=set_help)
    @click.option(verdi_flag, f"--{what}", "verdi_new", hidden=True)  # verdi's name of --set
    @raw_option
    @click.option("-f", "--force", is_flag=True, hidden=True)  # verdi's: veglia does not ask
    @pass_state
    def command(
        state: CliState,
        identifiers: tuple[str, ...],
        new: str | None,
        verdi_new: str | None,
        raw: bool,
        force: bool,
    ) -> None:
        state.profile  # noqa: B018
        _show_or_set(_nodes(identifiers), what, new, verdi_new, raw)

    return command


node_label = _field_command(
    "label",
    "-L",
    "LABEL",
    "Set LABEL as the label of each node.",
    """Show the label of each node PK (or UUID), or set it with --set LABEL.

    Labels are notes, not provenance: they may change at any time. --raw prints the labels
    alone, one a line.
    """,
)
node_description = _field_command(
    "description",
    "-D",
    "TEXT",
    "Set TEXT as the description of each.",
    """Show the description of each node PK (or UUID), or set it with --set TEXT.

    --raw prints the descriptions alone, one a line.
    """,
)
