"""Handing submitted processes to the daemon: a broker task, or the database alone."""

from __future__ import annotations

from veglia.engine.daemon.broker_tasks import send_continue_task
from veglia.engine.daemon.task_pipeline import get_pipeline
from veglia.manage import get_profile
from veglia.orm.process_nodes import ProcessNode

__all__ = ["check_handed_over", "notify_daemon"]


def notify_daemon(node: ProcessNode, wait: bool = True) -> None:
    """Tell the daemon about a new process.

    With a broker, a task message (acknowledged only when the process ends, so a dead
    worker's processes go to another); without one, the node in the database is the task:
    the single daemon worker picks up every unfinished process.

    ``wait=False`` does not wait for the broker's confirmation of the task: it is checked
    later (see :mod:`~veglia.engine.daemon.task_pipeline`), and a task the broker did not
    take is sent again then, or reported.
    """

    url = get_profile().broker_url
    if not url:
        return
    if wait:
        send_continue_task(url, node.pk)
    else:
        get_pipeline().send(url, node.pk)


def check_handed_over() -> None:
    """Send again each task of an earlier submission the broker did not take; a
    ``BrokerError`` when one cannot be handed over."""
    get_pipeline().check()
