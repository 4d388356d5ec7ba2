"""A worker's task subscriber, handed to kiwipy without plumpy's chain of futures.

plumpy's ``LoopCommunicator`` runs a task subscriber on the worker's loop through a wrapper
coroutine, an asyncio future, a ``concurrent.futures`` future of
``run_coroutine_threadsafe`` and a kiwipy (``concurrent.futures``) future, each of the last
two with a lock and a condition. A task is acknowledged only when its process ends, so a
worker holding 10,000 waiting jobs held 10,000 such chains: about 3 kB each. Here a task is
one task on the worker's loop and one asyncio future on kiwipy's, resolved across threads
with ``call_soon_threadsafe``; kiwipy sees the same outcome as before.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

__all__ = ["task_bridge"]

TaskSubscriber = Callable[[Any, Any], Coroutine[Any, Any, Any]]


def task_bridge(
    subscriber: TaskSubscriber, loop: asyncio.AbstractEventLoop
) -> Callable[[Any, Any], asyncio.Future[Any]]:
    """A subscriber for kiwipy's thread communicator that runs ``subscriber`` on ``loop``.

    kiwipy calls it on its own loop's thread and awaits the future it returns there.
    """

    def bridged(communicator: Any, task: Any) -> asyncio.Future[Any]:
        reply_loop = asyncio.get_running_loop()  # kiwipy's
        outcome = reply_loop.create_future()

        def finish(done: asyncio.Task[Any]) -> None:
            if done.cancelled():
                # As with plumpy's chain: the task is neither acknowledged nor rejected; the
                # broker delivers it again once this worker's channel closes.
                return
            error = done.exception()
            if error is not None:
                reply_loop.call_soon_threadsafe(_settle, outcome, None, error)
            else:
                reply_loop.call_soon_threadsafe(_settle, outcome, done.result(), None)

        def start() -> None:
            loop.create_task(subscriber(communicator, task)).add_done_callback(finish)

        loop.call_soon_threadsafe(start)
        return outcome

    return bridged


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.done():  # kiwipy gave up on it (its channel closed)
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)
