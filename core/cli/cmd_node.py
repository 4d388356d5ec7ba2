"""``veglia node``: show any node, draw the provenance around it; its other sub-commands are
in modules of their own (``veglia calcjob`` in ``cmd_calcjob``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from veglia.cli.cmd_node_delete import node_delete
from veglia.cli.cmd_node_fields import (
    node_attributes,
    node_description,
    node_extras,
    node_label,
)
from veglia.cli.cmd_node_repo import repo_group
from veglia.cli.completion import complete_node_pks
from veglia.cli.graph_image import render_image
from veglia.cli.numbers import WholeNumber
from veglia.cli.output import console, echo_success, print_table
from veglia.cli.process_format import format_time, relative_time
from veglia.cli.state import CliState, pass_state
from veglia.orm.loading import load_node
from veglia.orm.process_nodes import ProcessNode
from veglia.orm.queries import links_of, node_mtime
from veglia.views.node import graph_dot, type_name
from veglia.views.rows import format_state, stopped_by

__all__ = ["node_group"]


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, default=str, ensure_ascii=False)


@click.group("node")
def node_group() -> None:
    """Inspect nodes and their files; delete nodes with their provenance."""


@node_group.command("show")
@click.argument(
    "identifiers", nargs=-1, required=True, metavar="PK...", shell_complete=complete_node_pks
)
@pass_state
def node_show(state: CliState, identifiers: tuple[str, ...]) -> None:
    """Show type, attributes, extras, files and links of each node PK (or UUID)."""
    state.profile  # noqa: B018 -- load the chosen profile
    for index, identifier in enumerate(identifiers):
        if index:
            console.print("\n" + "─" * 60 + "\n")
        node = load_node(identifier)
        mtime = node_mtime(node.pk)
        rows: list[tuple[str, Any]] = [
            ("type", f"{type(node).__name__} ({node.node_type})"),
            ("pk", node.pk),
            ("uuid", node.uuid),
            ("label", node.label),
            ("description", node.description),
            ("created", f"{format_time(node.ctime)} ({relative_time(node.ctime)})"),
            ("modified", f"{format_time(mtime)} ({relative_time(mtime)})"),
        ]
        if isinstance(node, ProcessNode):
            rows.append(("process type", node.process_type))
            state_text = format_state(
                node.process_state, node.exit_status, node.paused, stopped_by(node.attributes)
            )
            rows.append(("state", state_text))
        print_table(("Property", "Value"), [r for r in rows if r[1] not in (None, "")])
        for title, value in (("Attributes", node.attributes), ("Extras", node.extras)):
            console.print(f"\n[bold]{title}[/bold]")
            click.echo(_json(value) if value else "(none)")
        files = node.list_objects()
        console.print("")
        if files:
            print_table(("Files", "Size"), [(f.path, f.size) for f in files])
        for title, incoming in (("Incoming", True), ("Outgoing", False)):
            links = links_of(node.pk, incoming=incoming)
            if links:
                console.print("")
                table = [(label, kind, pk, type_name(t)) for label, kind, pk, t in links]
                print_table((f"{title} links", "Link type", "PK", "Type"), table)


# -- graph -----------------------------------------------------------------------------------------
@node_group.command("graph")
@click.argument("identifier", metavar="PK", shell_complete=complete_node_pks)
@click.option(
    "-d", "--depth", type=WholeNumber(min=0), default=1, show_default=True, help="Link hops."
)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False),
    help="Write here: an image for .png, .svg or .pdf (with Graphviz's dot), else dot text.",
)
@pass_state
def node_graph(state: CliState, identifier: str, depth: int, output: str | None) -> None:
    """Draw the provenance around node PK: Graphviz dot text, or an image with -o x.png."""
    state.profile  # noqa: B018
    text = graph_dot(load_node(identifier).pk, depth)
    if output is None:
        click.echo(text, nl=False)
        return
    if render_image(text, Path(output)):
        echo_success(f"Wrote {output}.")
        return
    Path(output).write_text(text)
    echo_success(f"Wrote {output}; render it with `dot -Tpdf {output} -o graph.pdf`.")


# Commands kept in modules of their own.
for command in (node_delete, node_attributes, node_extras, node_label, node_description):
    node_group.add_command(command)
node_group.add_command(repo_group)

COMMANDS = [node_group]
