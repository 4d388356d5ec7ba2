"""``veglia config``: the options of a profile."""

from __future__ import annotations

import json

import click

from veglia.cli.output import echo_info, echo_success, print_table, raw_option
from veglia.cli.state import CliState, pass_state
from veglia.cli.verdi_forms import veglia_writes
from veglia.config.options import get_option, get_options
from veglia.config.profile import Profile
from veglia.engine.daemon.files import DaemonFiles

MASK = "****"


def shown_value(option_name: str, value: object) -> str:
    """How a value is printed: secrets masked, structured values in their own syntax."""
    option = get_option(option_name)
    if option.secret:
        return MASK if value else ""
    return option.format(value)


@click.group("config")
def config_group() -> None:
    """Get, set and list profile options."""


@config_group.command("list")
@raw_option
def config_list(raw: bool) -> None:
    """List every option with its default and meaning."""
    rows = [
        (name, shown_value(name, option.default), option.description)
        for name, option in sorted(get_options().items())
    ]
    print_table(("Option", "Default", "Description"), rows, raw=raw, keep={"Option"})


@config_group.command("show")
@click.option("-a", "--all", "show_all", is_flag=True, help="Also options left at their default.")
@raw_option
@pass_state
def config_show(state: CliState, show_all: bool, raw: bool) -> None:
    """Show the options of the profile (secrets masked)."""
    profile = state.profile
    rows = []
    for name in sorted(get_options()):
        if not show_all and not profile.is_set(name):
            continue
        source = "profile" if profile.is_set(name) else "default"
        rows.append((name, shown_value(name, profile.get_option(name)), source))
    print_table(("Option", "Value", "Source"), rows, raw=raw, title=f"Profile {profile.name}")


@config_group.command("get")
@click.argument("name")
@pass_state
def config_get(state: CliState, name: str) -> None:
    """Print the value of option NAME (secrets masked)."""
    value = state.profile.get_option(name)
    if isinstance(value, list | dict) and not get_option(name).secret:
        click.echo(json.dumps(value))
    else:
        click.echo(shown_value(name, value))


@config_group.command("set", context_settings={"ignore_unknown_options": True})
@click.argument("name")
@click.argument("value")
# verdi's, for every profile at once: veglia's options are per profile only.
@click.option("--global", "everywhere", is_flag=True, hidden=True)
@pass_state
def config_set(state: CliState, name: str, value: str, everywhere: bool) -> None:
    """Set option NAME to VALUE for the profile."""
    if everywhere:
        raise veglia_writes(
            f"veglia config set {name} {value} (options are per profile: -p PROFILE before "
            "`config` for another)"
        )
    profile = state.profile
    if name == "computer.default" and value.strip():
        # Checked now, not at the next `veglia shell`: the computer must be in this profile.
        from veglia.orm.computers import load_computer

        load_computer(value.strip())
    stored = state.config.set_option(profile.name, name, value)
    echo_success(f"{name} = {shown_value(name, stored)} for profile {profile.name!r}.")
    _tell_when_in_effect(profile, name)


@config_group.command("unset")
@click.argument("name")
@pass_state
def config_unset(state: CliState, name: str) -> None:
    """Reset option NAME to its default for the profile."""
    profile = state.profile
    state.config.unset_option(profile.name, name)
    echo_success(f"{name} is back to its default for profile {profile.name!r}.")
    _tell_when_in_effect(profile, name)


def _tell_when_in_effect(profile: Profile, name: str) -> None:
    """A running daemon reads changed options within a second, except those it reads once."""
    if DaemonFiles(profile).supervisor_pid() is None:
        return
    if get_option(name).needs_restart:
        echo_info(f"The daemon is running: {name} takes effect at `veglia daemon restart`.")
    else:
        echo_info(f"The running daemon uses the new {name} within a second.")


COMMANDS = [config_group]
