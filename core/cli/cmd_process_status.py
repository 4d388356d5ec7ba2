"""``veglia process status PK``: the call tree of a workflow, as ``verdi process status``."""

from __future__ import annotations

import click
from rich.text import Text
from rich.tree import Tree

from veglia.cli.completion import complete_process_pks
from veglia.cli.node_args import load_process
from veglia.cli.numbers import WholeNumber
from veglia.cli.output import console
from veglia.cli.state import CliState, pass_state
from veglia.orm.attributes import PAUSED
from veglia.orm.queries import ProcessRow, list_processes, process_tree
from veglia.views.rows import format_state, process_status

__all__ = ["call_tree", "process_status_command"]


def _line(row: ProcessRow) -> Text:
    name = (row.process_type or row.node_type).rsplit(":", 1)[-1]
    state = format_state(row.process_state, row.exit_status, bool(row.attributes.get(PAUSED)))
    style = "green" if state.startswith("✔") else "red" if state[0] in "⨯✘☠" else "yellow"
    text = Text.assemble((f"{name}<{row.pk}>", "bold"))
    if row.label:
        text.append(f" {row.label}")
    text.append(f"  {state}", style=style)
    details = [process_status(row.process_state, row.attributes)]
    if row.process_state == "finished" and row.exit_status and row.exit_message:
        details.append(row.exit_message)
    for detail in filter(None, details):
        text.append(f"  · {detail}", style="dim")
    return text


def call_tree(pk: int, max_depth: int | None = None) -> Tree:
    """Process ``pk`` with the processes it called, theirs, ..., in the order they were made."""
    rows = list_processes(pks=process_tree([pk]), order_by="ctime")
    children: dict[int | None, list[ProcessRow]] = {}
    for row in rows:
        children.setdefault(None if row.pk == pk else row.caller_pk, []).append(row)

    def grow(branch: Tree, row: ProcessRow, depth: int) -> None:
        called = children.get(row.pk, [])
        if max_depth is not None and depth >= max_depth:
            if called:
                branch.add(Text(f"… {len(called)} more (--max-depth {max_depth})", style="dim"))
            return
        for child in called:
            grow(branch.add(_line(child)), child, depth + 1)

    root = children[None][0]
    tree = Tree(_line(root), guide_style="dim")
    grow(tree, root, 0)
    return tree


@click.command("status")
@click.argument("identifier", metavar="PK", shell_complete=complete_process_pks)
@click.option(
    "-m", "--max-depth", type=WholeNumber(min=0), help="Levels of called processes to show."
)
@pass_state
def process_status_command(state: CliState, identifier: str, max_depth: int | None) -> None:
    """Show process PK with the processes it called, theirs, ...: their state and status."""
    state.profile  # noqa: B018 -- load the chosen profile
    console.print(call_tree(load_process(identifier).pk, max_depth))
