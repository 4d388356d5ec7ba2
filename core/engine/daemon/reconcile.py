"""Finding stranded processes, and queueing them again: ``verdi process repair``, by itself.

A process is stranded when it is active, no live worker holds its lease, and no task for it
waits in the broker: its task was lost (a broker restart at the wrong moment, a worker
killed while acknowledging, a purge). The daemon's supervisor looks every few seconds; a
process stranded in two looks in a row while the broker's process queue holds no waiting
task is queued again, and behind a backlog of tasks once it has waited longer than any
task in the queue should (see :class:`Reconciler`). A duplicate task is harmless: the lease
lets one worker run it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from veglia.engine.daemon import leases
from veglia.engine.daemon.broker_tasks import queue_names, send_continue_task
from veglia.manage import get_profile

__all__ = ["Reconciler", "queued_tasks", "requeue", "stranded"]

LOGGER = logging.getLogger("veglia.daemon")


def stranded(timeout: float) -> list[int]:
    """Active daemon processes that no live worker holds."""
    return leases.unleased_active(timeout)


def queued_tasks(profile: Any) -> int:
    """How many process tasks wait in the broker, not yet delivered to any worker."""
    import aio_pika
    from aio_pika.exceptions import ChannelNotFoundEntity

    async def count() -> int:
        connection = await aio_pika.connect(profile.broker_url, timeout=10)
        async with connection:
            channel = await connection.channel()
            name = queue_names(profile)["task_queue"]
            try:
                queue = await channel.declare_queue(name, passive=True)
            except ChannelNotFoundEntity:
                return 0
            return int(queue.declaration_result.message_count or 0)

    return asyncio.run(count())


def requeue(pks: list[int]) -> None:

    for pk in pks:
        send_continue_task(get_profile().broker_url, pk)


class Reconciler:
    """The supervisor's repair loop; ``repaired`` counts the processes it queued again.

    While tasks wait in the broker (the workers are full), a process with no lease may
    simply be waiting its turn, so it is queued again only once it has been unheld for
    ``backlog_patience`` seconds (ten lease timeouts, at least a minute): a lost task then
    costs that long at most, and a duplicate is dropped by whichever worker gets it. One
    whose worker stopped while holding it is queued again at once: its task may have been
    acknowledged when it dehydrated.
    """

    def __init__(self, profile: Any, backlog_patience: float | None = None) -> None:
        self.profile = profile
        self.timeout = float(profile.get_option("daemon.lease_timeout"))
        self.backlog_patience = (
            max(60.0, 10 * self.timeout) if backlog_patience is None else backlog_patience
        )
        self.repaired = 0
        self._since: dict[int, float] = {}  # unheld process -> when first seen unheld

    def step(self, now: float | None = None) -> list[int]:
        """One look; the processes queued again."""
        now = time.monotonic() if now is None else now
        unheld = set(stranded(self.timeout))
        self._since = {pk: self._since.get(pk, now) for pk in unheld}
        seen_before = sorted(pk for pk, since in self._since.items() if since < now)
        if not seen_before:
            return []
        if queued_tasks(self.profile):
            # Behind a backlog, a process with no lease may be waiting its turn; one whose
            # holder stopped is stranded all the same (a dehydrated process's task was
            # acknowledged), so it is queued again at once.
            dead = set(leases.held_by_the_dead(self.timeout))
            seen_before = [
                pk
                for pk in seen_before
                if pk in dead or now - self._since[pk] >= self.backlog_patience
            ]
        if not seen_before:
            return []
        requeue(seen_before)
        self.repaired += len(seen_before)
        for pk in seen_before:
            self._since.pop(pk)
        LOGGER.warning("repaired %d stranded process(es): %s", len(seen_before), seen_before)
        return seen_before
