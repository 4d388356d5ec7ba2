"""``veglia computer enable`` and ``disable``: whether a user's new jobs may go to a
computer, as ``verdi computer enable/disable`` (per user: it is kept with the user's
connection options)."""

from __future__ import annotations

import click

from veglia.cli.completion import complete_computer_labels
from veglia.cli.output import echo_success
from veglia.cli.state import CliState, pass_state
from veglia.orm.computers import load_computer
from veglia.orm.queries import processes_on_computer
from veglia.orm.users import User, get_default_user, load_user

__all__ = ["computer_disable", "computer_enable"]

_user_option = click.option(
    "-u",
    "--user",
    "email",
    metavar="EMAIL",
    help="For this user of the profile (`veglia user list`); default: the profile's user.",
)


def _user(email: str | None) -> User:
    return get_default_user() if email is None else load_user(email)


@click.command("enable")
@click.argument("label", shell_complete=complete_computer_labels)
@_user_option
@pass_state
def computer_enable(state: CliState, label: str, email: str | None) -> None:
    """Let new jobs go to computer LABEL again (undoes `veglia computer disable`)."""
    state.profile  # noqa: B018 -- load the chosen profile
    computer = load_computer(label)
    user = _user(email)
    was = computer.is_enabled(user)
    computer.set_enabled(True, user)
    already = " (it was)" if was else ""
    echo_success(f"Computer {computer.label!r} is enabled for {user.email}{already}.")


@click.command("disable")
@click.argument("label", shell_complete=complete_computer_labels)
@_user_option
@pass_state
def computer_disable(state: CliState, label: str, email: str | None) -> None:
    """Stop new jobs going to computer LABEL, for you (or --user), until `computer enable`.

    Submitting a job there is refused with a one-line error; jobs already submitted go on
    as before (kill them with `veglia process kill` to stop them). `veglia computer list`
    leaves it out unless -a.
    """
    state.profile  # noqa: B018
    computer = load_computer(label)
    user = _user(email)
    was = computer.is_enabled(user)
    computer.set_enabled(False, user)
    assert computer.pk is not None
    active = processes_on_computer(computer.pk)
    going_on = (
        f"; its {len(active)} job{'s' if len(active) != 1 else ''} not ended yet go on"
        if active
        else ""
    )
    already = " (it was)" if not was else ""
    echo_success(
        f"Computer {computer.label!r} is disabled for {user.email}{already}: it takes no new "
        f"jobs{going_on}. `veglia computer enable {computer.label}` undoes this."
    )
