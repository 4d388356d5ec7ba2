"""``veglia storage``: the schema of the profile's database."""

from __future__ import annotations

import click

from veglia.cli.output import echo_success, print_table, raw_option
from veglia.cli.state import CliState, pass_state
from veglia.storage.backend import StorageBackend


@click.group("storage")
def storage_group() -> None:
    """Inspect and migrate the profile's storage."""


@storage_group.command("migrate")
@pass_state
def storage_migrate(state: CliState) -> None:
    """Bring the database schema up to this release's version."""
    profile = state.config.get_profile(state.profile_name)
    storage = StorageBackend.from_profile(profile)
    try:
        before, after = storage.migrate()
    finally:
        storage.close()
    if before == after:
        echo_success(f"The database of {profile.name!r} is already at schema {after}.")
    else:
        echo_success(
            f"Migrated the database of {profile.name!r} from {before or 'empty'} to {after}."
        )


@storage_group.command("info")
@raw_option
@pass_state
def storage_info(state: CliState, raw: bool) -> None:
    """Show where the storage is and its schema version."""
    profile = state.config.get_profile(state.profile_name)
    storage = StorageBackend.from_profile(profile)
    try:
        status = storage.schema_status()
    finally:
        storage.close()
    rows = [
        ("database", profile.storage_url_masked),
        ("repository", profile.repository_location),
        ("schema", status.current or "empty"),
        ("needed", status.head),
        ("up to date", status.up_to_date),
    ]
    print_table(("Property", "Value"), rows, raw=raw)


COMMANDS = [storage_group]
