"""``veglia node`` (any node: show, graph) and ``veglia calcjob`` (a calc job's files)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import click

from veglia.cli.cmd_calcjob_clean import calcjob_cleanworkdir
from veglia.cli.cmd_node_delete import node_delete
from veglia.cli.cmd_node_fields import (
    node_attributes,
    node_description,
    node_extras,
    node_label,
)
from veglia.cli.cmd_node_repo import print_content, print_listing, repo_group
from veglia.cli.completion import complete_calcjob_pks, complete_node_pks
from veglia.cli.graph_image import render_image
from veglia.cli.node_args import load_calcjob
from veglia.cli.output import binary_stdout, console, echo_success, echo_warning, print_table
from veglia.cli.process_format import format_time, relative_time
from veglia.cli.state import CliState, pass_state
from veglia.exceptions import NotExistent
from veglia.orm import Bool, Dict, Float, Int, Str
from veglia.orm.computers import load_computer
from veglia.orm.data import FolderData
from veglia.orm.files import calcjob_input_files
from veglia.orm.loading import load_node
from veglia.orm.nodes import Node
from veglia.orm.process_nodes import CalcJobNode, ProcessNode
from veglia.orm.queries import links_of, node_mtime
from veglia.orm.workdirs import cleaned_message
from veglia.views.node import graph_dot, type_name
from veglia.views.rows import format_state, stopped_by

__all__ = ["calcjob_group", "node_group"]


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
    "-d", "--depth", type=click.IntRange(min=0), default=1, show_default=True, help="Link hops."
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


# -- calcjob ---------------------------------------------------------------------------------------
def _retrieved(node: CalcJobNode) -> FolderData:
    outputs = node.outputs
    if "retrieved" not in outputs:
        raise NotExistent(
            f"Calc job {node.pk} has no retrieved files (it is {node.process_state}). "
            f"Follow it with `veglia process watch {node.pk}`."
        )
    return outputs["retrieved"]  # type: ignore[return-value]


def _cat(node: Node, path: str) -> None:
    content = node.get_object_content(path)
    stream = binary_stdout()
    stream.write(content)
    stream.flush()


def _ls(node: Node, path: str, long: bool) -> None:
    """The entries right under ``path`` in a node's files (folders end with '/')."""
    folder = path.strip("/")
    prefix = f"{folder}/" if folder else ""
    entries: dict[str, int] = {}
    for record in node.list_objects():
        if record.path == folder:
            entries[Path(folder).name] = record.size
        elif record.path.startswith(prefix):
            head, sep, _ = record.path[len(prefix) :].partition("/")
            name = head + sep
            entries[name] = entries.get(name, 0) + record.size
    if folder and not entries:
        names = ", ".join(node.list_object_names()) or "none"
        raise NotExistent(f"{node!r} has no file or folder {path!r} (files: {names}).")
    for name, size in sorted(entries.items()):
        click.echo(f"{size:>10}  {name}" if long else name)


@click.group("calcjob")
def calcjob_group() -> None:
    """Inspect calc jobs: their input and retrieved files, results, work dir."""


@calcjob_group.command("outputcat")
@click.argument("identifier", metavar="PK", shell_complete=complete_calcjob_pks)
@click.argument("path", required=False)
@pass_state
def calcjob_outputcat(state: CliState, identifier: str, path: str | None) -> None:
    """Print retrieved file PATH (default: stdout, else the scheduler's stdout)."""
    state.profile  # noqa: B018
    retrieved = _retrieved(load_calcjob(identifier))
    if path is None:
        names = retrieved.list_object_names()
        path = "stdout" if "stdout" in names else "_scheduler-stdout.txt"
    _cat(retrieved, path)


@calcjob_group.command("inputcat")
@click.argument("identifier", metavar="PK", shell_complete=complete_calcjob_pks)
@click.argument("path", required=False, default="_veglia_submit.sh")
@pass_state
def calcjob_inputcat(state: CliState, identifier: str, path: str) -> None:
    """Print input file PATH of the job (default: the submit script _veglia_submit.sh)."""
    state.profile  # noqa: B018
    node = load_calcjob(identifier)
    print_content(calcjob_input_files(node), path, f"Calc job {node.pk}")


