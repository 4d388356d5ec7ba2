"""``veglia process rerun PK --from STEP``: send a workflow run back to one of its steps and
run it from there, with some inputs changed for this run only."""

from __future__ import annotations

import click

from veglia.cli.completion import complete_process_pks
from veglia.cli.daemon_hint import warn_if_no_daemon
from veglia.cli.node_args import load_process
from veglia.cli.output import console
from veglia.cli.state import CliState, pass_state

__all__ = ["process_rerun_command"]


@click.command("rerun")
@click.argument("identifier", metavar="PK", shell_complete=complete_process_pks)
@click.option(
    "--from", "step", required=True, metavar="STEP", help="The step of its outline to go back to."
)
@click.option(
    "--set",
    "settings",
    multiple=True,
    metavar="NAME=VALUE",
    help="An input for this run (dotted for a namespace's, e.g. job.metadata.options."
    "max_wallclock_seconds=600); the value is read as TOML, else as text. Repeatable.",
)
@click.option("--submit", is_flag=True, help="Hand the new run to the daemon, not run it here.")
@pass_state
def process_rerun_command(
    state: CliState, identifier: str, step: str, settings: tuple[str, ...], submit: bool
) -> int:
    """Run workflow PK again from step STEP: the steps before it reuse the processes the
    run launched, STEP and the steps after it run again. Both runs stay in the provenance."""
    # Lazy: the engine only for a command that acts (process list starts quickly).
    from veglia.engine.rerun import parse_settings, rerun_workflow

    state.profile  # noqa: B018 - loads the profile
    node = load_process(identifier)
    changes = parse_settings(settings)
    if not submit:
        console.print(f"Rerunning process {node.pk} from step {step}…")
    new = rerun_workflow(node.pk, step, changes, to_daemon=submit)
    if submit:
        console.print(f"Submitted process {new.pk}: process {node.pk} again from step {step}.")
        warn_if_no_daemon(new)
        return 0
    if new.is_finished_ok:
        console.print(f"[green]✔[/green] process {node.pk} ran again as process {new.pk}")
        return 0
    outcome = f"failed [{new.exit_status}]" if new.is_finished else new.process_state
    console.print(
        f"[red]✘[/red] process {node.pk} ran again as process {new.pk}, which {outcome}: "
        f"{new.exit_message or 'see `veglia process report ' + str(new.pk) + '`'}"
    )
    return 1
