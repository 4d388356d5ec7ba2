"""``veglia user``: the users of the profile's database, as ``verdi user``."""

from __future__ import annotations

import click

from veglia.cli.output import console, print_table, raw_option
from veglia.cli.state import CliState, pass_state
from veglia.orm.users import get_default_user, list_users

__all__ = ["COMMANDS", "user_group"]


@click.group("user")
def user_group() -> None:
    """List the users of the profile: who owns nodes and connects to computers."""


@user_group.command("list")
@raw_option
@pass_state
def user_list(state: CliState, raw: bool) -> None:
    """List the users of the profile's database; * marks the profile's user.

    The profile's user (option user.email, else LOGIN@localhost) owns the nodes and
    connections made here; others come with imported archives or another user.email.
    """
    state.profile  # noqa: B018 -- load the chosen profile
    default = get_default_user()  # made on first use, so listed too
    rows = [
        (
            "*" if user.pk == default.pk else "",
            user.email,
            user.first_name,
            user.last_name,
            user.institution,
        )
        for user in list_users()
    ]
    print_table(("", "Email", "First name", "Last name", "Institution"), rows, raw=raw)
    if not raw:
        console.print(
            f"* the profile's user, {default.email} (`veglia config set user.email EMAIL`).",
            markup=False,
        )


COMMANDS = [user_group]
