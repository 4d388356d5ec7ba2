"""``veglia calcjob cleanworkdir``: remove the remote work dirs of ended calc jobs, as
``verdi calcjob cleanworkdir``."""

from __future__ import annotations

import click

from veglia.cli.node_args import load_calcjob
from veglia.cli.output import console, echo_success, print_table
from veglia.cli.state import CliState, pass_state
from veglia.orm.workdirs import clean_workdirs, plan_cleaning
from veglia.wording import plural


@click.command("cleanworkdir")
@click.argument("identifiers", nargs=-1, required=True, metavar="PK...")
@click.option("-f", "--force", is_flag=True, help="Do not ask for confirmation.")
@pass_state
def calcjob_cleanworkdir(state: CliState, identifiers: tuple[str, ...], force: bool) -> None:
    """Remove the work dirs of ended calc jobs on their computers.

    The retrieved files stay in the repository; the jobs record that their work dir is
    gone. Jobs that have not ended are refused.
    """
    state.profile  # noqa: B018 -- load the chosen profile
    nodes = {node.pk: node for node in map(load_calcjob, identifiers)}
    todo, skipped = plan_cleaning(nodes.values())
    for reason in skipped:
        console.print(f"Skipping {reason}.", markup=False)
    if not todo:
        console.print("Nothing to clean.")
        return
    console.print(f"Removing the work dirs of {plural(len(todo), 'calc job')}:")
    print_table(
        ("PK", "Computer", "Work dir"),
        [(item.node.pk, item.computer.label, item.path) for item in todo],
    )
    if not force:
        click.confirm(
            f"Remove {'this work dir' if len(todo) == 1 else f'these {len(todo)} work dirs'} "
            "and everything in it? This cannot be undone",
            abort=True,
        )
    removed = clean_workdirs(todo)
    echo_success(
        f"Removed {plural(removed, 'work dir')}; the retrieved files stay "
        "(`veglia calcjob outputls PK`)."
    )
