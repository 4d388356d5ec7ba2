"""The queues of a computer and their limits: from the computer, the scheduler, or the
profile, in that order."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from veglia.config.values import parse_queues
from veglia.manage import get_profile
from veglia.schedulers import QueueInfo

if TYPE_CHECKING:
    from veglia.orm.computers import Computer
    from veglia.transports import Transport

__all__ = ["choose_queue", "queues_from_attribute", "queues_of"]

LOGGER = logging.getLogger("veglia.engine")


def _from_definitions(definitions: list[dict[str, Any]]) -> list[QueueInfo]:
    return [
        QueueInfo(
            name=d["name"],
            max_wallclock_seconds=d.get("max_walltime_seconds"),
            max_memory_kb=d["max_memory_mb"] * 1024 if d.get("max_memory_mb") else None,
            default=index == 0,
        )
        for index, d in enumerate(definitions)
    ]


def queues_of(computer: Computer, transport: Transport | None) -> list[QueueInfo]:
    """The queues jobs on ``computer`` may use, in order of preference ([] if unknown)."""

    declared = computer.get_property("queues")
    if declared:
        return _from_definitions(parse_queues(declared))
    if transport is not None:
        try:
            queues: list[QueueInfo] = computer.get_scheduler().get_queues(transport)
        except Exception as exc:  # limits help choose; without them the policy still works
            LOGGER.debug("could not list the queues of %s: %s", computer.label, exc)
            queues = []
        if queues:
            return queues
    return _from_definitions(get_profile().get_option("scheduler.queues") or [])


def queues_from_attribute(values: list[dict[str, Any]] | None) -> list[QueueInfo]:
    """The queues a node stored (its ``QUEUES`` attribute), as :class:`QueueInfo` objects."""
    return [QueueInfo(**value) for value in values or []]


def choose_queue(
    queues: list[QueueInfo],
    current: str | None,
    *,
    wallclock_seconds: int | None,
    memory_kb: int | None,
    nodes: int | None = None,
) -> QueueInfo | None:
    """The queue to use for these requests: the current one if it allows them, else the
    available queue with the shortest wall-time limit that does (then the least memory),
    so a job moves no further than it must."""
    by_name = {q.name: q for q in queues}
    now = by_name.get(current or "") or next((q for q in queues if q.default), None)
    if now is not None and now.available and now.allows(wallclock_seconds, memory_kb, nodes):
        return now
    fitting = [q for q in queues if q.available and q.allows(wallclock_seconds, memory_kb, nodes)]

    def size(queue: QueueInfo) -> tuple[float, float]:
        return (
            queue.max_wallclock_seconds or float("inf"),
            queue.max_memory_kb or float("inf"),
        )

    return min(fitting, key=size) if fitting else None
