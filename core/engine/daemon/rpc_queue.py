"""A worker's process RPCs (kill, pause, play) on one broker queue, bound once.

kiwipy gives each RPC subscriber a queue of its own: for a worker holding 10,000 jobs that
is 10,000 queues on RabbitMQ, three broker round trips to start each process, and a few kB
of client objects each. Binding one queue per worker to each process's key instead still
cost a binding and an unbinding a process: RabbitMQ keeps bindings in its metadata store,
and they were most of its CPU, about 1.2 ms a job, with as much again on the worker.

So a worker's queue is bound once, to the keys of its own processes,
``[rpc].w<token>.<pk>`` (the token of the worker's lease, :func:`rpc_recipient`): a sender
finds the worker from the process's lease and names both. A message for a process the
worker does not run (it ended, or is still loading) is answered with an error that says
so, as one sent before the process was bound used to find no route: the user tries again.
No lease, no worker: the key routes nowhere, and the sender acts on the process itself.

A subscriber is kept as given (a process's bound method) and wrapped for kiwipy when a
message comes: the wrappers, built at each process start, were about 1.5 kB per process
held for as long as it runs, and RPCs are rare. A process the worker holds dehydrated has
no subscriber: ``fallback`` gives one that wakes it and hands it the message.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import kiwipy
from kiwipy.rmq import defaults

from veglia.engine.daemon.leases import WorkerId

__all__ = ["PROCESS_GONE", "SharedRpcQueue", "rpc_recipient"]

PROCESS_GONE = "the process is no longer run by this worker; try again"


class SharedRpcQueue:
    """The RPC subscribers of one worker, on one queue of ``communicator``'s broker
    (a kiwipy ``RmqThreadCommunicator``); ``convert`` makes a subscriber one kiwipy calls
    (plumpy's ``convert_to_comm`` onto the worker's loop)."""

    def __init__(
        self,
        communicator: Any,
        token: str,
        convert: Callable[[Any], Any] = lambda s: s,
        fallback: Callable[[str], Any] = lambda key: None,
    ) -> None:
        self._communicator = communicator
        self._fallback = fallback
        self._prefix = f"{defaults.RPC_TOPIC}.w{token}."
        self._convert = convert
        self._subscribers: dict[str, Any] = {}
        self._queue: Any = None

    def add(self, subscriber: Any, identifier: Any) -> str:
        """As kiwipy's ``add_rpc_subscriber``: ``subscriber(communicator, message)``."""
        key = str(identifier)
        if key in self._subscribers:
            raise kiwipy.DuplicateSubscriberIdentifier(f"RPC identifier '{key}'")
        self.listen()
        self._subscribers[key] = subscriber
        return key

    def listen(self) -> None:
        """Declare, bind and consume the queue, once: at the first subscriber, or when the
        worker holds a process it never loaded (one found paused sleeps at once), whose
        messages reach it through ``fallback``."""
        if self._queue is None:
            self._await(self._declare())

    def remove(self, identifier: Any) -> None:
        key = str(identifier)
        if self._subscribers.pop(key, None) is None:
            raise ValueError(f"Unknown subscriber '{key}'")

    def _await(self, coroutine: Any) -> Any:
        return self._communicator._loop_scheduler.await_(coroutine)

    async def _messages(self) -> Any:
        """kiwipy's message subscriber: its channel, exchange and reply path."""
        return await self._communicator._communicator.get_message_subscriber()

    async def _declare(self) -> None:
        messages = await self._messages()
        if self._queue is not None:
            return
        queue = await messages._channel.declare_queue(
            exclusive=True, arguments=messages._rmq_queue_arguments
        )
        # aio-pika's robust queue declares and binds it again after a reconnection.
        await queue.bind(messages._exchange, routing_key=f"{self._prefix}*")
        await queue.consume(self._on_message)
        self._queue = queue

    async def _on_message(self, message: Any) -> None:
        key = message.routing_key.removeprefix(self._prefix)
        subscriber = self._subscribers.get(key) or self._fallback(key)
        if subscriber is None:
            subscriber = _gone
        else:
            # kiwipy's wrapper turns the subscriber's futures into ones of its own loop.
            subscriber = self._communicator._wrap_subscriber(self._convert(subscriber))
        # kiwipy's own handling: acknowledge, decode, call, and send the reply back.
        await (await self._messages())._on_rpc(subscriber, message)


def _gone(_communicator: Any, _message: Any) -> None:
    """A message for a process that left this worker between routing and delivery."""
    raise kiwipy.RemoteException(PROCESS_GONE)


def rpc_recipient(pk: int, worker: str) -> str:
    """The RPC recipient of process ``pk`` run by ``worker`` (a lease's holder)."""
    return f"w{WorkerId.token_of(worker)}.{pk}"
