"""``veglia profile``: list, show, choose and delete profiles."""

from __future__ import annotations

import click

from veglia.cli.output import echo_success, echo_warning, print_table, raw_option
from veglia.cli.state import CliState, pass_state
from veglia.cli.verdi_forms import add_alias
from veglia.config.profile import Profile


@click.group("profile")
def profile_group() -> None:
    """Inspect and manage profiles."""


@profile_group.command("list")
@raw_option
@pass_state
def profile_list(state: CliState, raw: bool) -> None:
    """List the profiles; * marks the default."""
    config = state.config
    rows = []
    for name in config.profile_names:
        profile = config.get_profile(name)
        marker = "*" if name == config.default_profile else ""
        rows.append((marker, name, profile.storage_url_masked, profile.broker_url_masked or "-"))
    print_table(("", "Name", "Storage", "Broker"), rows, raw=raw)


@profile_group.command("show")
@click.argument("name", required=False)
@raw_option
@pass_state
def profile_show(state: CliState, name: str | None, raw: bool) -> None:
    """Show a profile's folders and URLs (secrets masked)."""
    profile = state.config.get_profile(name or state.profile_name)
    rows = [
        ("name", profile.name),
        ("folder", profile.folder),
        ("storage", profile.storage_url_masked),
        ("repository", profile.repository_location),
        ("broker", profile.broker_url_masked or "none"),
        ("default", profile.name == state.config.default_profile),
    ]
    print_table(("Property", "Value"), rows, raw=raw)


@profile_group.command("set-default")
@click.argument("name")
@pass_state
def profile_set_default(state: CliState, name: str) -> None:
    """Make NAME the default profile."""
    state.config.set_default(name)
    echo_success(f"{name!r} is now the default profile.")


add_alias(profile_group, "setdefault", profile_set_default)


@profile_group.command("delete")
@click.argument("name")
@click.option(
    "--keep-data/--delete-data",
    default=False,
    help="Keep the profile's folder (SQLite, files) and its tables in a database of its URL, "
    "or delete them (the default; verdi's --delete-data).",
)
@click.option("-f", "--force", is_flag=True, help="Do not ask for confirmation.")
@pass_state
def profile_delete(state: CliState, name: str, keep_data: bool, force: bool) -> None:
    """Delete profile NAME and, unless --keep-data, its folder, its tables in the database
    storage.url names (PostgreSQL), and its queue on the broker."""
    # Lazy: the daemon's files only for a delete.
    from veglia.engine.daemon import DaemonFiles
    from veglia.exceptions import DaemonError

    profile = state.config.get_profile(name)
    if DaemonFiles(profile).supervisor_pid() is not None:
        # Its workers would go on running jobs, writing to a folder and tables that are gone.
        raise DaemonError(
            f"The daemon of profile {name!r} is running: stop it first "
            f"(`veglia -p {name} daemon stop`), then delete the profile."
        )
    # An empty storage.url is SQLite in the profile's folder, which goes with the folder.
    database = profile.storage_url_masked if profile.get_option("storage.url") else ""
    if not force:
        what = "" if keep_data else f" and everything in {profile.folder}"
        if database and not keep_data:
            what += f" and veglia's tables in {database}"
        click.confirm(f"Delete profile {name!r}{what}?", abort=True)
    dropped: list[str] = []
    if database and not keep_data:
        dropped = _drop_tables(profile)
    if not keep_data:
        # Its waiting tasks name processes that are about to go: left on RabbitMQ, they
        # would stay there for good.
        from veglia.engine.daemon.broker_tasks import delete_broker_queues
        from veglia.exceptions import BrokerError

        try:
            delete_broker_queues(profile)
        except BrokerError as exc:
            echo_warning(f"{exc}. They stay on the broker until deleted there.")
    state.config.delete_profile(name, keep_data=keep_data)
    if keep_data:
        kept = f"its folder {profile.folder}"
        kept += f" and its tables in {database}" if database else ""
        echo_success(f"Deleted profile {name!r}; kept {kept} (--keep-data).")
    elif database:
        echo_success(
            f"Deleted profile {name!r}, its folder and its {len(dropped)} tables in {database} "
            "(the database itself stays)."
        )
    else:
        echo_success(f"Deleted profile {name!r} and its folder {profile.folder}.")


def _drop_tables(profile: Profile) -> list[str]:
    """Drop the profile's tables in its database; nothing is deleted when it does not answer."""
    # Lazy: the storage layer only for a profile with a database of its own.
    from veglia.exceptions import StorageUnavailable
    from veglia.storage.backend import StorageBackend

    storage = StorageBackend.from_profile(profile)
    try:
        return storage.drop_tables()
    except StorageUnavailable as exc:
        raise StorageUnavailable(
            f"{exc}. Nothing was deleted: start the database and run this again, or delete "
            "the profile and keep its tables with --keep-data."
        ) from None
    finally:
        storage.close()


COMMANDS = [profile_group]
