"""``veglia archive create / import / inspect``: nodes with their provenance in one portable
file, as ``verdi archive``."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import click

from veglia.cli.numbers import WholeNumber
from veglia.cli.output import console, echo_success, print_table
from veglia.cli.progress_bars import progress_bars
from veglia.cli.state import CliState, pass_state
from veglia.cli.verdi_forms import add_alias
from veglia.config.profile import Profile
from veglia.config.values import parse_size_mb
from veglia.exceptions import ConfigurationError
from veglia.orm.archive import create_archive
from veglia.orm.archive_import import import_archive
from veglia.orm.archive_read import MIB, ArchiveLimits, inspect_archive
from veglia.orm.groups import Group
from veglia.orm.loading import load_node
from veglia.orm.queries import node_pks
from veglia.wording import plural


def _size(count: int) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if count < 1000 or unit == "GB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1000  # type: ignore[assignment]
    return ""


@click.group("archive")
def archive_group() -> None:
    """Write nodes with their provenance to a file; import such a file into a profile."""


@archive_group.command("create")
@click.argument("path", metavar="FILE", type=click.Path(dir_okay=False))
@click.argument("identifiers", nargs=-1, metavar="[PK...]")
@click.option(
    "-G", "--group", "groups", multiple=True, metavar="GROUP", help="A group and its nodes."
)
# verdi's way to give PK... (-N once per node here)
@click.option("-N", "--nodes", "more_identifiers", multiple=True, hidden=True)
@click.option("-a", "--all", "everything", is_flag=True, help="Every node and group.")
@click.option("-f", "--force", is_flag=True, help="Overwrite FILE if it exists.")
@pass_state
def archive_create(
    state: CliState,
    path: str,
    identifiers: tuple[str, ...],
    groups: tuple[str, ...],
    more_identifiers: tuple[str, ...],
    everything: bool,
    force: bool,
) -> None:
    """Write nodes PK... and groups (-G), or every node (--all), with their provenance to the
    archive FILE.

    A process goes with its inputs, outputs, called processes and caller; data with the
    process that created it; and so on from those, as AiiDA's export does. Their
    attributes, logs and files go too. Processes that have not ended are refused.
    """
    state.profile  # noqa: B018 -- load the chosen profile
    if everything and (identifiers or more_identifiers or groups):
        raise click.UsageError("Give --all, or PKs and groups: not both.")
    if everything:
        pks = node_pks()
        groups = tuple(group.label for group in Group.list())
    else:
        pks = [load_node(identifier).pk for identifier in (*identifiers, *more_identifiers)]
    with progress_bars() as progress:
        summary = create_archive(path, pks, groups, overwrite=force, progress=progress)
    parts = [
        plural(summary.nodes, "node") + f" ({summary.processes} processes, {summary.data} data)",
        plural(summary.links, "link"),
        plural(summary.logs, "log message"),
        plural(summary.files, "file") + f" ({_size(summary.bytes)})",
    ]
    if summary.groups:
        parts.append(plural(summary.groups, "group"))
    echo_success(f"Wrote {path}: {', '.join(parts)}.")


def _size_option(text: str | None) -> int | None:
    """A size as ``veglia config`` takes it (``512M``, ``4G``) -> bytes; None: the profile's."""
    if text is None:
        return None
    try:
        return parse_size_mb(text) * MIB
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def _limits_of(profile: Profile) -> ArchiveLimits:
    """The limits the profile's ``archive.*`` options set."""
    return ArchiveLimits(
        max_data_size=profile.get_option("archive.max_data_size") * MIB,
        max_row_size=profile.get_option("archive.max_row_size") * MIB,
        max_total_size=profile.get_option("archive.max_size") * MIB,
        max_ratio=profile.get_option("archive.max_ratio"),
    )


def _profile_limits(state: CliState) -> ArchiveLimits:
    """The limits of the profile's ``archive.*`` options; without any profile, the defaults
    (an archive is read without one)."""
    try:
        profile = state.profile
    except ConfigurationError:
        if state.profile_name is not None:
            raise
        return ArchiveLimits()
    return _limits_of(profile)


def _when(text: object) -> str:
    try:
        return datetime.fromisoformat(str(text)).strftime("%Y-%m-%d %H:%M:%S %Z").strip()
    except ValueError:
        return str(text)


