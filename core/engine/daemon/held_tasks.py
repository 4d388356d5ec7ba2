"""A worker's tasks held as their delivery tags, not as kiwipy's message objects.

A task is acknowledged when its process ends, so a worker holds one per process it runs.
kiwipy holds each in a coroutine of its consumer that awaits the outcome, with the decoded
AMQP message (frames, properties, body), its ``RmqIncomingTask`` and a context manager
around it: about 6 kB per task, 60 MB for a worker holding 10,000 waiting jobs. Here a task
whose sender wants no reply (every task veglia sends) is handed to the subscriber as
kiwipy would, and only the channel and delivery tag are kept to acknowledge it once the
subscriber's outcome is done. kiwipy's path is kept for anything else.

What kiwipy does with an outcome is kept too: a result or an exception acknowledges the
task (an exception is logged); a cancelled outcome leaves it unacknowledged, for the
broker to deliver again once the channel closes.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from typing import Any

from kiwipy.rmq import utils

__all__ = ["hold"]

LOGGER = logging.getLogger("veglia.broker")
#: Acknowledgements under way (the loop keeps only weak references to tasks).
_ACKS: set[asyncio.Task[Any]] = set()


async def hold(consumer: Any, message: Any, task: Any, no_reply: bool) -> bool:
    """Hand ``task`` to the consumer's one subscriber and keep only what acknowledging it
    needs; False (nothing done) when kiwipy's own path must take the message."""
    # kiwipy's private table (0.8 and 0.9, which pyproject allows): without it, its own path.
    subscribers = list(getattr(consumer, "_subscribers", {}).values())
    if not no_reply or len(subscribers) != 1:
        return False
    try:
        channel = message.channel
    except Exception:  # closed already: the broker delivers the task again
        return False
    tag = message.delivery_tag
    try:
        result = await utils.ensure_coroutine(subscribers[0])(consumer, task)
    except Exception:
        LOGGER.exception("a process task failed")
        _acknowledge(channel, tag)
        return True
    _when_done(channel, tag, result)
    return True


def _when_done(channel: Any, tag: int, result: Any) -> None:
    if asyncio.isfuture(result):
        result.add_done_callback(functools.partial(_settled, channel, tag))
    else:
        _acknowledge(channel, tag)


def _settled(channel: Any, tag: int, outcome: asyncio.Future[Any]) -> None:
    if outcome.cancelled():
        return  # not processed: it stays unacknowledged (as with kiwipy)
    error = outcome.exception()
    if error is not None:
        LOGGER.error("a process task failed", exc_info=error)
        _acknowledge(channel, tag)
    else:
        _when_done(channel, tag, outcome.result())  # a future of a future: wait for it too


def _acknowledge(channel: Any, tag: int) -> None:
    ack = asyncio.ensure_future(_ack(channel, tag))
    _ACKS.add(ack)
    ack.add_done_callback(_ACKS.discard)


async def _ack(channel: Any, tag: int) -> None:
    if channel.is_closed:  # the broker has requeued it: another delivery will be acknowledged
        return
    with contextlib.suppress(Exception):  # closed meanwhile: the same
        await channel.basic_ack(delivery_tag=tag)
