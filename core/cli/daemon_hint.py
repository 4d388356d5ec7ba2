"""Saying that no daemon runs, where a user would otherwise wait for nothing: after a
submission, when watching a submitted process, and under a list of processes that wait."""

from __future__ import annotations

from typing import TYPE_CHECKING

from veglia.cli.output import echo_warning
from veglia.engine.daemon.installed_code import old_code_message
from veglia.engine.daemon.presence import daemon_running, no_daemon_message
from veglia.manage import get_profile
from veglia.orm.attributes import DAEMON
from veglia.orm.queries import ACTIVE_STATES, active_process_pks

if TYPE_CHECKING:
    from collections.abc import Iterable

    from veglia.orm.process_nodes import ProcessNode
    from veglia.orm.queries import ProcessRow

__all__ = ["warn_if_no_daemon", "warn_if_waiting_for_no_daemon"]


def warn_if_no_daemon(node: ProcessNode | None = None) -> bool:
    """Warn when no daemon runs (for ``node``: only when it waits for one); True if warned.
    When one runs on older plugin code than is installed, warn of that (and return False)."""
    if node is not None and (node.is_terminated or not node.get_attribute(DAEMON)):
        return False
    if daemon_running():
        old_code = old_code_message(get_profile())
        if old_code:
            echo_warning(old_code[0].upper() + old_code[1:] + ".")
        return False
    echo_warning(no_daemon_message())
    return True


def warn_if_waiting_for_no_daemon(every_active: Iterable[ProcessRow] | None = None) -> None:
    """Under ``process list``: submitted processes wait, and no daemon runs.

    ``every_active``: rows that hold every unfinished process (with their ``DAEMON``
    attribute), as a listing of them all has read: counted instead of asking the database,
    which reads the attributes of each unfinished process again."""
    if every_active is None:
        waiting = len(active_process_pks(daemon=True))
    else:
        waiting = sum(
            1
            for row in every_active
            if row.process_state in ACTIVE_STATES and row.attributes.get(DAEMON)
        )
    if waiting and not daemon_running():
        echo_warning(f"{waiting} submitted process(es) wait, and {no_daemon_message()}.")
