"""``veglia computer delete``: delete a computer with its codes, and the nodes that used it
(with what goes with them by provenance), after showing them, as ``verdi computer delete``.

Refused while a process on it has not ended. The job folders on the computer are left
alone: `veglia calcjob cleanworkdir` removes them, before.
"""

from __future__ import annotations

import click

from veglia.cli.cmd_computer_edit import refuse_active
from veglia.cli.cmd_node_delete import show_plan
from veglia.cli.completion import complete_computer_labels
from veglia.cli.output import console, echo_success, print_table
from veglia.cli.state import CliState, pass_state
from veglia.orm.computers import Code, load_computer
from veglia.orm.deletion import delete_nodes, plan_deletion
from veglia.orm.queries import node_pks_on_computer

__all__ = ["computer_delete"]


@click.command("delete")
@click.argument("label", shell_complete=complete_computer_labels)
@click.option("-f", "--force", is_flag=True, help="Do not ask for confirmation.")
@click.option("-n", "--dry-run", is_flag=True, help="Only show what would be deleted.")
@pass_state
def computer_delete(state: CliState, label: str, force: bool, dry_run: bool) -> None:
    """Delete computer LABEL with its codes, and the nodes that ran on it, after showing them.

    Refused while a process on it has not ended: wait for it or kill it first. The nodes go
    with what goes with them by provenance, as with `veglia node delete`.
    """
    state.profile  # noqa: B018 -- load the chosen profile
    computer = load_computer(label)
    assert computer.pk is not None
    refuse_active(computer, "delete")
    codes = [code for code in Code.list() if code.computer.pk == computer.pk]
    node_pks = node_pks_on_computer(computer.pk)
    plan = plan_deletion(node_pks) if node_pks else None
    console.print(
        f"Deleting computer {computer.label!r} (pk {computer.pk}, {computer.hostname}), "
        "your connection options for it"
        + (f", its {len(codes)} code{'s' if len(codes) != 1 else ''}" if codes else "")
        + (" and the nodes below." if plan else "."),
        markup=False,
    )
    if codes:
        print_table(
            ("PK", "Code", "Executable"), [(c.pk, c.full_label, c.executable) for c in codes]
        )
    if plan is not None:
        show_plan(plan, "that ran on it", "ran on it")
        plan.check_no_active()
    if dry_run:
        console.print("Dry run: nothing was deleted.")
        return
    if not force:
        click.confirm(f"Delete computer {computer.label!r}? This cannot be undone", abort=True)
    deleted = delete_nodes(plan) if plan is not None else 0
    computer.delete()
    parts = [f"computer {computer.label!r}"]
    if codes:
        parts.append(f"{len(codes)} code{'s' if len(codes) != 1 else ''}")
    if deleted:
        parts.append(f"{deleted} node{'s' if deleted != 1 else ''}")
    echo_success(
        f"Deleted {', '.join(parts)}. Its job folders on {computer.hostname} were left alone."
    )
