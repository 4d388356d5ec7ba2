"""A worker's process RPCs (kill, pause, play) on one broker queue, not one per process.

kiwipy gives each RPC subscriber a queue of its own: for a worker holding 10,000 jobs that
is 10,000 queues on RabbitMQ, three broker round trips to start each process, and a few kB
of client objects each. Here the worker declares one queue and binds it once per process
(``rpc.<pid>``, the routing key senders already use); a message goes to the process its
routing key names. Senders see no difference.

Binding and unbinding a process's key are not waited for (only the first bind, which
declares the queue): each is a broker round trip the worker's loop would otherwise stall
for at every process start and end. They run on kiwipy's loop in the order they were
asked for. Until a bind is done, an RPC to that process finds no route, as it did before
while the process was loading: the sender says so and the user tries again.

A subscriber is kept as given (a process's bound method) and wrapped for kiwipy when a
message comes: the wrappers, built at each process start, were about 1.5 kB per process
held for as long as it runs, and RPCs are rare.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Callable
from typing import Any

import kiwipy
from kiwipy.rmq import defaults

__all__ = ["SharedRpcQueue"]

LOGGER = logging.getLogger("veglia.broker")


class SharedRpcQueue:
    """The RPC subscribers of one worker, on one queue of ``communicator``'s broker
    (a kiwipy ``RmqThreadCommunicator``); ``convert`` makes a subscriber one kiwipy calls
    (plumpy's ``convert_to_comm`` onto the worker's loop)."""

    def __init__(self, communicator: Any, convert: Callable[[Any], Any] = lambda s: s) -> None:
        self._communicator = communicator
        self._convert = convert
        self._subscribers: dict[str, Any] = {}
        self._queue: Any = None
        #: The last bind or unbind handed to kiwipy's loop: the next one runs after it.
        self._last: Any = None

    def add(self, subscriber: Any, identifier: Any) -> str:
        """As kiwipy's ``add_rpc_subscriber``: ``subscriber(communicator, message)``."""
        key = str(identifier)
        if key in self._subscribers:
            raise kiwipy.DuplicateSubscriberIdentifier(f"RPC identifier '{key}'")
        self._subscribers[key] = subscriber
        if self._queue is not None:
            self._in_order(self._bind(key), key, "bind")
            return key
        try:  # the first: the queue is declared and consumed before anything else
            self._await(self._bind(key))
        except BaseException:
            self._subscribers.pop(key, None)
            raise
        return key

    def remove(self, identifier: Any) -> None:
        key = str(identifier)
        if self._subscribers.pop(key, None) is None:
            raise ValueError(f"Unknown subscriber '{key}'")
        self._in_order(self._unbind(key), key, "unbind")

    def _in_order(self, coroutine: Any, key: str, what: str) -> None:
        """Run ``coroutine`` on kiwipy's loop once the operations asked for before it are
        done, without waiting for it."""
        previous = self._last

        async def after_previous() -> None:
            if previous is not None:
                with contextlib.suppress(BaseException):
                    await asyncio.wrap_future(previous)
            await coroutine

        future = self._communicator._loop_scheduler.await_submit(after_previous())
        future.add_done_callback(functools.partial(_log_failure, key, what))
        self._last = future

    def _await(self, coroutine: Any) -> Any:
        return self._communicator._loop_scheduler.await_(coroutine)

    async def _messages(self) -> Any:
        """kiwipy's message subscriber: its channel, exchange and reply path."""
        return await self._communicator._communicator.get_message_subscriber()

    async def _bind(self, key: str) -> None:
        messages = await self._messages()
        if self._queue is None:
            queue = await messages._channel.declare_queue(
                exclusive=True, arguments=messages._rmq_queue_arguments
            )
            await queue.consume(self._on_message)
            self._queue = queue
        await self._queue.bind(messages._exchange, routing_key=f"{defaults.RPC_TOPIC}.{key}")

    async def _unbind(self, key: str) -> None:
        messages = await self._messages()
        await self._queue.unbind(messages._exchange, routing_key=f"{defaults.RPC_TOPIC}.{key}")

    async def _on_message(self, message: Any) -> None:
        key = message.routing_key.removeprefix(f"{defaults.RPC_TOPIC}.")
        subscriber = self._subscribers.get(key)
        if subscriber is None:
            subscriber = _gone
        else:
            # kiwipy's wrapper turns the subscriber's futures into ones of its own loop.
            subscriber = self._communicator._wrap_subscriber(self._convert(subscriber))
        # kiwipy's own handling: acknowledge, decode, call, and send the reply back.
        await (await self._messages())._on_rpc(subscriber, message)


def _log_failure(key: str, what: str, future: Any) -> None:
    if future.cancelled():
        return
    error = future.exception()
    if error is not None:  # the broker connection went: the worker's tasks come back anyway
        LOGGER.warning("could not %s the RPC key of process %s: %s", what, key, error)


def _gone(_communicator: Any, _message: Any) -> None:
    """A message for a process that left this worker between routing and delivery."""
    raise kiwipy.RemoteException("the process is no longer run by this worker; try again")
