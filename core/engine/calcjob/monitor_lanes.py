"""The threads monitor calls run on: a lane of its own for each monitor entry point.

Python cannot kill a thread, so a monitor call that hangs keeps the thread it runs on for
good. With one shared pool, eight hung calls of one plugin stalled every other plugin's
monitors on the worker. Here each entry point has at most ``THREADS_PER_LANE`` threads of its
own: a plugin that hangs holds only its own lane's threads, its further calls wait in its own
queue (and give up when their timeout passes there), and every other plugin's calls start at
once. The threads are daemon threads, started only when a call finds none idle, so a hung
call never keeps a worker from exiting, and a worker holds at most ``THREADS_PER_LANE``
threads per entry point its jobs use.

``concurrent.futures.ThreadPoolExecutor`` is not used for the lanes because its threads are
joined when the interpreter exits: one hung monitor would keep the worker from ever exiting.

``async def`` monitors run on their lane too, each lane thread with an event loop of its own:
an async monitor that blocks (a ``time.sleep`` in it) then blocks its own lane, never the
worker's event loop.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from typing import Any

from veglia.exceptions import MonitorTimeout

__all__ = ["THREADS_PER_LANE", "Lane", "lane_of", "run_coroutine"]

#: The most calls of one monitor entry point that run at once in a worker.
THREADS_PER_LANE = 4

_LANES: dict[str, Lane] = {}
_LOCAL = threading.local()


class Lane:
    """Up to ``size`` daemon threads running the calls of one entry point, in order."""

    def __init__(self, name: str, size: int = THREADS_PER_LANE) -> None:
        self.name = name
        self.size = size
        self._calls: queue.SimpleQueue[tuple[Future[Any], Callable[[], Any]]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0
        self._idle = 0

    @property
    def threads(self) -> int:
        """Threads started so far (hung ones included)."""
        return self._threads

    def submit(self, call: Callable[[], Any]) -> Future[Any]:
        """Run ``call`` on a thread of this lane; a call waiting for a thread may be
        cancelled through the future (``Future.cancel``) and then never starts."""
        future: Future[Any] = Future()
        self._calls.put((future, call))
        with self._lock:
            # An idle thread takes it; else a new one, as long as the lane has room; else it
            # waits for one of this lane's threads, and only this lane's calls wait with it.
            if self._idle:
                self._idle -= 1
            elif self._threads < self.size:
                self._threads += 1
                name = f"veglia-monitor-{self.name}-{self._threads}"
                threading.Thread(target=self._work, name=name, daemon=True).start()
        return future

    def _work(self) -> None:
        while True:
            future, call = self._calls.get()
            if future.set_running_or_notify_cancel():
                try:
                    result = call()
                except BaseException as exc:  # the monitor's fault, handed to the engine
                    future.set_exception(exc)
                else:
                    future.set_result(result)
                del future, call  # nothing of the call is kept while idle
            with self._lock:
                self._idle += 1


def lane_of(entry_point: str) -> Lane:
    """The lane of a monitor entry point (made at its first call in this process)."""
    lane = _LANES.get(entry_point)
    if lane is None:
        lane = _LANES.setdefault(entry_point, Lane(entry_point))
    return lane


def run_coroutine(make: Callable[[], Coroutine[Any, Any, Any]], timeout: float) -> Any:
    """Run an ``async def`` monitor's call to its end, on this lane thread's own event loop;
    it is cancelled at ``timeout`` (:class:`MonitorTimeout`), which frees the thread unless
    the monitor blocks without awaiting."""
    loop = getattr(_LOCAL, "loop", None)
    if loop is None:
        loop = _LOCAL.loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(asyncio.wait_for(make(), timeout))
    except asyncio.TimeoutError:
        raise MonitorTimeout(f"timed out after {timeout:g} s") from None
