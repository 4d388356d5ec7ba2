"""``veglia calcjob``: a calc job's input and retrieved files, results and work dir."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import click

from veglia.cli.cmd_calcjob_clean import calcjob_cleanworkdir
from veglia.cli.cmd_node_repo import print_content, print_listing
from veglia.cli.completion import complete_calcjob_pks
from veglia.cli.node_args import load_calcjob
from veglia.cli.output import binary_stdout, console, echo_warning
from veglia.cli.state import CliState, pass_state
from veglia.exceptions import NotExistent
from veglia.orm import Bool, Dict, Float, Int, Str
from veglia.orm.computers import load_computer
from veglia.orm.data import FolderData
from veglia.orm.files import calcjob_input_files
from veglia.orm.nodes import Node
from veglia.orm.process_nodes import CalcJobNode
from veglia.orm.workdirs import cleaned_message

__all__ = ["calcjob_group"]


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, default=str, ensure_ascii=False)


def _retrieved(node: CalcJobNode) -> FolderData:
    outputs = node.outputs
    if "retrieved" not in outputs:
        raise NotExistent(
            f"Calc job {node.pk} has no retrieved files (it is {node.process_state}). "
            f"Follow it with `veglia process watch {node.pk}`."
        )
    return outputs["retrieved"]  # type: ignore[return-value]


def _cat(node: Node, path: str, what: str) -> None:
    """Print file ``path`` of the node; ``what`` begins the message when there is none
    ("Calc job 2 retrieved")."""
    try:
        content = node.get_object_content(path)
    except NotExistent:
        names = ", ".join(node.list_object_names()) or "none"
        raise NotExistent(f"{what} no file {path!r} (files: {names}).") from None
    stream = binary_stdout()
    stream.write(content)
    stream.flush()


def _ls(node: Node, path: str, long: bool, what: str) -> None:
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
        raise NotExistent(f"{what} no file or folder {path!r} (files: {names}).")
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
    node = load_calcjob(identifier)
    retrieved = _retrieved(node)
    if path is None:
        names = retrieved.list_object_names()
        path = "stdout" if "stdout" in names else "_scheduler-stdout.txt"
    _cat(retrieved, path, f"Calc job {node.pk} retrieved")


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
    _ls(_retrieved(node), path, long, f"Calc job {node.pk} retrieved")
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


calcjob_group.add_command(calcjob_cleanworkdir)

COMMANDS = [calcjob_group]
