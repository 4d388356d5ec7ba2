"""What <TAB> offers: process and node PKs, computer and code labels, plugin names.

Each function here is a click ``shell_complete`` callback, given to an argument or option
(``click.argument("pk", shell_complete=complete_process_pks)``); docs/cli.md says how to
turn completion on (``_VEGLIA_COMPLETE=bash_source veglia``). Click calls them before any
command runs, so each loads the profile (``-p`` or the default) itself, and offers nothing
rather than fail: an error would be printed into the user's shell.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

import click
from click.shell_completion import CompletionItem

from veglia.cli.state import CliState
from veglia.entry_points import get_entry_points

__all__ = [
    "RECENT",
    "complete_calcjob_pks",
    "complete_code_labels",
    "complete_computer_labels",
    "complete_entry_points",
    "complete_node_pks",
    "complete_process_pks",
]

LOGGER = logging.getLogger(__name__)

#: How many PKs completion offers at most: the newest whose digits start as typed.
RECENT = 50

Completer = Callable[[click.Context, click.Parameter, str], list[CompletionItem]]


def _profile_loaded(ctx: click.Context) -> bool:
    """Load the profile ``veglia -p NAME`` names (or the default); False when there is none."""
    try:
        CliState(profile_name=ctx.find_root().params.get("profile_name")).profile  # noqa: B018
    except Exception as exc:  # no profile, a broken config: nothing to offer
        LOGGER.debug("no completion: %s", exc)
        return False
    return True


def _offered(ask: Callable[[], list[CompletionItem]]) -> list[CompletionItem]:
    try:
        return ask()
    except Exception as exc:  # the database is down, ...: offer nothing, print nothing
        LOGGER.debug("no completion: %s", exc)
        return []


def _pks(ctx: click.Context, incomplete: str, node_type: str | None) -> list[CompletionItem]:
    # Lazy: the ORM (SQLAlchemy) only on <TAB>; `veglia plugin` imports this module too.
    from veglia.orm.queries import recent_nodes

    if not _profile_loaded(ctx):
        return []
    items = []
    for pk, kind, label, process_type, state, exit_status in recent_nodes(
        incomplete, node_type=node_type, limit=RECENT
    ):
        if process_type:
            what = process_type.rsplit(":", 1)[-1]
            done = f" [{exit_status}]" if exit_status is not None else ""
            detail = f"{state or 'unknown'}{done}"
        else:
            what, detail = kind, ""
        help_text = " ".join(part for part in (what, label and repr(label), detail) if part)
        items.append(CompletionItem(str(pk), help=help_text))
    return items


def complete_process_pks(
    ctx: click.Context, param: click.Parameter, incomplete: str
) -> list[CompletionItem]:
    """The newest process PKs that start with the digits typed."""
    return _offered(lambda: _pks(ctx, incomplete, "process"))


def complete_calcjob_pks(
    ctx: click.Context, param: click.Parameter, incomplete: str
) -> list[CompletionItem]:
    """The newest calc job PKs that start with the digits typed."""
    return _offered(lambda: _pks(ctx, incomplete, "process.calcjob"))


def complete_node_pks(
    ctx: click.Context, param: click.Parameter, incomplete: str
) -> list[CompletionItem]:
    """The newest node PKs (any node) that start with the digits typed."""
    return _offered(lambda: _pks(ctx, incomplete, None))


def _labels(
    ctx: click.Context, incomplete: str, listed: Callable[[], Iterable[tuple[str, str]]]
) -> list[CompletionItem]:
    """The ``(label, help)`` pairs of ``listed`` whose label starts with what was typed."""

    def ask() -> list[CompletionItem]:
        if not _profile_loaded(ctx):
            return []
        return [
            CompletionItem(label, help=text)
            for label, text in listed()
            if label.startswith(incomplete)
        ]

    return _offered(ask)


def complete_computer_labels(
    ctx: click.Context, param: click.Parameter, incomplete: str
) -> list[CompletionItem]:
    """The labels of the computers, with their host name."""
    # Lazy: the ORM (SQLAlchemy) only on <TAB>; `veglia plugin` imports this module too.
    from veglia.orm.computers import Computer

    return _labels(ctx, incomplete, lambda: ((c.label, c.hostname) for c in Computer.list()))


def complete_code_labels(
    ctx: click.Context, param: click.Parameter, incomplete: str
) -> list[CompletionItem]:
    """The codes as LABEL@COMPUTER, with their executable."""
    # Lazy: the ORM (SQLAlchemy) only on <TAB>; `veglia plugin` imports this module too.
    from veglia.orm.computers import Code

    return _labels(ctx, incomplete, lambda: ((c.full_label, c.executable) for c in Code.list()))


def complete_entry_points(group: str | None = None) -> Completer:
    """A callback offering the plugin names of ``group``, or of the group given before on
    the command line (the ``group`` argument of ``veglia plugin show GROUP NAME``)."""

    def complete(ctx: click.Context, param: click.Parameter, incomplete: str) -> Any:
        chosen = group or ctx.params.get("group")
        if not chosen:
            return []
        return _offered(
            lambda: [
                CompletionItem(ep.name, help=ep.value)
                for ep in get_entry_points(chosen)
                if ep.name.startswith(incomplete)
            ]
        )

    return complete
