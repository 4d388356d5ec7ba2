"""Handing submitted processes to the daemon: a broker task, or the database alone."""

from __future__ import annotations

from veglia.engine.daemon.broker_tasks import send_continue_task
from veglia.manage import get_profile
from veglia.orm.process_nodes import ProcessNode

__all__ = ["notify_daemon"]


def notify_daemon(node: ProcessNode) -> None:
    """Tell the daemon about a new process.

    With a broker, a task message (acknowledged only when the process ends, so a dead
    worker's processes go to another); without one, the node in the database is the task:
    the single daemon worker picks up every unfinished process.
    """

    url = get_profile().broker_url
    if not url:
        return

    send_continue_task(url, node.pk)