@calcjob_group.command("outputls")
@click.argument("identifier", metavar="PK", shell_complete=complete_calcjob_pks)
@click.argument("path", required=False, default="")
@click.option("-l", "--long", is_flag=True, help="Show sizes in bytes.")
@pass_state
def calcjob_outputls(state: CliState, identifier: str, path: str, long: bool) -> None:
    """List the retrieved files of the job (under PATH)."""
    state.profile  # noqa: B018
    node = load_calcjob(identifier)
    _ls(_retrieved(node), path, long)
    if cleaned := cleaned_message(node):
        echo_warning(cleaned)


@calcjob_group.command("inputls")
@click.argument("identifier", metavar="PK", shell_complete=complete_calcjob_pks)
@click.argument("path", required=False, default="")
@click.option("-l", "--long", is_flag=True, help="Show sizes in bytes.")
@pass_state
def calcjob_inputls(state: CliState, identifier: str, path: str, long: bool) -> None:
    """List the input files the job uploaded (those copied from other nodes too), and its
    submit script."""
    state.profile  # noqa: B018
    node = load_calcjob(identifier)
    print_listing(calcjob_input_files(node), path, long, f"Calc job {node.pk}", node.pk)


@calcjob_group.command("res")
@click.argument("identifier", metavar="PK", shell_complete=complete_calcjob_pks)
@click.option("-k", "--key", "keys", multiple=True, help="Only this output label (repeatable).")
@pass_state
def calcjob_res(state: CliState, identifier: str, keys: tuple[str, ...]) -> None:
    """Print the job's Dict, Int, Float, Str and Bool outputs as JSON."""

    state.profile  # noqa: B018
    node = load_calcjob(identifier)
    results: dict[str, Any] = {}
    for label, output in node.outputs.items():
        if keys and label not in keys:
            continue
        if isinstance(output, Dict):
            results[label] = output.get_dict()
        elif isinstance(output, Int | Float | Str | Bool):
            results[label] = output.value
    if not results:
        echo_warning(f"Calc job {node.pk} has no Dict, Int, Float, Str or Bool outputs.")
    click.echo(_json(results))


@calcjob_group.command("gotocomputer")
@click.argument("identifier", metavar="PK", shell_complete=complete_calcjob_pks)
@click.option(
    "--print", "print_only", is_flag=True, help="Print the command line instead of running it."
)
@click.option("--exec", "_exec", is_flag=True, hidden=True)  # what opened it before --print
@pass_state
def calcjob_gotocomputer(state: CliState, identifier: str, print_only: bool, _exec: bool) -> None:
    """Open a shell in the job's work dir: over ssh as the computer's transport connects
    (its key, known_hosts, jump host), or your own shell for a local computer.

    With --print, print that command line instead."""

    state.profile  # noqa: B018
    node = load_calcjob(identifier)
    workdir = node.remote_workdir
    if cleaned := cleaned_message(node):
        raise NotExistent(cleaned)
    if not workdir:
        raise NotExistent(
            f"Calc job {node.pk} has no work dir yet (it is {node.process_state}); it gets one "
            "when its files are uploaded."
        )
    key = node.computer_pk or node.computer_label
    assert key is not None  # a job with a work dir ran on a computer
    computer = load_computer(key)
    command = computer.get_transport().gotocomputer_command(workdir)
    if print_only:
        click.echo(command)
        return
    console.print(f"Opening a shell in {computer.label}:{workdir}", markup=False, highlight=False)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execvp("bash", ["bash", "-c", command])


# Commands kept in modules of their own (they import from this one when they run).
node_group.add_command(node_delete)
for command in (node_attributes, node_extras, node_label, node_description):
    node_group.add_command(command)
node_group.add_command(repo_group)
calcjob_group.add_command(calcjob_cleanworkdir)

COMMANDS = [node_group, calcjob_group]
