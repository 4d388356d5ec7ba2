"""``veglia storage``: the schema of the profile's database, and freeing its repository."""

from __future__ import annotations

import functools

import click
from rich.filesize import decimal

from veglia.cli.output import echo_info, echo_success, print_table, raw_option
from veglia.cli.progress_bars import progress_bars
from veglia.cli.state import CliState, pass_state
from veglia.config.values import parse_duration
from veglia.storage.backend import StorageBackend


@click.group("storage")
def storage_group() -> None:
    """Inspect, migrate and maintain the profile's storage."""


@storage_group.command("migrate")
@pass_state
def storage_migrate(state: CliState) -> None:
    """Bring the database schema up to this release's version, then each plugin's tables
    up to the installed plugin's."""
    profile = state.config.get_profile(state.profile_name)
    storage = StorageBackend.from_profile(profile)
    try:
        before, after = storage.migrate(plugins=False)
        moved = storage.migrate_plugins()
    finally:
        storage.close()
    if before == after:
        echo_success(f"The database of {profile.name!r} is already at schema {after}.")
    else:
        echo_success(
            f"Migrated the database of {profile.name!r} from {before or 'empty'} to {after}."
        )
    for plugin, plugin_before, plugin_after in moved:
        if plugin_before != plugin_after:
            echo_success(
                f"Migrated the tables of plugin {plugin!r} from "
                f"{plugin_before or 'absent'} to {plugin_after}."
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
        plugins = storage.plugin_schema_status()
    finally:
        storage.close()
    rows = [
        ("database", profile.storage_url_masked),
        ("repository", profile.repository_location),
        ("schema", status.current or "empty"),
        ("needed", status.head),
        ("up to date", status.up_to_date),
    ]
    rows += [
        (f"schema of {plugin}", f"{plugin_status.current or 'absent'} (needs {plugin_status.head})")
        for plugin, _, plugin_status in plugins
    ]
    print_table(("Property", "Value"), rows, raw=raw)


# click >= 8.2 makes ParamType generic; 8.1 (which we support) cannot be subscripted.
class _Duration(click.ParamType):  # type: ignore[type-arg]
    """A duration as options take it (``90s``, ``2h``, ``1d``, ``3600``): seconds."""

    name = "duration"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> int:
        if isinstance(value, int):
            return value
        try:
            return parse_duration(str(value))
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


def _shown(seconds: int) -> str:
    """A duration as the option takes it: ``1d``, ``2h``, ``90s``."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


@storage_group.command("maintain")
@click.option(
    "--grace-period",
    type=_Duration(),
    # A day: longer than any write of a job (its files are stored before its node's row is
    # committed, and a parser of a large output runs in between).
    default="1d",
    show_default=True,
    help="Keep unreferenced blobs stored (or reused) more recently than this (90s, 2h, 1d): "
    "a running job stores its files before it commits the node that refers to them.",
)
@click.option("--dry-run", is_flag=True, help="List what would be freed; remove nothing.")
@raw_option
@pass_state
def storage_maintain(state: CliState, grace_period: int, dry_run: bool, raw: bool) -> None:
    """Free the repository's blobs that no node refers to (the files of deleted nodes).

    Safe while the daemon runs: a blob younger than the grace period stays even when no node
    refers to it yet, and so does every quarantined blob.
    """
    profile = state.config.get_profile(state.profile_name)
    storage = StorageBackend.from_profile(profile)
    try:
        storage.check_schema()
        # Read once: maintain's look-up, then the count of what the grace period kept (a
        # user who just deleted nodes expects their files gone).
        referenced = functools.cache(storage.referenced_blobs)
        with progress_bars() as progress:
            freed = storage.repository.maintain(grace_period, referenced, dry_run, progress)
        gone = {name for name, _ in freed}
        kept = referenced()
        young = sum(1 for sha in storage.repository if sha not in kept and sha not in gone)
    finally:
        storage.close()
    total = sum(size for _, size in freed)
    summary = f"{len(freed)} unreferenced blob{'s' * (len(freed) != 1)}, {total} bytes"
    if total >= 1000:
        summary += f" ({decimal(total)})"
    if dry_run:
        if freed:
            rows = [(name, size) for name, size in freed]
            print_table(("Blob", "Bytes"), rows, raw=raw)
        echo_success(f"Would free {summary}; nothing was removed.")
    else:
        echo_success(f"Freed {summary}.")
    if young:
        echo_info(
            f"Kept {young} unreferenced blob{'s' * (young != 1)} stored within the grace "
            f"period ({_shown(grace_period)}): a running job may be about to refer to them. "
            "When no job runs (daemon stopped), `--grace-period 1s` frees them now."
        )


COMMANDS = [storage_group]
