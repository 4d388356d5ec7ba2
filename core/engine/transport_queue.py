"""One open transport per (computer, user), shared by every task of a worker that needs it.

``safe_interval`` is the minimum time between two connection opens to the same computer
(the throttle clusters ask for), not a delay before every use: a task that finds the
connection open uses it at once. A connection nobody has used for ``idle_timeout`` seconds is
closed. Each connection has one thread of its own, so transport calls (blocking paramiko
I/O) never stall the event loop and never run concurrently on one connection.

A lease names the ``version`` of the settings it wants (see ``computer_settings``): when
they changed (`veglia computer configure`), a new connection is made with them and the old
one is closed as soon as no task uses it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from veglia.engine.metrics import METRICS
from veglia.transports import Transport

if TYPE_CHECKING:
    from veglia.orm.computers import Computer

__all__ = ["TransportLease", "TransportLender", "TransportQueue"]

T = TypeVar("T")


@dataclass
class _Entry:
    transport: Transport
    safe_interval: float
    executor: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(1, thread_name_prefix="veglia-transport")
    )
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0
    last_open: float = float("-inf")
    close_handle: asyncio.TimerHandle | None = None
    version: str = ""
    #: Replaced by a connection with newer settings: closed when its last user is done.
    retired: bool = False


class TransportLease:
    """What a task holds while it uses a transport: run calls on its thread."""

    def __init__(self, entry: _Entry, loop: asyncio.AbstractEventLoop) -> None:
        self._entry = entry
        self._loop = loop

    @property
    def transport(self) -> Transport:
        return self._entry.transport

    async def run(self, function: Callable[..., T], *args: Any) -> T:
        """Call ``function(*args)`` on the connection's own thread."""
        return await self._loop.run_in_executor(self._entry.executor, function, *args)


class TransportLender(Protocol):
    """What leases a computer's transport: the engine's ``Runner``, which makes the pollers
    and file batchers that lease through it (so they name it by what it does)."""

    def lease_transport(self, computer: Computer) -> AbstractAsyncContextManager[TransportLease]:
        """A lease on the transport of ``computer``, open for the ``async with`` block."""
        ...


class TransportQueue:
    """Leases of shared, throttled, idle-closed transports."""

    def __init__(self, idle_timeout: float = 60.0) -> None:
        self.idle_timeout = idle_timeout
        self._entries: dict[tuple[Any, ...], _Entry] = {}

    def _entry(
        self, key: tuple[Any, ...], factory: Callable[[], Transport], safe: float, version: str
    ) -> _Entry:
        entry = self._entries.get(key)
        if entry is not None and entry.version != version:
            self._retire(key, entry)
            # Still one computer: the throttle between opens goes on from the last one.
            last_open, entry = entry.last_open, None
        else:
            last_open = float("-inf")
        if entry is None:
            entry = self._entries[key] = _Entry(factory(), safe, version=version)
            entry.last_open = last_open
        return entry

    def _retire(self, key: tuple[Any, ...], entry: _Entry) -> None:
        del self._entries[key]
        entry.retired = True
        if entry.users == 0:
            self._shut(entry)

    @staticmethod
    def _shut(entry: _Entry) -> None:
        if entry.close_handle is not None:
            entry.close_handle.cancel()
            entry.close_handle = None
        entry.executor.submit(entry.transport.close)
        entry.executor.shutdown(wait=False)

    @asynccontextmanager
    async def lease(
        self,
        key: tuple[Any, ...],
        factory: Callable[[], Transport],
        safe_interval: float,
        version: str = "",
    ) -> AsyncIterator[TransportLease]:
        """Hold the open transport for ``key`` (computer pk, user pk) for the block, one made
        with the settings of ``version``."""
        loop = asyncio.get_running_loop()
        entry = self._entry(key, factory, safe_interval, version)
        entry.users += 1
        if entry.close_handle is not None:
            entry.close_handle.cancel()
            entry.close_handle = None
        try:
            lease = TransportLease(entry, loop)
            async with entry.lock:
                if not entry.transport.is_open:
                    wait = entry.last_open + entry.safe_interval - time.monotonic()
                    if wait > 0:
                        await asyncio.sleep(wait)
                    entry.last_open = time.monotonic()
                    METRICS.transport_opens += 1
                    await lease.run(entry.transport.open)
            yield lease
        finally:
            entry.users -= 1
            if entry.users == 0 and entry.retired:
                self._shut(entry)
            elif entry.users == 0:
                entry.close_handle = loop.call_later(self.idle_timeout, self._close_idle, key)

    def _close_idle(self, key: tuple[Any, ...]) -> None:
        entry = self._entries.get(key)
        if entry is not None and entry.users == 0:
            entry.close_handle = None
            entry.executor.submit(entry.transport.close)

    def close(self) -> None:
        """Close every connection (at worker shutdown)."""
        for entry in self._entries.values():
            if entry.close_handle is not None:
                entry.close_handle.cancel()
            entry.executor.submit(entry.transport.close)
            entry.executor.shutdown(wait=True)
        self._entries.clear()
