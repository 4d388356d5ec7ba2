"""``veglia node repo ls / cat``: the files of any node, as ``verdi node repo``; the listing
and printing ``veglia calcjob inputls / inputcat`` share."""

from __future__ import annotations

import click

from veglia.cli.output import binary_stdout
from veglia.cli.state import CliState, pass_state
from veglia.orm.files import NodeFile, folder_entries, node_files, read_file
from veglia.orm.loading import load_node


def print_listing(files: list[NodeFile], path: str, long: bool, what: str, owner: int) -> None:
    """The entries under ``path``, folders ending with '/'; with ``long``, sizes, and where
    a file copied from another node came from."""
    for name, entry in folder_entries(files, path, what).items():
        if not long:
            click.echo(name)
            continue
        size = entry.size if isinstance(entry, NodeFile) else entry
        origin = ""
        if isinstance(entry, NodeFile) and entry.source_pk != owner:
            origin = f"  (from node {entry.source_pk}: {entry.source_path})"
        click.echo(f"{size:>10}  {name}{origin}")


def print_content(files: list[NodeFile], path: str, what: str) -> None:
    stream = binary_stdout()
    stream.write(read_file(files, path, what))
    stream.flush()


@click.group("repo")
def repo_group() -> None:
    """The files of a node: list them, print one."""


@repo_group.command("ls")
@click.argument("identifier", metavar="PK")
@click.argument("path", required=False, default="")
@click.option("-l", "--long", is_flag=True, help="Show sizes in bytes.")
@pass_state
def repo_ls(state: CliState, identifier: str, path: str, long: bool) -> None:
    """List the files of node PK (under folder PATH); folders end with '/'."""
    state.profile  # noqa: B018 -- load the chosen profile
    node = load_node(identifier)
    files = node_files(node)
    if not files and not path:
        click.echo(f"Node {node.pk} ({type(node).__name__}) has no files.", err=True)
        return
    print_listing(files, path, long, f"Node {node.pk}", node.pk)


@repo_group.command("cat")
@click.argument("identifier", metavar="PK")
@click.argument("path")
@pass_state
def repo_cat(state: CliState, identifier: str, path: str) -> None:
    """Print file PATH of node PK, as it is stored (bytes)."""
    state.profile  # noqa: B018
    node = load_node(identifier)
    print_content(node_files(node), path, f"Node {node.pk}")
