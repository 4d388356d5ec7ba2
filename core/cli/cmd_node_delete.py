"""``veglia node delete``: delete nodes and what goes with them by provenance, after showing
it, as ``verdi node delete``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from veglia.cli.output import console, echo_success, print_table
from veglia.cli.state import CliState, pass_state
from veglia.orm.loading import load_node
from veglia.views.node import type_name
from veglia.views.rows import format_state
from veglia.wording import plural

if TYPE_CHECKING:
    from veglia.orm.deletion import DeletionPlan


def show_plan(plan: DeletionPlan, asked_for: str = "asked for", why: str = "asked") -> None:
    """The plan as a sentence and a table; ``asked_for`` and ``why`` say how the first
    nodes were chosen ("that ran on it", "ran on it": a computer's)."""
    counts = ", ".join(
        f"{count} {kind}" if kind == "data" else plural(count, kind)
        for kind, count in plan.counts().items()
    )
    asked = len(plan.asked)
    extra = len(plan.nodes) - asked
    console.print(
        f"Deleting {plural(len(plan.nodes), 'node')} ({counts}): the "
        f"{plural(asked, 'node')} {asked_for}"
        + (
            f" and {extra} that go{'es' if extra == 1 else ''} with them by provenance."
            if extra
            else "."
        )
    )
    rows = [
        (
            node.pk,
            type_name(node.node_type),
            node.process_type or "",
            node.label,
            format_state(node.process_state, node.exit_status) if node.is_process else "",
            str(node.reason) if node.reason else why,
        )
        for node in plan.nodes
    ]
    print_table(("PK", "Type", "Process type", "Label", "State", "Why"), rows)


@click.command("delete")
@click.argument("identifiers", nargs=-1, required=True, metavar="PK...")
@click.option("-f", "--force", is_flag=True, help="Do not ask for confirmation.")
@click.option("-n", "--dry-run", is_flag=True, help="Only show what would be deleted.")
@pass_state
def node_delete(state: CliState, identifiers: tuple[str, ...], force: bool, dry_run: bool) -> None:
    """Delete nodes, and what goes with them by provenance, after showing it.

    Nodes are given by PK or UUID prefix. Deleting data deletes the processes that used
    it, and what they created; deleting a process deletes what it created, the processes it
    called and its caller. Active processes are never deleted: kill them and wait until
    they end.
    """
    # Lazy: deleting works on the ORM's classes, which the other node commands (node show)
    # do without: a fifth of their start-up.
    from veglia.orm.deletion import delete_nodes, plan_deletion

    state.profile  # noqa: B018 -- load the chosen profile
    plan = plan_deletion(load_node(identifier).pk for identifier in identifiers)
    show_plan(plan)
    plan.check_no_active()
    if dry_run:
        console.print("Dry run: nothing was deleted.")
        return
    if not force:
        click.confirm(
            f"Delete {'this node' if len(plan.nodes) == 1 else f'these {len(plan.nodes)} nodes'}? "
            "This cannot be undone",
            abort=True,
        )
    deleted = delete_nodes(plan)
    echo_success(f"Deleted {plural(deleted, 'node')}.")