@archive_group.command("inspect")
@click.argument("path", metavar="FILE", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print it as JSON, for scripts.")
@pass_state
def archive_inspect(state: CliState, path: str, as_json: bool) -> None:
    """Show what the archive FILE holds, without importing it: its format version, when it
    was written, its nodes by type, links, groups, computers and files.

    The archive is checked as an import checks it: a damaged one is refused (exit 9)."""
    # Lazy: the node type -> class name table loads the ORM's classes, for the text only.
    from veglia.views.node import type_name

    info = inspect_archive(Path(path), _profile_limits(state))
    info["nodes"] = {type_name(node_type): count for node_type, count in info["node_types"].items()}
    if as_json:
        click.echo(json.dumps(info, indent=2))
        return
    counts = info["counts"]
    rows: list[tuple[str, object]] = [
        ("format version", f"{info['version']} ({info['format']})"),
        ("written by", f"veglia {info['veglia_version']}"),
        ("created", _when(info["created"])),
        ("nodes", counts["nodes"]),
        *((f"  {name}", count) for name, count in sorted(info["nodes"].items())),
        ("links", counts["links"]),
        ("groups", counts["groups"]),
        ("computers", counts["computers"]),
        ("codes", counts["codes"]),
        ("users", counts["users"]),
        ("log messages", counts["logs"]),
        ("files", f"{info['files']} ({_size(info['bytes'])})"),
    ]
    console.print(f"Archive {path}", markup=False, highlight=False)
    print_table(("Property", "Value"), rows)


@archive_group.command("import")
@click.argument("path", metavar="FILE", type=click.Path(dir_okay=False))
@click.option(
    "--max-data-size",
    metavar="SIZE",
    help="Refuse an archive whose rows (data.json) unpack to more (default: the profile's "
    "archive.max_data_size, 256M).",
)
@click.option(
    "--max-row-size",
    metavar="SIZE",
    help="Refuse an archive with a row of data.json (a node with its attributes...), or a "
    "text in one, past this (default: the profile's archive.max_row_size, 16M).",
)
@click.option(
    "--max-size",
    metavar="SIZE",
    help="Refuse an archive that unpacks to more in all (default: the profile's "
    "archive.max_size, 64G).",
)
@click.option(
    "--max-ratio",
    type=WholeNumber(min=1),
    metavar="N",
    help="Refuse an entry past 1 MiB that unpacks to more times its compressed size "
    "(default: the profile's archive.max_ratio, 100).",
)
@pass_state
def archive_import(
    state: CliState,
    path: str,
    max_data_size: str | None,
    max_row_size: str | None,
    max_size: str | None,
    max_ratio: int | None,
) -> None:
    """Import the archive FILE into this profile, keeping UUIDs.

    Nodes already here (by UUID) are skipped, so importing twice adds nothing. An archive
    that would change the provenance of a node here (a new link into or out of it) is
    refused whole, as is a damaged one or one past the size limits. Missing computers and
    codes are created by label, not configured.
    """
    defaults = _limits_of(state.profile)
    limits = ArchiveLimits(
        max_data_size=_size_option(max_data_size) or defaults.max_data_size,
        max_row_size=_size_option(max_row_size) or defaults.max_row_size,
        max_total_size=_size_option(max_size) or defaults.max_total_size,
        max_ratio=max_ratio or defaults.max_ratio,
    )
    with progress_bars() as progress:
        summary = import_archive(Path(path), limits, progress)
    if not summary.changed:  # no node, link, group, computer, code or user was created
        console.print(
            f"Nothing new in {path}: its {plural(summary.nodes_present, 'node')} "
            f"{'is' if summary.nodes_present == 1 else 'are'} here already."
        )
        return
    parts = [plural(summary.nodes_new, "new node")]
    if summary.nodes_present:
        parts.append(f"{summary.nodes_present} here already")
    parts += [plural(summary.links, "link"), plural(summary.logs, "log message")]
    if summary.groups_new:
        parts.append(
            f"new group{'s' if len(summary.groups_new) > 1 else ''} "
            + ", ".join(summary.groups_new)
        )
    elif summary.group_members:
        parts.append(f"{plural(summary.group_members, 'node')} added to groups")
    echo_success(f"Imported {path}: {', '.join(parts)}.")
    for original, label in summary.groups_renamed:
        console.print(f"Group {original!r} exists here already: imported as {label!r}.")
    for label in summary.computers_created:
        console.print(
            f"Created computer {label!r}; set it up to run jobs with "
            f"`veglia computer configure {label}`."
        )
    for label in summary.codes_created:
        console.print(f"Created code {label!r}.")
    for email in summary.users_created:
        console.print(f"Created user {email!r}.")


add_alias(archive_group, "info", archive_inspect)  # AiiDA 2's name of inspect

COMMANDS = [archive_group]
