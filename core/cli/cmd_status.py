"""``veglia status``: is this installation healthy?"""

from __future__ import annotations

import click

import veglia
from veglia.cli.cmd_setup import print_checks
from veglia.cli.output import console
from veglia.cli.state import CliState, pass_state
from veglia.selftest import run_checks


@click.command("status")
@pass_state
def status(state: CliState) -> int:
    """Check configuration, storage and broker; one ✔/✘ line each, exit 1 on any ✘."""
    console.print(f"[green]✔[/green] {'version:':<9} veglia {veglia.__version__}")
    profile = state.config.get_profile(state.profile_name)
    return 0 if print_checks(run_checks(profile)) else 1


COMMANDS = [status]
