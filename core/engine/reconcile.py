"""Finding stranded processes, and queueing them again: ``verdi process repair``, by itself.

A process is stranded when it is active, no live worker holds its lease, and no task for it
waits in the broker: its task was lost (a broker restart at the wrong moment, a worker
killed while acknowledging, a purge). The daemon's supervisor looks every few seconds; a
process stranded in two looks in a row while the broker's process queue holds no waiting
task is queued again. A duplicate task is harmless: the lease lets one worker run it.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from veglia.engine import leases

__all__ = ["Reconciler", "queued_tasks", "requeue", "stranded"]

LOGGER = logging.getLogger("veglia.daemon")


def stranded(timeout: float) -> list[int]:
    """Active daemon processes that no live worker holds."""
    return leases.unleased_active(timeout)


def queued_tasks(profile: Any) -> int:
    """How many process tasks wait in the broker, not yet delivered to any worker."""
    import aio_pika
    from aio_pika.exceptions import ChannelNotFoundEntity

    from veglia.engine.broker_tasks import queue_names

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
    from veglia.engine.broker_tasks import send_continue_task
    from veglia.manage import get_profile

    for pk in pks:
        send_continue_task(get_profile().broker_url, pk)


class Reconciler:
    """The supervisor's repair loop; ``repaired`` counts the processes it queued again."""

    def __init__(self, profile: Any) -> None:
        self.profile = profile
        self.timeout = float(profile.get_option("daemon.lease_timeout"))
        self.repaired = 0
        self._seen: set[int] = set()

    def step(self) -> list[int]:
        """One look; the processes queued again."""
        now = set(stranded(self.timeout))
        twice, self._seen = sorted(now & self._seen), now
        if not twice or queued_tasks(self.profile):
            return []
        requeue(twice)
        self.repaired += len(twice)
        self._seen -= set(twice)
        LOGGER.warning("repaired %d stranded process(es): %s", len(twice), twice)
        return twice
