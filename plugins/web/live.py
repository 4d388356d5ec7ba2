"""The live hub: one load of a view per second at most, shared by everyone who watches it.

A view is keyed by its page name and its arguments. :meth:`LiveHub.view` answers a page or an
API request with the view loaded in the last second, or loads it once for every request that
asks meanwhile. :meth:`LiveHub.watch` yields the view each time it changes, for a
server-sent-events stream; a key nobody watches is no longer loaded.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["MIN_INTERVAL", "LiveHub", "ViewKey", "view_key"]

#: Seconds between two loads of one view, however many browsers watch it.
MIN_INTERVAL = 1.0

ViewKey = tuple[str, tuple[tuple[str, Any], ...]]


def view_key(name: str, params: dict[str, Any]) -> ViewKey:
    return name, tuple(sorted(params.items()))


@dataclass
class _Channel:
    load: Callable[[], dict[str, Any]]
    view: dict[str, Any] | None = None
    error: BaseException | None = None
    loaded_at: float = float("-inf")
    #: Bumped when a load gives a view different from the one before (0: never loaded).
    version: int = 0
    pending: asyncio.Future[None] | None = None
    watchers: int = 0
    poller: asyncio.Task[None] | None = None
    #: Set, and replaced by a new one, when a load ends (whether the view changed or not).
    loaded: asyncio.Event = field(default_factory=asyncio.Event)


class LiveHub:
    """Views shared between requests and streams, by key; one instance per app."""

    def __init__(self, interval: float = MIN_INTERVAL) -> None:
        self.interval = interval
        self._channels: dict[ViewKey, _Channel] = {}

    def _channel(self, key: ViewKey, load: Callable[[], dict[str, Any]]) -> _Channel:
        channel = self._channels.get(key)
        if channel is None:
            channel = self._channels[key] = _Channel(load)
        return channel

    async def view(self, key: ViewKey, load: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """The view of ``key``: the one loaded within the last interval, or a new load."""
        channel = self._channel(key, load)
        try:
            if time.monotonic() - channel.loaded_at >= self.interval:
                await self._refresh(channel)
            if channel.error is not None:
                raise channel.error
            assert channel.view is not None
            return channel.view
        finally:
            self._evict_idle()

    async def watch(
        self, key: ViewKey, load: Callable[[], dict[str, Any]], heartbeat: float | None = None
    ) -> AsyncIterator[dict[str, Any] | BaseException | None]:
        """The view now, then each time it changes (or the error its load raised), and None
        after ``heartbeat`` seconds without a change; for as long as the caller iterates."""
        channel = self._channel(key, load)
        channel.watchers += 1
        if channel.poller is None:
            channel.poller = asyncio.create_task(self._poll(channel))
        try:
            seen = 0  # the first load makes it 1
            while True:
                if channel.version == seen:
                    # An event, not a condition: cancelling a wait for it (the heartbeat's
                    # timeout, a closed stream) leaves no lock half taken.
                    with contextlib.suppress(asyncio.TimeoutError):
                        await asyncio.wait_for(_new_version(channel, seen), heartbeat)
                changed = channel.version != seen
                seen = channel.version
                if not changed:
                    yield None
                elif channel.error is not None:
                    yield channel.error
                else:
                    yield channel.view
        finally:
            # The poller ends by itself once nobody watches: cancelled, it could leave a
            # load half done for a request that waits on it.
            channel.watchers -= 1
            self._evict_idle()

    def _evict_idle(self) -> None:
        """Drop the views nobody watched or asked for lately: a key nobody watches costs
        nothing but its memory, until then."""
        too_old = time.monotonic() - 30 * self.interval
        for key, channel in list(self._channels.items()):
            if channel.watchers == 0 and channel.pending is None and channel.loaded_at < too_old:
                del self._channels[key]

    async def _poll(self, channel: _Channel) -> None:
        try:
            while channel.watchers > 0:
                wait = channel.loaded_at + self.interval - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                if channel.watchers == 0:
                    break
                await self._refresh(channel)
        finally:
            channel.poller = None

    async def _refresh(self, channel: _Channel) -> None:
        """Load the view once, in a worker thread; concurrent callers share that load."""
        if channel.pending is not None:
            await asyncio.shield(channel.pending)
            return
        channel.pending = asyncio.get_running_loop().create_future()
        try:
            try:
                view = await asyncio.to_thread(channel.load)
                error = None
            except Exception as exc:  # shown to whoever asks; the next load may succeed
                view, error = None, exc
            if _fingerprint(view, error) != _fingerprint(channel.view, channel.error):
                channel.version += 1
            channel.view, channel.error = view, error
            channel.loaded_at = time.monotonic()
            loaded, channel.loaded = channel.loaded, asyncio.Event()
            loaded.set()
        finally:
            channel.pending.set_result(None)
            channel.pending = None


async def _new_version(channel: _Channel, seen: int) -> None:
    """Until the channel's version is not ``seen``."""
    while channel.version == seen:
        await channel.loaded.wait()


def _fingerprint(view: dict[str, Any] | None, error: BaseException | None) -> tuple:
    # The view itself, compared with ==: as exact as its JSON text, and a workflow of
    # 2,000 steps compares in a few ms where json.dumps(sort_keys=True) took 40.
    if error is not None:
        return ("error", f"{type(error).__name__}: {error}")
    return ("view", view)
